//! Several versions of one resource (issue 33): `crd` and `manifests`
//! print every version with the conversion webhook wired, `run` takes the
//! webhook's flags, and on the real kube-apiserver named by
//! `FSM_REAL_APISERVER_KUBECONFIG` (1.20) an object created at
//! `v1alpha1` is stored at `v1` through the webhook the test serves, run
//! there by the machine, and read at either version with the same
//! record.
//!
//! The embedded API server does not call conversion webhooks yet (being
//! built in fsm-testkit): there this test checks, over TLS with the
//! certificate the CRD trusts, the review the API server would send.
//! Once the embedded server converts through `spec.conversion`, the
//! `TestCluster::real()` branch below becomes `TestCluster::from_env()`
//! and the same steps run on both servers.

use crate::common;

use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use fsm_kube::VersionOptions;
use fsm_kube::cli::{Command, CrdArgs, Operator, RunContext, StoreKind};
use fsm_kube::http::webhook::{self, CERT_FILE, KEY_FILE, WebhookCertificates, WebhookTls};
use fsm_kube::prelude::*;
use fsm_kube::records::PublishedMachine;
use fsm_testkit::{ApiServer, TestCluster};
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use serde_json::{Value, json};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GadgetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsm: Option<FsmStatus>,
}

pub mod v1alpha1 {
    use super::*;
    /// The old version: the size as text.
    #[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[kube(
        group = "versions.test.operator-fsm.io",
        version = "v1alpha1",
        kind = "Gadget",
        namespaced,
        status = "GadgetStatus"
    )]
    pub struct GadgetSpec {
        pub size: String,
    }
}

pub mod v1 {
    use super::*;
    /// The hub: the size in Gi.
    #[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[kube(
        group = "versions.test.operator-fsm.io",
        version = "v1",
        kind = "Gadget",
        namespaced,
        status = "GadgetStatus"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct GadgetSpec {
        pub storage_gi: u32,
    }
}

#[derive(Debug, thiserror::Error)]
#[error("size {0:?} is not a whole number of Gi")]
pub struct NotGi(String);

impl TryFrom<v1alpha1::Gadget> for v1::Gadget {
    type Error = NotGi;
    fn try_from(old: v1alpha1::Gadget) -> Result<Self, NotGi> {
        let gi = old
            .spec
            .size
            .strip_suffix("Gi")
            .and_then(|n| n.parse().ok());
        let storage_gi = gi.ok_or_else(|| NotGi(old.spec.size.clone()))?;
        Ok(v1::Gadget::new("", v1::GadgetSpec { storage_gi }))
    }
}

impl From<v1::Gadget> for v1alpha1::Gadget {
    fn from(new: v1::Gadget) -> Self {
        let size = format!("{}Gi", new.spec.storage_gi);
        v1alpha1::Gadget::new("", v1alpha1::GadgetSpec { size })
    }
}

#[derive(Debug, thiserror::Error)]
#[error("never")]
pub struct Never;
impl Classify for Never {}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = v1::Gadget, error = Never)]
pub enum GadgetState {
    #[fsm(initial, handler = provision, next(Serving))]
    Provisioning,
    #[fsm(ready, final)]
    Serving { size_gi: u32 },
    #[fsm(failed)]
    Failed,
}

async fn provision(cx: &mut Step<'_, GadgetState>) -> Result<Transition<GadgetState>, Never> {
    Ok(Transition::next(GadgetState::Serving {
        size_gi: cx.resource().spec.storage_gi,
    }))
}

fn operator() -> Operator<GadgetState> {
    Operator::new("gadget-operator", StoreKind::Status).version_with::<v1alpha1::Gadget>(
        VersionOptions::default().deprecated("use versions.test.operator-fsm.io/v1"),
    )
}

