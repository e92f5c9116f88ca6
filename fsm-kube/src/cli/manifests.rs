//! `manifests`: everything a cluster needs to run the operator, as one
//! multi-document YAML stream for `kubectl apply -f -`: the CRD, a
//! ServiceAccount, the least RBAC ([`super::rbac`]) bound to it, a
//! Deployment (leader election on, or sharding with `--shards`; probes on
//! `/healthz` and `/readyz`, the
//! metrics port, non-root with a read-only root filesystem, resource
//! requests) and a PodDisruptionBudget; with `--view-expose`, the web
//! view's Service and a NetworkPolicy restricting who reaches it; for an
//! operator serving several versions of its resource, the conversion
//! webhook's Service and a Secret with a generated certificate, mounted
//! into the pods, whose CA the CRD trusts.
//!
//! [`deploy_manifests`] computes; the CLI prints.

use clap::{Args, ValueEnum};
use fsm_core::Fsm;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Value, json};

use super::rbac::{self, OperatorDescription, RbacScope};
use super::{CrdArgs, Error, Operator, StoreKind, ViewAuth, crd_yaml};
use crate::KubeResource;
use crate::admission::{AdmissionClient, admission_policy, validating_webhook_configuration};
use crate::http::webhook::{CA_FILE, CERT_FILE, KEY_FILE, WebhookCertificates};
use crate::records::ResourceInfo;
use crate::versions::WebhookTarget;

/// The port `run --http-addr` listens on in the Deployment, unless
/// `--http-port` says otherwise.
pub const DEFAULT_HTTP_PORT: u16 = 8080;

/// The port `run --webhook-addr` listens on in the Deployment, unless
/// `--webhook-port` says otherwise.
pub const DEFAULT_WEBHOOK_PORT: u16 = 9443;

/// Where the pods mount the webhook's certificate Secret
/// (`run --webhook-cert-dir`).
pub const WEBHOOK_CERT_DIR: &str = "/var/run/operator-fsm/webhook";

/// The pod template's annotation naming the webhook certificate the pods
/// serve ([`WebhookCertificates::fingerprint`]): a new certificate rolls
/// them.
pub const WEBHOOK_CERT_ANNOTATION: &str = "operator-fsm.io/webhook-cert";

/// The label of the pods the NetworkPolicy of `--view-expose` admits to
/// the view's port (its value: the operator's name).
pub const VIEW_CLIENT_LABEL: &str = "operator-fsm.io/view-client";

/// The user and group the container runs as: distroless' `nonroot`.
pub const NON_ROOT_ID: i64 = 65532;

