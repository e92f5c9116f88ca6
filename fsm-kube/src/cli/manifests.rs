//! `manifests`: everything a cluster needs to run the operator, as one
//! multi-document YAML stream for `kubectl apply -f -`: the CRD, a
//! ServiceAccount, the least RBAC ([`super::rbac`]) bound to it, a
//! Deployment (leader election on, or sharding with `--shards`; probes on
//! `/healthz` and `/readyz`, the
//! metrics port, non-root with a read-only root filesystem, resource
//! requests) and a PodDisruptionBudget.
//!
//! [`deploy_manifests`] computes; the CLI prints.

use clap::{Args, ValueEnum};
use fsm_core::Fsm;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Value, json};

use super::rbac::{self, OperatorDescription, RbacScope};
use super::{Error, Operator, crd_yaml};
use crate::KubeResource;

/// The port `run --http-addr` listens on in the Deployment, unless
/// `--http-port` says otherwise.
pub const DEFAULT_HTTP_PORT: u16 = 8080;

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
    /// Serve the read-only web view on this port (`run --view-addr
    /// 0.0.0.0:PORT`, container port `view`; reach it with `kubectl
    /// port-forward`), with the RBAC it reads with.
    #[arg(long, value_name = "PORT")]
    pub view_port: Option<u16>,
    /// More arguments for `run` (the operator's own flags), repeatable:
    /// `--arg=--cloud-url=http://cloud`.
    #[arg(long = "arg", value_name = "ARG", allow_hyphen_values = true)]
    pub run_args: Vec<String>,
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
    /// What `manifests` prints ([`deploy_manifests`]).
    ///
    /// # Errors
    /// A declared rule is refused.
    pub fn manifests(&self, args: &ManifestsArgs) -> Result<String, Error> {
        deploy_manifests(&self.description(), &F::Resource::crd(), args)
    }
}

/// The deploy manifests of `operator`, whose resource is defined by `crd`:
/// the CRD, then the ServiceAccount, the RBAC and its bindings, the
/// Deployment and the PodDisruptionBudget, each a YAML document.
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
    let name = operator.name.as_str();
    let namespace = args.namespace.as_str();
    let scope = RbacScope {
        namespace: args.watch_namespace.clone(),
        lease_namespace: (!args.shards).then(|| namespace.to_owned()),
    };
    let mut roles = rbac::manifests(operator, &scope)?;
    if args.view_port.is_some() {
        roles = rbac::with_view_rules(roles, operator);
    }
    if args.shards {
        roles.push(rbac::sharding_role(operator, namespace));
    }

    let mut out = crd_yaml(crd)?;
    push(&mut out, &service_account(name, namespace))?;
    out.push_str(&rbac::to_yaml(&roles).map_err(Error::Yaml)?);
    for role in &roles {
        push(&mut out, &binding(name, namespace, role))?;
    }
    push(&mut out, &deployment(name, args))?;
    push(
        &mut out,
        &disruption_budget(name, namespace, args.pdb_api_version),
    )?;
    Ok(out)
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

/// The arguments of the container: `run` with leader election (or
/// `--shards`) and the HTTP endpoint on every interface, then the
/// operator's own.
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
        out.extend(["--view-addr".to_owned(), format!("0.0.0.0:{port}")]);
    }
    out.extend(args.run_args.iter().cloned());
    out
}

fn deployment(name: &str, args: &ManifestsArgs) -> Value {
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
    json!({
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
                        "args": run_args(args),
                        "env": [
                            pod_name,
                            pod_namespace,
                            { "name": "RUST_LOG", "value": "info" },
                        ],
                        "ports": ports(args),
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
    })
}

/// The container's ports: `http`, and `view` when it serves the web view.
fn ports(args: &ManifestsArgs) -> Value {
    let port = |name: &str, number: u16| json!({ "name": name, "containerPort": number, "protocol": "TCP" });
    let mut out = vec![port("http", args.http_port)];
    if let Some(view) = args.view_port {
        out.push(port("view", view));
    }
    Value::Array(out)
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
            run_args: vec!["--cloud-url=http://cloud".into()],
        }
    }

    #[test]
    fn a_view_port_serves_the_view_and_grants_what_it_reads() {
        let viewed = ManifestsArgs {
            view_port: Some(8090),
            ..args()
        };
        let run = run_args(&viewed);
        let at = run.iter().position(|a| a == "--view-addr").unwrap();
        assert_eq!(run[at + 1], "0.0.0.0:8090");
        let viewed_ports = ports(&viewed);
        assert_eq!(viewed_ports[1]["name"], "view");
        assert_eq!(viewed_ports[1]["containerPort"], 8090);
        assert_eq!(viewed_ports.as_array().map(Vec::len), Some(2));
        assert_eq!(ports(&args()).as_array().map(Vec::len), Some(1));
        assert!(!run_args(&args()).contains(&"--view-addr".to_owned()));
    }

    #[test]
    fn sharded_pods_run_with_shards_and_get_the_sharding_role() {
        let sharded = ManifestsArgs {
            shards: true,
            ..args()
        };
        assert_eq!(run_args(&sharded)[..2], ["run", "--shards"]);
        let operator = OperatorDescription {
            name: "db-operator".into(),
            resource: rbac::ResourceInfo {
                group: "example.io".into(),
                version: "v1".into(),
                kind: "Database".into(),
                plural: "databases".into(),
                namespaced: true,
            },
            store: super::super::StoreKind::Status,
            needs_finalizer: false,
            extra_rules: Vec::new(),
        };
        let crd = CustomResourceDefinition::default();
        let yaml = deploy_manifests(&operator, &crd, &sharded).unwrap();
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
        let deployment = deployment("db-operator", &args());
        let budget = disruption_budget("db-operator", "ops", PdbApiVersion::V1beta1);
        assert_eq!(budget["apiVersion"], "policy/v1beta1");
        assert_eq!(budget["spec"]["selector"], deployment["spec"]["selector"]);
        let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
        assert_eq!(pod_labels["app.kubernetes.io/name"], "db-operator");
    }
}
