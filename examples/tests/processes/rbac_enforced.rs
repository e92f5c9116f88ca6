//! Security, enforced: what `database-operator manifests` prints — its
//! ServiceAccount, its Roles and their bindings — is applied as printed,
//! and the operator runs the printed Deployment's command line with that
//! ServiceAccount's own token, through a whole workflow (Databases
//! provisioned, one rejected and compensated, a leftover connection Secret
//! read and patched, every Database deleted). One run per way of deploying
//! it: cluster-wide, watching one namespace, sharded, with the web view on
//! the pod's loopback and with it exposed (bearer tokens reviewed by the
//! API server); all but the sharded one elect a leader with the Lease
//! Role.
//!
//! On a kube-apiserver that enforces RBAC (`FSM_REAL_APISERVER_KUBECONFIG`,
//! which `scripts/real-apiserver/start` runs with `Node,RBAC`; CI runs these
//! tests there), a missing grant makes the workflow stall with `403`s, so
//! the run passing shows the printed objects suffice; and each variant then
//! tries, with the same token, what its Roles must not allow (another
//! namespace's Secrets or Databases, another Lease, a delete) and expects
//! `403`. The embedded server authorizes everything, so there the same
//! workflow runs with the server's own credentials (the printed objects are
//! still applied and validated) and the refusals are not asked; `rbac.rs`
//! checks there that the printed rules are exactly the requests made.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::soak::{self, Proc, Scratch};

use examples::database::{Database, DatabaseSpec, DbState};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::CustomResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use operator_fsm::store::record_object_name_for;
use operator_fsm::testkit::{ApiServer, TestCluster};
use serde::Deserialize;
use serde_json::{Value, json};

const GOOD: &str = "CREATE TABLE t (id int); INSERT INTO t VALUES (1);";
const BAD: &str = "CREATE TABLE t (id int); INSRT INTO t VALUES (1);";
const OPERATOR: &str = "database-operator";
/// Databases `db-0` … `db-2`: `db-1` finds its connection Secret left over,
/// `db-2`'s seed is rejected.
const DATABASES: usize = 3;
const LEFTOVER: usize = 1;
const REJECTED: usize = 2;

/// The kinds `manifests` prints that a run outside a cluster applies: who
/// the operator is and what it may do. The CRD is installed apart; the
/// Deployment is run by hand; the budget has no pods to guard.
const APPLIED: [&str; 5] = [
    "ServiceAccount",
    "ClusterRole",
    "Role",
    "ClusterRoleBinding",
    "RoleBinding",
];