/// `manifests`.
#[derive(Clone, Debug, PartialEq, Eq, Args)]
pub struct ManifestsArgs {
    /// The operator's container image.
    #[arg(long, value_name = "IMAGE")]
    pub image: String,
    /// The namespace the operator runs in (its ServiceAccount, Deployment,
    /// PodDisruptionBudget and Lease).
    #[arg(long, short = 'n', value_name = "NS")]
    pub namespace: String,
    /// Replicas; with leader election one reconciles, the others stand
    /// by; with `--shards` they share the objects.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(i32).range(1..))]
    pub replicas: i32,
    /// The port of `/metrics`, `/healthz` and `/readyz`.
    #[arg(long, value_name = "PORT", default_value_t = DEFAULT_HTTP_PORT, alias = "metrics-port")]
    pub http_port: u16,
    /// Watch this namespace only: a Role there instead of a ClusterRole,
    /// and `run --namespace NS`.
    #[arg(long, value_name = "NS")]
    pub watch_namespace: Option<String>,
    /// The PodDisruptionBudget's API version: `policy/v1beta1` for
    /// clusters older than Kubernetes 1.21.
    #[arg(long, value_enum, value_name = "VERSION", default_value_t)]
    pub pdb_api_version: PdbApiVersion,
    /// Run in sharded mode (`run --shards`, each pod's shard Lease named
    /// after it) instead of leader election, with the RBAC it needs.
    #[arg(long)]
    pub shards: bool,
    /// Serve the read-only web view on this port of the pod's loopback
    /// (`run --view-addr 127.0.0.1:PORT`; reach it with `kubectl
    /// port-forward`, which RBAC guards), with the RBAC it reads with.
    #[arg(long, value_name = "PORT")]
    pub view_port: Option<u16>,
    /// Expose the web view beyond the pod: `run --view-addr 0.0.0.0:PORT`,
    /// container port `view`, a Service `<operator>-view`, and a
    /// NetworkPolicy admitting to that port only pods labelled
    /// `operator-fsm.io/view-client: <operator>` (the proxy or Ingress
    /// controller you put in front). The view lets in only bearer tokens of
    /// someone allowed to list the operator's resource (`--view-auth`).
    #[arg(long, requires = "view_port")]
    pub view_expose: bool,
    /// Who may see the view (`run --view-auth`): `kubernetes` (the default
    /// with --view-expose; adds the ClusterRole `<operator>-view-access`
    /// for its TokenReviews and SubjectAccessReviews) or `none` (the
    /// default on the pod's loopback; with --view-expose, only for an
    /// authenticating proxy in front that does not pass a Kubernetes
    /// token on).
    #[arg(long, value_enum, value_name = "MODE", requires = "view_port")]
    pub view_auth: Option<ViewAuth>,
    /// A `Host` the view answers besides localhost and the Service's own
    /// names (`run --view-allowed-host`), repeatable: the name of the
    /// Ingress or proxy in front of it.
    #[arg(
        long = "view-allowed-host",
        value_name = "HOST",
        requires = "view_expose"
    )]
    pub view_allowed_hosts: Vec<String>,
    /// The port the webhooks listen on in the pods (an operator serving
    /// several versions, or admission; its Service listens on 443).
    #[arg(long, value_name = "PORT", default_value_t = DEFAULT_WEBHOOK_PORT)]
    pub webhook_port: u16,
    /// How the machine's admission rules (`immutable`, `grow_only`,
    /// `refuse_delete`, and `.status.fsm` written by the operator only)
    /// are enforced: `auto` (the webhook when a state declares a rule,
    /// else none), `webhook`, `cel` (a ValidatingAdmissionPolicy,
    /// Kubernetes 1.30+, status store only) or `none`.
    #[arg(long, value_enum, value_name = "MODE", default_value_t)]
    pub admission: AdmissionMode,
    /// More arguments for `run` (the operator's own flags), repeatable:
    /// `--arg=--cloud-url=http://cloud`.
    #[arg(long = "arg", value_name = "ARG", allow_hyphen_values = true)]
    pub run_args: Vec<String>,
}

/// How `manifests` enforces the machine's admission rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum AdmissionMode {
    /// The webhook when a state declares a rule, else none.
    #[default]
    Auto,
    /// The operator's validating webhook (`/validate`), with
    /// `.status.fsm` guarded for its ServiceAccount.
    Webhook,
    /// A `ValidatingAdmissionPolicy` and its binding, checked by the API
    /// server (Kubernetes 1.30+; status store only).
    Cel,
    /// No admission.
    None,
}

impl AdmissionMode {
    /// The mode `auto` stands for, for a machine that does or does not
    /// declare rules.
    fn resolve(self, machine_declares_rules: bool) -> Self {
        match self {
            AdmissionMode::Auto if machine_declares_rules => AdmissionMode::Webhook,
            AdmissionMode::Auto => AdmissionMode::None,
            other => other,
        }
    }
}

/// The API version of the PodDisruptionBudget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum PdbApiVersion {
    /// `policy/v1`, Kubernetes 1.21 and later.
    #[default]
    #[value(name = "policy/v1")]
    V1,
    /// `policy/v1beta1`, before 1.21 (removed in 1.25).
    #[value(name = "policy/v1beta1")]
    V1beta1,
}

impl PdbApiVersion {
    fn as_str(self) -> &'static str {
        match self {
            PdbApiVersion::V1 => "policy/v1",
            PdbApiVersion::V1beta1 => "policy/v1beta1",
        }
    }
}