/// A fresh directory of the test's own.
fn scratch(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "fsm-versions-{label}-{}-{}",
        std::process::id(),
        jiff::Timestamp::now().as_nanosecond()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn execute(operator: &Operator<GadgetState>, line: &[&str]) -> Result<String, String> {
    let cli = operator.parse_from(line).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    operator
        .execute(cli.command, |_| async {}, &mut out)
        .await
        .map_err(|e| fsm_core::text::display_chain(&e, ": "))?;
    Ok(String::from_utf8(out).unwrap())
}

fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|document| Value::deserialize(document).unwrap())
        .collect()
}

#[tokio::test]
async fn crd_prints_every_version_with_the_machine_the_columns_and_the_webhook_at_the_url() {
    let dir = scratch("crd");
    let certs = WebhookCertificates::generate(&["127.0.0.1".to_owned()]).unwrap();
    certs.write_to(&dir).unwrap();
    let ca = dir.join(webhook::CA_FILE);
    let url = "https://127.0.0.1:9443/convert";
    let yaml = execute(
        &operator(),
        &[
            "gadget-operator",
            "crd",
            "--printer-columns",
            "--webhook-url",
            url,
            "--webhook-ca-file",
            ca.to_str().unwrap(),
        ],
    )
    .await
    .unwrap();
    let crd: CustomResourceDefinition = serde_yaml_ng::from_str(&yaml).unwrap();
    let versions: Vec<(&str, bool, bool, Option<bool>)> = crd
        .spec
        .versions
        .iter()
        .map(|v| (v.name.as_str(), v.served, v.storage, v.deprecated))
        .collect();
    assert_eq!(
        versions,
        [
            ("v1", true, true, None),
            ("v1alpha1", true, false, Some(true))
        ]
    );
    assert_eq!(
        crd.spec.versions[1].deprecation_warning.as_deref(),
        Some("use versions.test.operator-fsm.io/v1")
    );
    for version in &crd.spec.versions {
        let columns: Vec<&str> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            columns,
            ["State", "Attempt", "In-State", "Age"],
            "{}",
            version.name
        );
    }
    let published = PublishedMachine::from_crd(&crd).unwrap().unwrap();
    assert_eq!(published.store, StoreKind::Status);
    let conversion = serde_json::to_value(&crd.spec.conversion).unwrap();
    assert_eq!(conversion["strategy"], "Webhook");
    assert_eq!(
        conversion["webhook"]["conversionReviewVersions"],
        json!(["v1"])
    );
    assert_eq!(conversion["webhook"]["clientConfig"]["url"], url);
    let bundle = crd
        .spec
        .conversion
        .unwrap()
        .webhook
        .unwrap()
        .client_config
        .unwrap();
    assert_eq!(bundle.ca_bundle.unwrap().0, certs.ca_pem.as_bytes());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn several_versions_without_a_webhook_or_a_webhook_without_versions_are_refused() {
    let error = execute(&operator(), &["gadget-operator", "crd"])
        .await
        .unwrap_err();
    assert!(
        error.starts_with(
            "the CRD serves versions.test.operator-fsm.io/v1, versions.test.operator-fsm.io/v1alpha1, \
             which the API server converts by calling the operator's conversion webhook"
        ),
        "{error}"
    );
    let single = Operator::<GadgetState>::new("gadget-operator", StoreKind::Status);
    let error = execute(
        &single,
        &[
            "gadget-operator",
            "crd",
            "--webhook-url",
            "https://x/convert",
            "--webhook-ca-file",
            "/nonexistent",
        ],
    )
    .await
    .unwrap_err();
    assert!(error.contains("there is no conversion"), "{error}");
    let error = execute(
        &operator(),
        &[
            "gadget-operator",
            "crd",
            "--webhook-url",
            "https://x/convert",
            "--webhook-ca-file",
            "/nonexistent/ca.crt",
        ],
    )
    .await
    .unwrap_err();
    assert!(
        error.starts_with("/nonexistent/ca.crt: cannot read the webhook's CA certificate"),
        "{error}"
    );
    // `run` checks its webhook before it connects anywhere.
    let webhook = [
        "--webhook-addr",
        "127.0.0.1:0",
        "--webhook-cert-dir",
        "/nonexistent",
    ];
    let run = |operator: Operator<GadgetState>| async move {
        let line = [
            "gadget-operator",
            "run",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ];
        execute(&operator, &[&line[..], &webhook[..]].concat()).await
    };
    let error = run(Operator::new("gadget-operator", StoreKind::Status))
        .await
        .unwrap_err();
    assert!(error.contains("there is no conversion"), "{error}");
    let error = run(operator()).await.unwrap_err();
    assert!(
        error.starts_with("/nonexistent/tls.crt: cannot read or write it"),
        "{error}"
    );
    // The two flags go together.
    assert!(
        operator()
            .parse_from(["gadget-operator", "crd", "--webhook-url", "https://x"])
            .is_err()
    );
    let Command::Run(run) = operator()
        .parse_from([
            "gadget-operator",
            "run",
            "--webhook-addr",
            "0.0.0.0:9443",
            "--webhook-cert-dir",
            "/certs",
        ])
        .unwrap()
        .command
    else {
        panic!("not run");
    };
    assert_eq!(
        run.webhook.webhook_addr,
        Some("0.0.0.0:9443".parse().unwrap())
    );
    assert!(
        operator()
            .parse_from(["gadget-operator", "run", "--webhook-addr", "0.0.0.0:9443"])
            .is_err(),
        "--webhook-addr needs --webhook-cert-dir"
    );
}