fn name(i: usize) -> String {
    format!("db-{i}")
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// A deployment variant: the `manifests` flags past the image and
/// namespaces, and what they mean for the checks.
struct Variant {
    label: &'static str,
    /// The operator watches the Databases' namespace only.
    namespaced: bool,
    shards: bool,
    view: bool,
    /// The view is exposed (`--view-expose`): on every interface, behind
    /// its access check (bearer tokens reviewed by the API server).
    expose: bool,
}

/// Where things run: the server, the operator's namespace (its
/// ServiceAccount and Leases) and the Databases'.
struct Place {
    cluster: TestCluster,
    /// The embedded server's HTTP endpoint, kept open for the operator.
    _served: Option<Box<dyn std::any::Any + Send>>,
    /// The kubeconfig of the cluster's admin.
    admin_kubeconfig: std::path::PathBuf,
    operator_ns: String,
    databases_ns: String,
}

async fn place(label: &str, scratch: &Scratch) -> Place {
    let (cluster, served, admin_kubeconfig) = match TestCluster::real().await.expect("the server") {
        Some(real) => {
            let path = real.kubeconfig().expect("a kubeconfig").to_owned();
            (real, None, path)
        }
        None => {
            let server = ApiServer::new();
            let path = scratch.0.join("admin.kubeconfig");
            let served = server
                .serve_http_on(SocketAddr::from(([127, 0, 0, 1], 0)), Some(path.clone()))
                .await
                .expect("the API server serves HTTP");
            let cluster = TestCluster::connect(&path).await.expect("a client");
            let keep: Box<dyn std::any::Any + Send> = Box::new((server, served));
            (cluster, Some(keep), path)
        }
    };
    cluster
        .install_crd(&Database::crd())
        .await
        .expect("the Database CRD");
    let operator_ns = cluster
        .create_namespace(&format!("rbac-{label}-op"))
        .await
        .expect("a namespace");
    let databases_ns = cluster
        .create_namespace(&format!("rbac-{label}-db"))
        .await
        .expect("a namespace");
    Place {
        cluster,
        _served: served,
        admin_kubeconfig,
        operator_ns,
        databases_ns,
    }
}

/// `database-operator manifests …` for `variant`, and its documents.
fn manifests(
    variant: &Variant,
    place: &Place,
    http_port: u16,
    view_port: u16,
) -> (String, Vec<Value>) {
    let mut args = vec![
        "manifests".to_owned(),
        "--image".to_owned(),
        "example.invalid/database-operator:1".to_owned(),
        "-n".to_owned(),
        place.operator_ns.clone(),
        "--http-port".to_owned(),
        http_port.to_string(),
    ];
    if variant.namespaced {
        args.extend(["--watch-namespace".to_owned(), place.databases_ns.clone()]);
    }
    if variant.shards {
        args.push("--shards".to_owned());
    }
    if variant.view {
        args.extend(["--view-port".to_owned(), view_port.to_string()]);
    }
    if variant.expose {
        args.push("--view-expose".to_owned());
    }
    let printed = Command::new(env!("CARGO_BIN_EXE_database-operator"))
        .args(&args)
        .output()
        .expect("database-operator manifests");
    assert!(
        printed.status.success(),
        "manifests failed: {}",
        String::from_utf8_lossy(&printed.stderr)
    );
    let yaml = String::from_utf8(printed.stdout).expect("UTF-8");
    let documents = serde_yaml_ng::Deserializer::from_str(&yaml)
        .map(|d| Value::deserialize(d).expect("a YAML document"))
        .filter(|d| !d.is_null())
        .collect();
    (yaml, documents)
}

fn resource_of(document: &Value) -> ApiResource {
    let api_version = document["apiVersion"].as_str().expect("apiVersion");
    let kind = document["kind"].as_str().expect("kind");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let plural = match kind {
        "ServiceAccount" => "serviceaccounts",
        "ClusterRole" => "clusterroles",
        "Role" => "roles",
        "ClusterRoleBinding" => "clusterrolebindings",
        "RoleBinding" => "rolebindings",
        other => panic!("not applied here: {other}"),
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// Applies the documents of [`APPLIED`] kinds as the admin, server-side.
async fn apply(client: &kube::Client, documents: &[Value]) {
    for document in documents {
        let kind = document["kind"].as_str().unwrap_or_default();
        if !APPLIED.contains(&kind) {
            continue;
        }
        let resource = resource_of(document);
        let name = document["metadata"]["name"].as_str().expect("a name");
        let api: Api<DynamicObject> = match document["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        api.patch(
            name,
            &PatchParams::apply("rbac-enforced-test").force(),
            &Patch::Apply(document),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {kind} {name}: {e}"));
    }
}

/// The token of the operator's ServiceAccount, from the Secret the
/// token controller makes for it (Kubernetes 1.20).
async fn service_account_token(client: &kube::Client, namespace: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let account = accounts.get(OPERATOR).await.expect("the ServiceAccount");
        for reference in account.secrets.iter().flatten() {
            let Some(secret_name) = &reference.name else {
                continue;
            };
            let Ok(secret) = secrets.get(secret_name).await else {
                continue;
            };
            if let Some(token) = secret.data.as_ref().and_then(|d| d.get("token")) {
                return String::from_utf8(token.0.clone()).expect("a UTF-8 token");
            }
        }
        assert!(
            Instant::now() < deadline,
            "no token for the ServiceAccount {namespace}/{OPERATOR} within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A kubeconfig for the admin's server with `token` as its only
/// credential.
fn kubeconfig_with_token(admin: &Path, token: &str, path: &Path) {
    let mut config = kube::config::Kubeconfig::read_from(admin).expect("the admin's kubeconfig");
    for named in &mut config.auth_infos {
        named.auth_info = Some(kube::config::AuthInfo {
            token: Some(token.to_owned().into()),
            ..kube::config::AuthInfo::default()
        });
    }
    let yaml = serde_yaml_ng::to_string(&config).expect("a kubeconfig as YAML");
    std::fs::write(path, yaml).expect("the operator's kubeconfig");
}

async fn client_of(kubeconfig: &Path) -> kube::Client {
    TestCluster::connect(kubeconfig)
        .await
        .expect("a client")
        .client()
}

/// The state in Database `i`'s record Secret, read as the admin.
async fn state(secrets: &Api<Secret>, i: usize) -> Option<String> {
    let secret = secrets
        .get_opt(&record_object_name_for::<DbState>(&name(i)))
        .await
        .ok()??;
    let record: Value = serde_json::from_slice(&secret.data?.get("record")?.0).ok()?;
    Some(record["state"].as_str()?.to_owned())
}

async fn eventually<F: std::future::Future<Output = bool>>(
    what: &str,
    timeout: Duration,
    log: &Path,
    mut done: impl FnMut() -> F,
) {
    let deadline = Instant::now() + timeout;
    while !done().await {
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            panic!(
                "timed out waiting for {what}; the operator's log ends:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether `result` is the server's `403 Forbidden`.
fn forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(status)) if status.code == 403)
}

/// The container's arguments in the printed Deployment.
fn container_args(documents: &[Value]) -> Vec<String> {
    let deployment = documents
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment");
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("the container's args")
        .iter()
        .map(|a| a.as_str().expect("a string").to_owned())
        .collect()
}

async fn run(variant: Variant) {
    let started = Instant::now();
    let scratch = Scratch::new(&format!("fsm-rbac-enforced-{}", variant.label));
    let place = place(variant.label, &scratch).await;
    let admin = place.cluster.client();
    let enforced = TestCluster::real_kubeconfig().is_some();
    let (http_port, view_port) = (free_port(), free_port());
    let (yaml, documents) = manifests(&variant, &place, http_port, view_port);
    apply(&admin, &documents).await;

    // The operator's identity: its ServiceAccount's token where the server
    // authorizes it; the admin's on the embedded server. (An exposed view
    // is shown to that token on both.)
    let token = service_account_token(&admin, &place.operator_ns).await;
    let kubeconfig = if enforced {
        let path = scratch.0.join("operator.kubeconfig");
        kubeconfig_with_token(&place.admin_kubeconfig, &token, &path);
        path
    } else {
        place.admin_kubeconfig.clone()
    };

    let databases: Api<Database> = Api::namespaced(admin.clone(), &place.databases_ns);
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &place.databases_ns);
    // db-1's connection Secret, left by an earlier run of the operator
    // (the Database controls it): the operator's create is answered 409,
    // and it reads and patches it.
    let spec = |i: usize| DatabaseSpec {
        engine: "postgres".into(),
        size: "small".into(),
        seed: if i == REJECTED { BAD } else { GOOD }.into(),
    };
    let leftover = databases
        .create(
            &PostParams::default(),
            &Database::new(&name(LEFTOVER), spec(LEFTOVER)),
        )
        .await
        .expect("the leftover Database");
    let connection: Secret = serde_json::from_value(json!({
        "metadata": {
            "name": format!("{}-connection", name(LEFTOVER)),
            "ownerReferences": [{
                "apiVersion": "examples.operator-fsm.io/v1", "kind": "Database",
                "name": name(LEFTOVER), "uid": leftover.metadata.uid,
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "stringData": {"host": "stale"},
    }))
    .expect("a Secret");
    secrets
        .create(&PostParams::default(), &connection)
        .await
        .expect("the leftover connection Secret");

    let mut cloud = Proc::spawn(
        Command::new(env!("CARGO_BIN_EXE_fake-cloud"))
            .args([
                "--failure-rate",
                "0.2",
                "--ready-after",
                "200ms",
                "--seed",
                "5",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    );
    let cloud_url = cloud.line_after("listening on", Duration::from_secs(30));
    let log = scratch.0.join("operator.log");
    let args = container_args(&documents);
    let operator = Proc::spawn(
        Command::new(env!("CARGO_BIN_EXE_database-operator"))
            .args(&args)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            // What the Deployment's downward API would set.
            .env("POD_NAME", format!("{OPERATOR}-7d9f-x2k4q"))
            .env("POD_NAMESPACE", &place.operator_ns)
            .env("DATABASE_CLOUD_URL", &cloud_url)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("the operator's log")),
    );

    for i in (0..DATABASES).filter(|i| *i != LEFTOVER) {
        databases
            .create(&PostParams::default(), &Database::new(&name(i), spec(i)))
            .await
            .expect("a Database");
    }
    let expected = |i: usize| if i == REJECTED { "Failed" } else { "Ready" };
    eventually(
        "every Database to settle",
        Duration::from_secs(120),
        &log,
        || {
            let secrets = secrets.clone();
            async move {
                for i in 0..DATABASES {
                    if state(&secrets, i).await.as_deref() != Some(expected(i)) {
                        return false;
                    }
                }
                true
            }
        },
    )
    .await;
    let patched = secrets
        .get(&format!("{}-connection", name(LEFTOVER)))
        .await
        .expect("the connection Secret");
    assert!(
        patched.data.as_ref().map_or(0, BTreeMap::len) > 1,
        "the leftover connection Secret was read and patched: {patched:?}"
    );
    if variant.view {
        let addr = SocketAddr::from(([127, 0, 0, 1], view_port));
        let ns = &place.databases_ns;
        // An exposed view lets in a token of someone who may list
        // Databases (the operator's own will do), and nobody without one.
        let token = variant.expose.then_some(token.as_str());
        if variant.expose {
            let (status, body) = soak::http_get(addr, "/", None).await;
            assert!(
                status.contains(" 401 "),
                "GET / without a token: {status}\n{body}"
            );
        }
        for path in [
            "/".to_owned(),
            "/api/objects".to_owned(),
            format!("/objects/Database/{ns}/{}", name(0)),
            format!("/objects/Database/{ns}/{}", name(REJECTED)),
        ] {
            let (status, body) = soak::http_get(addr, &path, token).await;
            assert!(status.contains(" 200 "), "GET {path}: {status}\n{body}");
            assert!(
                !body.contains("cannot list the events") && !body.contains("forbidden"),
                "GET {path} shows a failure:\n{body}"
            );
        }
    }

    for i in 0..DATABASES {
        databases
            .delete(&name(i), &DeleteParams::default())
            .await
            .expect("the Database is deleted");
    }
    eventually(
        "every Database to be gone",
        Duration::from_secs(90),
        &log,
        || {
            let databases = databases.clone();
            async move {
                databases
                    .list(&ListParams::default())
                    .await
                    .is_ok_and(|list| list.items.is_empty())
            }
        },
    )
    .await;

    if enforced {
        refusals(&variant, &place, &kubeconfig, &yaml).await;
    }
    drop(operator);
    drop(cloud);
    let operator_log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !operator_log.contains("panicked"),
        "the operator panicked:\n{operator_log}"
    );
    for refusal in ["forbidden", "Forbidden"] {
        assert!(
            !operator_log.contains(refusal),
            "the operator was refused something its Roles should grant:\n{operator_log}"
        );
    }
    println!(
        "{}: the workflow ran {} in {:.1} s",
        variant.label,
        if enforced {
            "as the operator's ServiceAccount, RBAC enforced"
        } else {
            "on the embedded server (RBAC not enforced)"
        },
        started.elapsed().as_secs_f64()
    );
}

/// What the operator's token must not do, per variant.
async fn refusals(variant: &Variant, place: &Place, kubeconfig: &Path, yaml: &str) {
    let client = client_of(kubeconfig).await;
    let ns = &place.databases_ns;
    let own = |ns: &str| Api::<Database>::namespaced(client.clone(), ns);
    // Never granted: deleting the objects it reconciles, reading the
    // cluster's nodes.
    assert!(forbidden(
        own(ns).delete("db-0", &DeleteParams::default()).await
    ));
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    assert!(forbidden(nodes.list(&ListParams::default()).await));
    // `get` on the resource only for the web view; the controller reads
    // from its watch.
    let got = own(ns).get_opt("db-0").await;
    assert_eq!(
        forbidden(got),
        !variant.view,
        "get on a Database, view {}",
        variant.view
    );

    let other_secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    if variant.namespaced {
        // A Role in the watched namespace: nothing outside it.
        assert!(forbidden(other_secrets.list(&ListParams::default()).await));
        assert!(forbidden(
            own("kube-system").list(&ListParams::default()).await
        ));
        let everywhere: Api<Database> = Api::all(client.clone());
        assert!(forbidden(everywhere.list(&ListParams::default()).await));
        // No ClusterRole but, for an exposed view, the one to review
        // tokens (cluster-scoped kinds, which a Role cannot grant).
        assert_eq!(
            yaml.matches("\nkind: ClusterRole\n").count(),
            usize::from(variant.expose),
            "{yaml}"
        );
        if variant.expose {
            assert!(
                yaml.contains("name: database-operator-view-access\n"),
                "{yaml}"
            );
        }
    } else {
        // A ClusterRole: the Secret store's records need Secrets in every
        // namespace, which the printed caveat says.
        assert!(other_secrets.list(&ListParams::default()).await.is_ok());
        assert!(
            yaml.starts_with("# Caveat: The ClusterRole database-operator grants"),
            "{yaml}"
        );
    }

    let leases: Api<Lease> = Api::namespaced(client.clone(), &place.operator_ns);
    let elsewhere: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    assert!(forbidden(elsewhere.list(&ListParams::default()).await));
    if variant.shards {
        // Sharding lists the shard Leases of its own namespace.
        assert!(leases.list(&ListParams::default()).await.is_ok());
    } else {
        // Leader election: its own Lease, and no other.
        let own_lease = format!("{OPERATOR}-leader");
        assert!(leases.get(&own_lease).await.is_ok(), "its own Lease");
        assert!(forbidden(leases.get("someone-else").await));
        assert!(forbidden(leases.list(&ListParams::default()).await));
        let mut lease = leases.get(&own_lease).await.expect("its own Lease");
        lease.metadata.name = Some("someone-else-leader".into());
        lease.metadata.resource_version = None;
        lease.metadata.uid = None;
        // A create cannot be narrowed to a name: allowed, then the rest of
        // what that Lease allows is still refused.
        leases
            .create(&PostParams::default(), &lease)
            .await
            .expect("creating a Lease");
        assert!(forbidden(leases.get("someone-else-leader").await));
        assert!(forbidden(
            leases
                .delete("someone-else-leader", &DeleteParams::default())
                .await
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_wide_with_leader_election_runs_on_what_it_is_granted() {
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    run(Variant {
        label: "cluster",
        namespaced: false,
        shards: false,
        view: false,
        expose: false,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_namespace_with_leader_election_runs_on_what_it_is_granted() {
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    run(Variant {
        label: "namespaced",
        namespaced: true,
        shards: false,
        view: false,
        expose: false,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_runs_on_what_it_is_granted() {
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    run(Variant {
        label: "sharded",
        namespaced: true,
        shards: true,
        view: false,
        expose: false,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_web_view_runs_on_what_it_is_granted() {
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    run(Variant {
        label: "view",
        namespaced: true,
        shards: false,
        view: true,
        expose: false,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_web_view_exposed_runs_on_what_it_is_granted() {
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    // On every interface, behind bearer tokens the operator has the API
    // server review: the printed ClusterRole `<operator>-view-access`
    // lets it create the TokenReviews and SubjectAccessReviews.
    run(Variant {
        label: "exposed",
        namespaced: true,
        shards: false,
        view: true,
        expose: true,
    })
    .await;
}