impl<F, A> Operator<F, A>
where
    F: Fsm,
    F::Resource: KubeResource + CustomResourceExt,
    A: Args + Clone + Send + Sync + 'static,
{
    /// What `manifests` prints ([`deploy_manifests`]), the CRD being what
    /// `crd` prints ([`crd_definition`](Self::crd_definition)): the
    /// machine published on it, which `kubectl fsm` reads. With other
    /// versions ([`served_version`](Self::served_version)), the
    /// conversion webhook too ([`deploy_manifests_with_webhook`]), with a
    /// certificate generated for its Service (a new one each time).
    ///
    /// # Errors
    /// A declared rule is refused; the versions do not make one CRD; the
    /// certificate cannot be generated.
    pub fn manifests(&self, args: &ManifestsArgs) -> Result<String, Error> {
        let mut crd = self.crd_without_conversion(&CrdArgs::default())?;
        let admission = args
            .admission
            .resolve(F::machine().declares_admission_rules());
        let resource = ResourceInfo::of::<F::Resource>();
        let operator_user = format!("system:serviceaccount:{}:{}", args.namespace, self.name);
        if admission == AdmissionMode::Cel && self.store != StoreKind::Status {
            return Err(Error::AdmissionPolicyNeedsStatusStore(self.store));
        }
        let spokes = self.versions().has_spokes();
        let mut out = if !spokes && admission != AdmissionMode::Webhook {
            deploy_manifests(&self.description(), &crd, args)?
        } else {
            let service = webhook_service_name(&self.name);
            let certs = WebhookCertificates::for_service(&service, &args.namespace)?;
            if spokes {
                WebhookTarget::Service {
                    namespace: args.namespace.clone(),
                    name: service.clone(),
                    port: 443,
                }
                .set_on(&mut crd, certs.ca_pem.as_bytes());
            }
            let mut out =
                deploy_manifests_with_webhook(&self.description(), &crd, args, Some(&certs))?;
            if admission == AdmissionMode::Webhook {
                let client = AdmissionClient::Service {
                    namespace: args.namespace.clone(),
                    name: service,
                };
                let configuration =
                    validating_webhook_configuration(&resource, &client, certs.ca_pem.as_bytes());
                push(&mut out, &to_json(&configuration)?)?;
            }
            out
        };
        if admission == AdmissionMode::Cel {
            let (policy, binding) = admission_policy(
                F::machine(),
                &resource,
                std::slice::from_ref(&operator_user),
            );
            push(&mut out, &to_json(&policy)?)?;
            push(&mut out, &to_json(&binding)?)?;
        }
        Ok(out)
    }
}

/// The deploy manifests of `operator`, whose resource is defined by `crd`:
/// the CRD, then the ServiceAccount, the RBAC and its bindings, the
/// Deployment and the PodDisruptionBudget, and with `--view-expose` the
/// view's Service and NetworkPolicy, each a YAML document.
///
/// Every object is labelled `app.kubernetes.io/name: <operator>` and
/// `app.kubernetes.io/managed-by: operator-fsm`; the pods are selected by
/// the name label alone.
///
/// # Errors
/// A declared rule is refused ([`rbac::manifests`]); serialization failed
/// (not expected).
pub fn deploy_manifests(
    operator: &OperatorDescription,
    crd: &CustomResourceDefinition,
    args: &ManifestsArgs,
) -> Result<String, Error> {
    deploy_manifests_with_webhook(operator, crd, args, None)
}