#[tokio::test]
async fn manifests_mount_a_generated_certificate_and_point_the_crd_at_the_webhooks_service() {
    let yaml = execute(
        &operator(),
        &[
            "gadget-operator",
            "manifests",
            "--image",
            "example.io/gadget:1",
            "-n",
            "ops",
            "--view-port",
            "8090",
            "--view-expose",
        ],
    )
    .await
    .unwrap();
    let documents = documents(&yaml);
    let find = |kind: &str, name: &str| {
        documents
            .iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name} in\n{yaml}"))
    };
    let crd = find(
        "CustomResourceDefinition",
        "gadgets.versions.test.operator-fsm.io",
    );
    let client = &crd["spec"]["conversion"]["webhook"]["clientConfig"];
    assert_eq!(
        client["service"],
        json!({"namespace": "ops", "name": "gadget-operator-webhook", "path": "/convert", "port": 443})
    );
    let secret = find("Secret", "gadget-operator-webhook-tls");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    let data = &secret["stringData"];
    let ca = data["ca.crt"].as_str().unwrap();
    let typed: CustomResourceDefinition = serde_json::from_value(crd.clone()).unwrap();
    let bundle = typed
        .spec
        .conversion
        .unwrap()
        .webhook
        .unwrap()
        .client_config
        .unwrap();
    assert_eq!(bundle.ca_bundle.unwrap().0, ca.as_bytes());
    // The pair serves TLS.
    let cert = data[CERT_FILE].as_str().unwrap();
    let key = data[KEY_FILE].as_str().unwrap();
    WebhookTls::from_pem(cert.as_bytes(), key.as_bytes()).unwrap();

    let service = find("Service", "gadget-operator-webhook");
    assert_eq!(service["spec"]["ports"][0]["port"], 443);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "webhook");
    let deployment = find("Deployment", "gadget-operator");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let at = args.iter().position(|a| *a == "--webhook-addr").unwrap();
    assert_eq!(
        args[at..at + 4],
        [
            "--webhook-addr",
            "0.0.0.0:9443",
            "--webhook-cert-dir",
            "/var/run/operator-fsm/webhook"
        ]
    );
    // The container's arguments are a `run` line the operator accepts.
    let line = std::iter::once("gadget-operator").chain(args.iter().copied());
    assert!(matches!(
        operator().parse_from(line).unwrap().command,
        Command::Run(_)
    ));
    assert_eq!(
        container["volumeMounts"][0]["mountPath"],
        "/var/run/operator-fsm/webhook"
    );
    // A new certificate rolls the pods, which read it when they start.
    let fingerprint =
        deployment["spec"]["template"]["metadata"]["annotations"]["operator-fsm.io/webhook-cert"]
            .as_str()
            .unwrap();
    assert_eq!(fingerprint.len(), 64);
    let again = execute(
        &operator(),
        &[
            "gadget-operator",
            "manifests",
            "--image",
            "example.io/gadget:1",
            "-n",
            "ops",
        ],
    )
    .await
    .unwrap();
    assert!(!again.contains(fingerprint), "a new certificate each time");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"],
        "gadget-operator-webhook-tls"
    );
    assert!(
        container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "webhook" && p["containerPort"] == 9443)
    );
    // The view's NetworkPolicy lets the API server reach the webhook.
    let policy = find("NetworkPolicy", "gadget-operator-view");
    assert!(
        policy["spec"]["ingress"]
            .as_array()
            .unwrap()
            .iter()
            .any(|rule| rule["ports"][0]["port"] == "webhook" && rule.get("from").is_none())
    );
}