/// [`deploy_manifests`], and with `webhook` the conversion webhook: a
/// Secret `<operator>-webhook-tls` holding `certs` (`tls.crt`, `tls.key`,
/// `ca.crt`) mounted at [`WEBHOOK_CERT_DIR`], `run --webhook-addr
/// 0.0.0.0:<--webhook-port>`, and the Service `<operator>-webhook` (port
/// 443) that `crd`'s `spec.conversion` names, which must trust
/// `certs.ca_pem`.
///
/// # Errors
/// As [`deploy_manifests`].
pub fn deploy_manifests_with_webhook(
    operator: &OperatorDescription,
    crd: &CustomResourceDefinition,
    args: &ManifestsArgs,
    webhook: Option<&WebhookCertificates>,
) -> Result<String, Error> {
    let name = operator.name.as_str();
    let namespace = args.namespace.as_str();
    let scope = RbacScope {
        namespace: args.watch_namespace.clone(),
        lease_namespace: (!args.shards).then(|| namespace.to_owned()),
        lease_name: None,
    };
    let mut roles = rbac::manifests(operator, &scope)?;
    if args.view_port.is_some() {
        roles = rbac::with_view_rules(roles, operator);
    }
    if view_auth(args) == Some(ViewAuth::Kubernetes) {
        roles.push(rbac::view_access_role(operator));
    }
    if args.shards {
        roles.push(rbac::sharding_role(operator, namespace));
    }

    let mut out = rbac::caveat_comments(&rbac::caveats(&roles));
    out.push_str(&crd_yaml(crd)?);
    push(&mut out, &service_account(name, namespace))?;
    out.push_str(&rbac::to_yaml(&roles).map_err(Error::Yaml)?);
    for role in &roles {
        push(&mut out, &binding(name, namespace, role))?;
    }
    if let Some(certs) = webhook {
        push(&mut out, &webhook_secret(name, namespace, certs))?;
        push(&mut out, &webhook_service(name, namespace))?;
    }
    push(&mut out, &deployment(name, args, webhook))?;
    push(
        &mut out,
        &disruption_budget(name, namespace, args.pdb_api_version),
    )?;
    if let (true, Some(port)) = (args.view_expose, args.view_port) {
        push(&mut out, &view_service(name, namespace, port))?;
        push(
            &mut out,
            &view_network_policy(name, namespace, webhook.is_some()),
        )?;
    }
    Ok(out)
}

/// The view's access check in the Deployment: `--view-auth`, else
/// `kubernetes` when exposed and none on the pod's loopback (what `run`
/// takes without the flag); `None` without a view.
fn view_auth(args: &ManifestsArgs) -> Option<ViewAuth> {
    args.view_port?;
    Some(args.view_auth.unwrap_or(if args.view_expose {
        ViewAuth::Kubernetes
    } else {
        ViewAuth::None
    }))
}

/// A typed object as JSON, for [`push`].
fn to_json(object: &impl serde::Serialize) -> Result<Value, Error> {
    serde_json::to_value(object).map_err(Error::Json)
}

fn push(out: &mut String, object: &Value) -> Result<(), Error> {
    out.push_str("---\n");
    out.push_str(&serde_yaml_ng::to_string(object).map_err(Error::Yaml)?);
    Ok(())
}

fn labels(name: &str) -> Value {
    json!({
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/managed-by": "operator-fsm",
    })
}

fn metadata(name: &str, operator: &str, namespace: Option<&str>) -> Value {
    let mut meta = json!({ "name": name, "labels": labels(operator) });
    if let Some(namespace) = namespace {
        meta["namespace"] = json!(namespace);
    }
    meta
}

fn service_account(name: &str, namespace: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata(name, name, Some(namespace)),
    })
}

/// The binding of `role` to the operator's ServiceAccount: a
/// ClusterRoleBinding for a ClusterRole, a RoleBinding (in the Role's
/// namespace) for a Role.
fn binding(operator: &str, namespace: &str, role: &rbac::RbacObject) -> Value {
    let (kind, role_kind, role_namespace) = match role {
        rbac::RbacObject::ClusterRole(_) => ("ClusterRoleBinding", "ClusterRole", None),
        rbac::RbacObject::Role(role) => ("RoleBinding", "Role", role.metadata.namespace.as_deref()),
    };
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": metadata(role.name(), operator, role_namespace),
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": role.name(),
        },
        "subjects": [{
            "kind": "ServiceAccount",
            "name": operator,
            "namespace": namespace,
        }],
    })
}

/// The arguments of `run` in the container: leader election (or
/// `--shards`) and the HTTP endpoint on every interface; the web view on
/// the pod's loopback (`--view-port`), or on every interface with the
/// allowed hosts (`--view-expose`; the Deployment adds the names of the
/// view's Service); then the operator's own.
pub fn run_args(args: &ManifestsArgs) -> Vec<String> {
    let mode = if args.shards {
        "--shards"
    } else {
        "--leader-elect"
    };
    let mut out = vec![
        "run".to_owned(),
        mode.to_owned(),
        "--http-addr".to_owned(),
        format!("0.0.0.0:{}", args.http_port),
    ];
    if let Some(watched) = &args.watch_namespace {
        out.extend(["--namespace".to_owned(), watched.clone()]);
    }
    if let Some(port) = args.view_port {
        if args.view_expose {
            out.extend(["--view-addr".to_owned(), format!("0.0.0.0:{port}")]);
            for host in &args.view_allowed_hosts {
                out.extend(["--view-allowed-host".to_owned(), host.clone()]);
            }
        } else {
            out.extend(["--view-addr".to_owned(), format!("127.0.0.1:{port}")]);
        }
        if let Some(auth) = view_auth(args).filter(|_| args.view_expose || args.view_auth.is_some())
        {
            let mode = match auth {
                ViewAuth::None => "none",
                ViewAuth::Kubernetes => "kubernetes",
            };
            out.extend(["--view-auth".to_owned(), mode.to_owned()]);
        }
    }
    out.extend(args.run_args.iter().cloned());
    out
}

fn deployment(name: &str, args: &ManifestsArgs, webhook: Option<&WebhookCertificates>) -> Value {
    let field = |path: &str| json!({ "valueFrom": { "fieldRef": { "fieldPath": path } } });
    let mut pod_name = field("metadata.name");
    pod_name["name"] = json!("POD_NAME");
    let mut pod_namespace = field("metadata.namespace");
    pod_namespace["name"] = json!("POD_NAMESPACE");
    let probe = |path: &str, period: u32| {
        json!({
            "httpGet": { "path": path, "port": "http" },
            "periodSeconds": period,
            "failureThreshold": 3,
        })
    };
    let mut deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(name, name, Some(&args.namespace)),
        "spec": {
            "replicas": args.replicas,
            "selector": { "matchLabels": { "app.kubernetes.io/name": name } },
            "template": {
                "metadata": { "labels": labels(name) },
                "spec": {
                    "serviceAccountName": name,
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": NON_ROOT_ID,
                        "runAsGroup": NON_ROOT_ID,
                        "seccompProfile": { "type": "RuntimeDefault" },
                    },
                    "containers": [{
                        "name": "operator",
                        "image": args.image,
                        "args": container_args(name, args, webhook.is_some()),
                        "env": [
                            pod_name,
                            pod_namespace,
                            { "name": "RUST_LOG", "value": "info" },
                        ],
                        "ports": ports(args, webhook.is_some()),
                        "livenessProbe": probe("/healthz", 10),
                        "readinessProbe": probe("/readyz", 5),
                        "resources": {
                            "requests": { "cpu": "50m", "memory": "64Mi" },
                            "limits": { "memory": "256Mi" },
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "capabilities": { "drop": ["ALL"] },
                        },
                    }],
                },
            },
        },
    });
    if let Some(certs) = webhook {
        // The webhook reads its certificate when it starts: a new one (each
        // `manifests` makes one) rolls the pods, as the CRD trusts only it.
        deployment["spec"]["template"]["metadata"]["annotations"] =
            json!({ WEBHOOK_CERT_ANNOTATION: certs.fingerprint() });
        let pod = &mut deployment["spec"]["template"]["spec"];
        pod["volumes"] = json!([{
            "name": "webhook-tls",
            "secret": { "secretName": webhook_secret_name(name) },
        }]);
        pod["containers"][0]["volumeMounts"] = json!([{
            "name": "webhook-tls",
            "mountPath": WEBHOOK_CERT_DIR,
            "readOnly": true,
        }]);
    }
    deployment
}