/// POSTs `body` to `url` (`https://127.0.0.1:PORT/PATH`) trusting only
/// `ca_pem`, as the API server calls a webhook; the JSON answer, `None`
/// while nothing listens there.
async fn post_json_tls(url: &str, ca_pem: &str, body: &Value) -> Option<Value> {
    use rustls_pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("https://").unwrap();
    let (authority, path) = rest.split_at(rest.find('/').unwrap());
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(authority).await.ok()?;
    let host = authority.rsplit_once(':').unwrap().0.to_owned();
    let name = rustls_pki_types::ServerName::try_from(host).unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tls.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    Some(serde_json::from_str(body).unwrap())
}

/// Runs `kubectl --kubeconfig K ARGS` with `stdin`; whether it succeeded,
/// and its output.
async fn kubectl(kubeconfig: &std::path::Path, args: &[&str], stdin: String) -> (bool, String) {
    use std::io::Write;
    let mut command = std::process::Command::new("kubectl");
    command.arg("--kubeconfig").arg(kubeconfig).args(args);
    tokio::task::spawn_blocking(move || {
        let mut child = command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("kubectl is installed");
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.as_bytes()).unwrap();
        drop(input);
        let output = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        (output.status.success(), text)
    })
    .await
    .unwrap()
}

/// The v1alpha1 resource, read without a type.
fn old_resource() -> ApiResource {
    ApiResource::erase::<v1alpha1::Gadget>(&())
}