/// [`run_args`], with the names of the view's Service as allowed hosts
/// when it is exposed, and the conversion webhook's address and
/// certificate with `webhook`.
fn container_args(name: &str, args: &ManifestsArgs, webhook: bool) -> Vec<String> {
    let mut out = run_args(args);
    if webhook {
        // Before the operator's own flags, after `run`'s others.
        let at = out.len() - args.run_args.len();
        let flags = [
            "--webhook-addr".to_owned(),
            format!("0.0.0.0:{}", args.webhook_port),
            "--webhook-cert-dir".to_owned(),
            WEBHOOK_CERT_DIR.to_owned(),
            "--operator-user".to_owned(),
            format!("system:serviceaccount:{}:{name}", args.namespace),
        ];
        out.splice(at..at, flags);
    }
    if args.view_expose
        && let Some(at) = out.iter().position(|a| a == "--view-addr")
    {
        let service = view_service_name(name);
        let namespace = &args.namespace;
        let hosts = [
            service.clone(),
            format!("{service}.{namespace}"),
            format!("{service}.{namespace}.svc"),
            format!("{service}.{namespace}.svc.cluster.local"),
        ];
        let flags = hosts
            .into_iter()
            .flat_map(|host| ["--view-allowed-host".to_owned(), host]);
        out.splice(at + 2..at + 2, flags);
    }
    out
}

/// The container's ports: `http`, `view` when the web view is
/// exposed (without `--view-expose` it listens on the pod's loopback,
/// which no Service reaches), and `webhook` with the conversion webhook.
fn ports(args: &ManifestsArgs, webhook: bool) -> Value {
    let port = |name: &str, number: u16| json!({ "name": name, "containerPort": number, "protocol": "TCP" });
    let mut out = vec![port("http", args.http_port)];
    if let (true, Some(view)) = (args.view_expose, args.view_port) {
        out.push(port("view", view));
    }
    if webhook {
        out.push(port("webhook", args.webhook_port));
    }
    Value::Array(out)
}

/// The name of the conversion webhook's Service: `<operator>-webhook`.
pub fn webhook_service_name(operator: &str) -> String {
    format!("{operator}-webhook")
}

/// The name of the Secret holding the webhook's certificate:
/// `<operator>-webhook-tls`.
pub fn webhook_secret_name(operator: &str) -> String {
    format!("{operator}-webhook-tls")
}

/// The Secret of the webhook's certificate, as `run --webhook-cert-dir`
/// reads it once mounted; `ca.crt` is the CRD's caBundle.
fn webhook_secret(name: &str, namespace: &str, certs: &WebhookCertificates) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata(&webhook_secret_name(name), name, Some(namespace)),
        "type": "kubernetes.io/tls",
        "stringData": {
            CERT_FILE: certs.cert_pem,
            KEY_FILE: certs.key_pem,
            CA_FILE: certs.ca_pem,
        },
    })
}

/// The Service the API server calls the webhook through: port 443 to
/// the pods' `webhook` port. Every replica serves it, leader or not.
fn webhook_service(name: &str, namespace: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(&webhook_service_name(name), name, Some(namespace)),
        "spec": {
            "selector": { "app.kubernetes.io/name": name },
            "ports": [{ "name": "webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP" }],
        },
    })
}

/// The name of the view's Service: `<operator>-view`.
pub fn view_service_name(operator: &str) -> String {
    format!("{operator}-view")
}

/// The Service of an exposed web view: port `port` to the pods' `view`.
fn view_service(name: &str, namespace: &str, port: u16) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(&view_service_name(name), name, Some(namespace)),
        "spec": {
            "selector": { "app.kubernetes.io/name": name },
            "ports": [{ "name": "view", "port": port, "targetPort": "view", "protocol": "TCP" }],
        },
    })
}

/// The NetworkPolicy of an exposed web view: the operator's pods admit
/// the `view` port only from pods labelled [`VIEW_CLIENT_LABEL`]` =
/// <operator>` (in any namespace), and the `http` port (metrics, probes)
/// from anywhere, as without the policy; with `webhook`, the `webhook`
/// port from anywhere too (the API server is not a pod a selector names).
fn view_network_policy(name: &str, namespace: &str, webhook: bool) -> Value {
    let mut policy = json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(&view_service_name(name), name, Some(namespace)),
        "spec": {
            "podSelector": { "matchLabels": { "app.kubernetes.io/name": name } },
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "ports": [{ "port": "view", "protocol": "TCP" }],
                    "from": [{
                        "namespaceSelector": {},
                        "podSelector": { "matchLabels": { VIEW_CLIENT_LABEL: name } },
                    }],
                },
                { "ports": [{ "port": "http", "protocol": "TCP" }] },
            ],
        },
    });
    if webhook && let Some(rules) = policy["spec"]["ingress"].as_array_mut() {
        rules.push(json!({ "ports": [{ "port": "webhook", "protocol": "TCP" }] }));
    }
    policy
}