fn new_resource() -> ApiResource {
    ApiResource::erase::<v1::Gadget>(&())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_created_at_v1alpha1_runs_at_v1_and_reads_the_same_at_either_version() {
    init_tracing();
    let dir = scratch("real");
    let certs = WebhookCertificates::generate(&["127.0.0.1".to_owned()]).unwrap();
    certs.write_to(&dir).unwrap();
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let url = format!("https://127.0.0.1:{port}/convert");
    let operator = operator();
    let crd = operator
        .crd_definition(&CrdArgs {
            printer_columns: true,
            webhook_url: Some(url.clone()),
            webhook_ca_file: Some(dir.join(webhook::CA_FILE)),
        })
        .unwrap();

    // The real server, or the embedded one served over HTTP for `run` to
    // connect to (with the hub's CRD alone: it serves one version today).
    let (cluster, kubeconfig, _embedded) = match TestCluster::real().await.unwrap() {
        Some(real) => {
            let path = real.kubeconfig().unwrap().to_owned();
            real.install_crd(&crd).await.unwrap();
            (Some(real), path, None)
        }
        None => {
            let server = ApiServer::new();
            let path = dir.join("kubeconfig");
            let served = server
                .serve_http_on(([127, 0, 0, 1], 0).into(), Some(path.clone()))
                .await
                .unwrap();
            let embedded = TestCluster::connect(&path).await.unwrap();
            embedded.install_crd(&v1::Gadget::crd()).await.unwrap();
            (None, path, Some((server, served)))
        }
    };
    let ns = match &cluster {
        Some(real) => real.create_namespace("versions").await.unwrap(),
        None => "default".to_owned(),
    };

    // The operator as it is deployed: `run --webhook-addr` serves the
    // webhook beside the controller its main function runs.
    let line = [
        "gadget-operator".to_owned(),
        "run".to_owned(),
        "--kubeconfig".to_owned(),
        kubeconfig.display().to_string(),
        "--namespace".to_owned(),
        ns.clone(),
        "--webhook-addr".to_owned(),
        format!("127.0.0.1:{port}"),
        "--webhook-cert-dir".to_owned(),
        dir.display().to_string(),
    ];
    let command = operator.parse_from(line).unwrap().command;
    let running = tokio::spawn(async move {
        let mut sink = std::io::sink();
        let main = |run: RunContext<GadgetState>| async move {
            let fsm = run.reconciler();
            run.controller::<v1::Gadget>()
                .run(fsm.reconcile(), fsm.error_policy(), Arc::new(()))
                .for_each(|_| async {})
                .await;
        };
        operator.execute(command, main, &mut sink).await
    });
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "u-1",
            "desiredAPIVersion": "versions.test.operator-fsm.io/v1",
            "objects": [{
                "apiVersion": "versions.test.operator-fsm.io/v1alpha1",
                "kind": "Gadget",
                "metadata": {"name": "g", "namespace": "ns"},
                "spec": {"size": "3Gi"},
                "status": {"fsm": {"state": "Provisioning", "attempt": 1}},
            }],
        },
    });
    // What the API server sends, over TLS to the URL the CRD names,
    // trusting the CA the CRD carries.
    let answer = eventually("the webhook to answer", || {
        post_json_tls(&url, &certs.ca_pem, &review)
    })
    .await;
    assert_eq!(
        answer["response"]["result"]["status"], "Success",
        "{answer}"
    );
    let object = &answer["response"]["convertedObjects"][0];
    assert_eq!(object["spec"], json!({"storageGi": 3}));
    assert_eq!(
        object["status"]["fsm"],
        review["request"]["objects"][0]["status"]["fsm"]
    );
    let Some(cluster) = cluster else {
        // The embedded server does not call conversion webhooks yet.
        running.abort();
        std::fs::remove_dir_all(&dir).unwrap();
        return;
    };
    let client = cluster.client();

    // Created at the old version, stored at v1 through the webhook.
    let old_api: Api<v1alpha1::Gadget> = Api::namespaced(client.clone(), &ns);
    old_api
        .create(
            &PostParams::default(),
            &v1alpha1::Gadget::new(
                "orders",
                v1alpha1::GadgetSpec {
                    size: "10Gi".into(),
                },
            ),
        )
        .await
        .unwrap();

    // The machine runs it at v1.
    let new_api: Api<v1::Gadget> = Api::namespaced(client.clone(), &ns);
    let serving = eventually("the gadget to be Serving at v1", || {
        let new_api = new_api.clone();
        async move {
            let gadget = new_api.get("orders").await.ok()?;
            let record = serde_json::to_value(gadget.status.as_ref()?.fsm.as_ref()?).ok()?;
            (record["state"] == "Serving").then_some(gadget)
        }
    })
    .await;
    assert_eq!(serving.spec.storage_gi, 10);

    // Read at both versions, at the same resourceVersion: the same record.
    let old_dyn: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &old_resource());
    let new_dyn: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &new_resource());
    let (old, new) = eventually("one revision read at both versions", || {
        let (old_dyn, new_dyn) = (old_dyn.clone(), new_dyn.clone());
        async move {
            let old = old_dyn.get("orders").await.ok()?;
            let new = new_dyn.get("orders").await.ok()?;
            (old.resource_version() == new.resource_version()).then_some((old, new))
        }
    })
    .await;
    assert_eq!(old.data["spec"], json!({"size": "10Gi"}));
    assert_eq!(new.data["spec"], json!({"storageGi": 10}));
    assert_eq!(old.data["status"]["fsm"], new.data["status"]["fsm"]);
    assert_eq!(old.data["status"]["fsm"]["state"], "Serving");
    assert_eq!(old.metadata.uid, new.metadata.uid);
    assert_eq!(old.metadata.finalizers, new.metadata.finalizers);

    // Written at the old version: the record is kept, the spec converted.
    let mut changed = old_api.get("orders").await.unwrap();
    changed.spec.size = "20Gi".into();
    old_api
        .replace("orders", &PostParams::default(), &changed)
        .await
        .unwrap();
    let after = new_api.get("orders").await.unwrap();
    assert_eq!(after.spec.storage_gi, 20);
    assert_eq!(
        serde_json::to_value(after.status.unwrap().fsm).unwrap()["state"],
        "Serving"
    );

    // A conversion the user's code refuses: the write is refused with the
    // webhook's message, naming the object.
    let refused = old_api
        .create(
            &PostParams::default(),
            &v1alpha1::Gadget::new(
                "invoices",
                v1alpha1::GadgetSpec {
                    size: "lots".into(),
                },
            ),
        )
        .await
        .unwrap_err();
    let message = refused.to_string();
    assert!(
        message.contains("size \"lots\" is not a whole number of Gi"),
        "{message}"
    );
    assert!(message.contains("invoices"), "{message}");

    // What `manifests` prints for this cluster, accepted by it (a server
    // dry run): the CRD calling the webhook's Service, its Secret and
    // Service, the Deployment mounting the certificate.
    let yaml = execute(
        &self::operator(),
        &[
            "gadget-operator",
            "manifests",
            "--image",
            "example.io/gadget:1",
            "-n",
            &ns,
            "--pdb-api-version",
            "policy/v1beta1",
        ],
    )
    .await
    .unwrap();
    // The CRD exists, calling the test's URL: a client-side apply would
    // merge the Service into it beside the URL (the server refuses both),
    // so it is replaced; the rest is applied.
    let (crd_yaml, rest): (Vec<&str>, Vec<&str>) = yaml
        .split("\n---\n")
        .partition(|document| document.contains("kind: CustomResourceDefinition"));
    let (ok, out) = kubectl(
        &kubeconfig,
        &["replace", "--dry-run=server", "-f", "-"],
        crd_yaml.join("\n---\n"),
    )
    .await;
    assert!(ok, "{out}");
    assert!(
        out.starts_with(
            "customresourcedefinition.apiextensions.k8s.io/gadgets.versions.test.operator-fsm.io \
             replaced (server dry run)"
        ),
        "{out}"
    );
    let (ok, out) = kubectl(
        &kubeconfig,
        &["apply", "--dry-run=server", "-f", "-"],
        rest.join("\n---\n"),
    )
    .await;
    assert!(ok, "{out}");
    for object in [
        "secret/gadget-operator-webhook-tls",
        "service/gadget-operator-webhook",
        "deployment.apps/gadget-operator",
    ] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(object) && l.ends_with("(server dry run)")),
            "{object} in\n{out}"
        );
    }

    running.abort();
    // Deleted while the webhook still answers (a deletion reads the object).
    old_api
        .delete("orders", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the gadget to be gone", || {
        let new_api = new_api.clone();
        async move {
            new_api
                .get_opt("orders")
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await;
    std::fs::remove_dir_all(&dir).unwrap();
}