/// At most one replica evicted at a time (a node drain waits for the
/// other to be ready), whatever the number of replicas.
fn disruption_budget(name: &str, namespace: &str, version: PdbApiVersion) -> Value {
    json!({
        "apiVersion": version.as_str(),
        "kind": "PodDisruptionBudget",
        "metadata": metadata(name, name, Some(namespace)),
        "spec": {
            "maxUnavailable": 1,
            "selector": { "matchLabels": { "app.kubernetes.io/name": name } },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> ManifestsArgs {
        ManifestsArgs {
            image: "example.io/db-operator:0.1.0".into(),
            namespace: "ops".into(),
            replicas: 2,
            http_port: DEFAULT_HTTP_PORT,
            watch_namespace: None,
            pdb_api_version: PdbApiVersion::V1,
            shards: false,
            view_port: None,
            view_expose: false,
            view_allowed_hosts: Vec::new(),
            view_auth: None,
            webhook_port: DEFAULT_WEBHOOK_PORT,
            admission: AdmissionMode::Auto,
            run_args: vec!["--cloud-url=http://cloud".into()],
        }
    }

    fn operator() -> OperatorDescription {
        OperatorDescription {
            name: "db-operator".into(),
            resource: crate::records::ResourceInfo {
                group: "example.io".into(),
                version: "v1".into(),
                kind: "Database".into(),
                plural: "databases".into(),
                namespaced: true,
            },
            store: super::super::StoreKind::Status,
            needs_finalizer: false,
            extra_rules: Vec::new(),
        }
    }

    #[test]
    fn an_exposed_view_checks_tokens_and_gets_the_role_to_review_them() {
        let crd = CustomResourceDefinition::default();
        let exposed = ManifestsArgs {
            view_port: Some(8090),
            view_expose: true,
            ..args()
        };
        let run = container_args("db-operator", &exposed, false);
        let at = run.iter().position(|a| a == "--view-auth").unwrap();
        assert_eq!(run[at + 1], "kubernetes");
        let yaml = deploy_manifests(&operator(), &crd, &exposed).unwrap();
        assert!(yaml.contains("name: db-operator-view-access"), "{yaml}");
        assert!(yaml.contains("- tokenreviews"), "{yaml}");
        assert!(yaml.contains("- subjectaccessreviews"), "{yaml}");
        assert!(
            yaml.contains("kind: ClusterRoleBinding") && yaml.contains("kind: ClusterRole\n"),
            "{yaml}"
        );

        // Behind a proxy that authenticates on its own: no check, no role.
        let proxied = ManifestsArgs {
            view_auth: Some(ViewAuth::None),
            ..exposed
        };
        let run = container_args("db-operator", &proxied, false);
        let at = run.iter().position(|a| a == "--view-auth").unwrap();
        assert_eq!(run[at + 1], "none");
        let yaml = deploy_manifests(&operator(), &crd, &proxied).unwrap();
        assert!(!yaml.contains("view-access"), "{yaml}");

        // On the pod's loopback: port-forward is the check; nothing added.
        let loopback = ManifestsArgs {
            view_port: Some(8090),
            ..args()
        };
        assert!(!run_args(&loopback).contains(&"--view-auth".to_owned()));
        let yaml = deploy_manifests(&operator(), &crd, &loopback).unwrap();
        assert!(!yaml.contains("view-access"), "{yaml}");
    }

    #[test]
    fn a_view_port_serves_the_view_on_the_pods_loopback() {
        let viewed = ManifestsArgs {
            view_port: Some(8090),
            ..args()
        };
        let run = run_args(&viewed);
        let at = run.iter().position(|a| a == "--view-addr").unwrap();
        assert_eq!(run[at + 1], "127.0.0.1:8090");
        assert!(!run.contains(&"--view-allowed-host".to_owned()), "{run:?}");
        assert_eq!(container_args("db-operator", &viewed, false), run);
        // No port for a Service: only port-forward reaches it.
        assert_eq!(ports(&viewed, false).as_array().map(Vec::len), Some(1));
        assert!(!run_args(&args()).contains(&"--view-addr".to_owned()));
    }

    #[test]
    fn an_exposed_view_listens_everywhere_behind_its_allowed_hosts() {
        let exposed = ManifestsArgs {
            view_port: Some(8090),
            view_expose: true,
            view_allowed_hosts: vec!["fsm.example.io".into()],
            ..args()
        };
        let run = container_args("db-operator", &exposed, false);
        let at = run.iter().position(|a| a == "--view-addr").unwrap();
        assert_eq!(run[at + 1], "0.0.0.0:8090");
        let hosts: Vec<&str> = run
            .windows(2)
            .filter(|w| w[0] == "--view-allowed-host")
            .map(|w| w[1].as_str())
            .collect();
        assert_eq!(
            hosts,
            [
                "db-operator-view",
                "db-operator-view.ops",
                "db-operator-view.ops.svc",
                "db-operator-view.ops.svc.cluster.local",
                "fsm.example.io"
            ]
        );
        assert_eq!(
            run.last().map(String::as_str),
            Some("--cloud-url=http://cloud")
        );
        let exposed_ports = ports(&exposed, false);
        assert_eq!(exposed_ports[1]["name"], "view");
        assert_eq!(exposed_ports[1]["containerPort"], 8090);
        let policy = view_network_policy("db-operator", "ops", false);
        let rules = policy["spec"]["ingress"].as_array().unwrap();
        assert_eq!(rules[0]["ports"][0]["port"], "view");
        assert_eq!(
            rules[0]["from"][0]["podSelector"]["matchLabels"][VIEW_CLIENT_LABEL],
            "db-operator"
        );
        assert_eq!(rules[1]["ports"][0]["port"], "http");
        assert!(rules[1].get("from").is_none());
    }

    #[test]
    fn sharded_pods_run_with_shards_and_get_the_sharding_role() {
        let sharded = ManifestsArgs {
            shards: true,
            ..args()
        };
        assert_eq!(run_args(&sharded)[..2], ["run", "--shards"]);
        let crd = CustomResourceDefinition::default();
        let yaml = deploy_manifests(&operator(), &crd, &sharded).unwrap();
        assert!(yaml.contains("name: db-operator-sharding"), "{yaml}");
        assert!(!yaml.contains("db-operator-leader-election"), "{yaml}");
        assert!(yaml.contains("- list"), "{yaml}");
    }

    #[test]
    fn the_container_runs_with_leader_election_the_http_endpoint_and_its_own_flags() {
        assert_eq!(
            run_args(&args()),
            [
                "run",
                "--leader-elect",
                "--http-addr",
                "0.0.0.0:8080",
                "--cloud-url=http://cloud"
            ]
        );
        let watching = ManifestsArgs {
            watch_namespace: Some("shop".into()),
            run_args: Vec::new(),
            ..args()
        };
        assert_eq!(
            run_args(&watching),
            [
                "run",
                "--leader-elect",
                "--http-addr",
                "0.0.0.0:8080",
                "--namespace",
                "shop"
            ]
        );
    }

    #[test]
    fn the_disruption_budget_selects_the_pods_of_the_deployment() {
        let deployment = deployment("db-operator", &args(), None);
        let budget = disruption_budget("db-operator", "ops", PdbApiVersion::V1beta1);
        assert_eq!(budget["apiVersion"], "policy/v1beta1");
        assert_eq!(budget["spec"]["selector"], deployment["spec"]["selector"]);
        let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
        assert_eq!(pod_labels["app.kubernetes.io/name"], "db-operator");
    }
}
