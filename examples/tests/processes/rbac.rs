//! Security: the RBAC that `database-operator rbac` prints grants exactly the
//! (verb, resource) pairs the operator uses — no more, nothing missing.
//!
//! The `database-operator` binary runs (`run --kubeconfig`) against an
//! embedded API server served over HTTP from this test, with `fake-cloud` as
//! its cloud. The test drives a full workflow through every path that makes
//! API calls: Databases created and provisioned, one whose seed SQL the
//! cloud rejects (the workflow fails and compensates), one whose connection
//! Secret (its own) is left over from an earlier run (created, answered
//! `409`, read, then patched), every Database deleted (the deletion compensation, the record
//! Secret deleted, the finalizer removed), and cloud failures that make
//! handlers retry (repeated events, which the event recorder patches).
//!
//! The test acts on the server directly (`ApiServer::cluster`), not over
//! HTTP, so the request log holds the operator's requests alone. The pairs
//! used are read from that log and compared with the printed rules. One
//! grant is never a request: `update` on `databases/finalizers`, which the
//! real server's `OwnerReferencesPermissionEnforcement` admission checks
//! when the operator creates a record Secret whose owner reference blocks
//! the Database's deletion; the embedded server does not enforce it, so it
//! is expected and listed apart.
//!
//! With the web view on (`run --view-addr`, `rbac --view`), the test also
//! reads every kind of page the view serves while the Databases exist.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::soak;

use examples::database::{Database, DatabaseSpec, DbState};
use k8s_openapi::api::core::v1::Secret;
use kube::CustomResourceExt;
use operator_fsm::store::record_object_name_for;
use operator_fsm::testkit::ApiServer;
use operator_fsm::testkit::cluster::DeleteOptions;
use serde_json::{Value, json};
use soak::Proc;

const NS: &str = "default";
const GOOD: &str = "CREATE TABLE t (id int); INSERT INTO t VALUES (1);";
const BAD: &str = "CREATE TABLE t (id int); INSRT INTO t VALUES (1);";
const DATABASES: usize = 6;
/// The Database whose seed the cloud rejects.
const REJECTED: usize = 4;
/// The Database whose connection Secret is left over.
const LEFTOVER: usize = 1;

/// A `(group, resource[/subresource], verb)` permission.
type Pair = (String, String, String);

fn name(i: usize) -> String {
    format!("db-{i}")
}

/// Runs `f` on the cluster (not logged: no HTTP).
fn with_cluster<T>(
    server: &ApiServer,
    f: impl FnOnce(&mut operator_fsm::testkit::cluster::Cluster) -> T,
) -> T {
    f(&mut server.cluster())
}

fn create(server: &ApiServer, group: &str, plural: &str, ns: &str, object: Value) {
    with_cluster(server, |c| {
        let def = c
            .registry
            .get(group, "v1", plural)
            .unwrap_or_else(|| panic!("{group}/{plural} is served"));
        c.create(&def, ns, object, false, jiff::Timestamp::now())
            .unwrap_or_else(|e| panic!("creating a {plural}: {e}"));
    });
}

fn get(server: &ApiServer, group: &str, plural: &str, name: &str) -> Option<Value> {
    with_cluster(server, |c| {
        let def = c.registry.get(group, "v1", plural)?;
        c.get(&def, NS, name).ok()
    })
}

/// The state of Database `i`'s record, from its record Secret.
fn state(server: &ApiServer, i: usize) -> Option<String> {
    let record_object = record_object_name_for::<DbState>(&name(i));
    let secret: Secret =
        serde_json::from_value(get(server, "", "secrets", &record_object)?).ok()?;
    let text = secret.data?.get("record")?.0.clone();
    let record: Value = serde_json::from_slice(&text).ok()?;
    Some(record["state"].as_str()?.to_owned())
}

fn wait(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pairs the printed RBAC grants.
fn granted(yaml: &str) -> BTreeSet<Pair> {
    let mut out = BTreeSet::new();
    for document in serde_yaml_ng::Deserializer::from_str(yaml) {
        let object: Value = serde::Deserialize::deserialize(document).expect("YAML");
        if object.is_null() {
            continue;
        }
        for rule in object["rules"].as_array().expect("rules") {
            let strings = |key: &str| -> Vec<String> {
                rule[key]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            };
            for group in strings("apiGroups") {
                for resource in strings("resources") {
                    for verb in strings("verbs") {
                        out.insert((group.clone(), resource.clone(), verb));
                    }
                }
            }
        }
    }
    out
}

fn table(pairs: &BTreeSet<Pair>) -> String {
    pairs
        .iter()
        .map(|(g, r, v)| {
            let g = if g.is_empty() { "core" } else { g };
            format!("  {g}/{r} {v}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A loopback address with a port free a moment ago.
fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").to_string()
}

/// Runs the workflow with `database-operator run <run_args>`, and compares
/// the pairs used with what `database-operator rbac <rbac_args>` prints.
/// With `namespaced`, the printed objects are Roles in `default`, so every
/// request must stay in that namespace too.
async fn check(label: &str, run_args: &[&str], rbac_args: &[&str], namespaced: bool) {
    let started = Instant::now();
    let server = ApiServer::new();
    let dir = std::env::temp_dir().join(format!("fsm-rbac-{label}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let kubeconfig = dir.join("kubeconfig");
    let http = server
        .serve_http_on(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            Some(kubeconfig.clone()),
        )
        .await
        .expect("the API server serves HTTP");
    let crd = serde_json::to_value(Database::crd()).expect("the CRD as JSON");
    create(
        &server,
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "",
        crd,
    );

    let mut cloud = Proc::spawn(
        Command::new(env!("CARGO_BIN_EXE_fake-cloud"))
            .args([
                "--failure-rate",
                "0.3",
                "--ready-after",
                "200ms",
                "--seed",
                "3",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    );
    let cloud_url = cloud.line_after("listening on", Duration::from_secs(30));
    // The Database whose connection Secret an earlier run of the operator
    // created before it crashed (the Database controls it): created before
    // the operator starts, so that its create is answered 409 and the
    // Secret patched.
    let spec = DatabaseSpec {
        engine: "postgres".into(),
        size: "small".into(),
        seed: GOOD.into(),
    };
    let object = serde_json::to_value(Database::new(&name(LEFTOVER), spec)).expect("JSON");
    create(&server, "examples.operator-fsm.io", "databases", NS, object);
    let database = get(
        &server,
        "examples.operator-fsm.io",
        "databases",
        &name(LEFTOVER),
    )
    .expect("the leftover Database");
    let leftover = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {
            "name": format!("{}-connection", name(LEFTOVER)),
            "ownerReferences": [{
                "apiVersion": "examples.operator-fsm.io/v1", "kind": "Database",
                "name": name(LEFTOVER), "uid": database["metadata"]["uid"],
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "stringData": {"host": "stale"}});
    create(&server, "", "secrets", NS, leftover);
    let log = dir.join("operator.log");
    let operator = Proc::spawn(
        Command::new(env!("CARGO_BIN_EXE_database-operator"))
            .args(["run", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(run_args)
            .env("DATABASE_CLOUD_URL", &cloud_url)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("the operator's log")),
    );

    for i in (0..DATABASES).filter(|i| *i != LEFTOVER) {
        let spec = DatabaseSpec {
            engine: "postgres".into(),
            size: "small".into(),
            seed: if i == REJECTED { BAD } else { GOOD }.into(),
        };
        let object = serde_json::to_value(Database::new(&name(i), spec)).expect("JSON");
        create(&server, "examples.operator-fsm.io", "databases", NS, object);
    }
    let expected = |i: usize| if i == REJECTED { "Failed" } else { "Ready" };
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let states: Vec<Option<String>> = (0..DATABASES).map(|i| state(&server, i)).collect();
        if (0..DATABASES).all(|i| states[i].as_deref() == Some(expected(i))) {
            break;
        }
        // Which one did not settle, and where it rests, for the log of a
        // run that fails here.
        assert!(
            Instant::now() < deadline,
            "timed out waiting for every Database to settle: states {states:?}, expected \
             Ready but {REJECTED} Failed; the operator's log: {}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // With the web view on, every kind of page it serves, read the way a
    // browser would: the index, the rows, and an object's page (the
    // object, its record Secret, its Events).
    if let Some(at) = run_args.iter().position(|a| *a == "--view-addr") {
        let addr: SocketAddr = run_args[at + 1].parse().expect("the view's address");
        for path in [
            "/".to_owned(),
            "/api/objects".to_owned(),
            format!("/objects/Database/{NS}/{}", name(0)),
            format!("/objects/Database/{NS}/{}", name(REJECTED)),
        ] {
            let (status, body) = soak::http_get(addr, &path, None).await;
            assert!(status.contains(" 200 "), "GET {path}: {status}\n{body}");
            assert!(
                !body.contains("cannot list the events") && !body.contains("forbidden"),
                "GET {path} shows a failure:\n{body}"
            );
        }
    }
    // The record Secrets block their Database's deletion, which is what
    // makes `databases/finalizers` `update` necessary on a real server.
    let record = get(
        &server,
        "",
        "secrets",
        &record_object_name_for::<DbState>(&name(0)),
    )
    .expect("a record Secret");
    assert_eq!(
        record["metadata"]["ownerReferences"][0]["blockOwnerDeletion"],
        json!(true),
        "{record}"
    );
    let connection = get(
        &server,
        "",
        "secrets",
        &format!("{}-connection", name(LEFTOVER)),
    )
    .expect("the connection Secret");
    let keys = connection["data"]
        .as_object()
        .map_or(0, serde_json::Map::len);
    assert!(keys > 1, "the leftover Secret was patched: {connection}");

    with_cluster(&server, |c| {
        let def = c
            .registry
            .get("examples.operator-fsm.io", "v1", "databases")
            .expect("databases are served");
        for i in 0..DATABASES {
            c.delete(
                &def,
                NS,
                &name(i),
                &DeleteOptions::default(),
                jiff::Timestamp::now(),
            )
            .expect("the Database is deleted");
        }
    });
    wait("every Database to be gone", Duration::from_secs(60), || {
        (0..DATABASES)
            .all(|i| get(&server, "examples.operator-fsm.io", "databases", &name(i)).is_none())
    });
    // Whatever the operator still does after its work is done is part of
    // what it uses (its watches, re-lists).
    tokio::time::sleep(Duration::from_secs(1)).await;
    drop(operator);
    drop(cloud);
    let operator_log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !operator_log.contains("panicked"),
        "the operator panicked:\n{operator_log}"
    );

    let records = server.request_log().records();
    let discovery = records.iter().filter(|r| r.resource.is_empty()).count();
    let used: BTreeSet<Pair> = records
        .iter()
        .filter(|r| !r.resource.is_empty())
        .map(|r| {
            let resource = match &r.subresource {
                Some(sub) => format!("{}/{sub}", r.resource),
                None => r.resource.clone(),
            };
            (r.group.clone(), resource, r.verb.clone())
        })
        .collect();
    let printed = Command::new(env!("CARGO_BIN_EXE_database-operator"))
        .arg("rbac")
        .args(rbac_args)
        .output()
        .expect("database-operator rbac");
    assert!(printed.status.success(), "database-operator rbac failed");
    let yaml = String::from_utf8(printed.stdout).expect("UTF-8");
    let granted = granted(&yaml);
    let authorization_only: BTreeSet<Pair> = [(
        "examples.operator-fsm.io".to_owned(),
        "databases/finalizers".to_owned(),
        "update".to_owned(),
    )]
    .into();

    let missing: BTreeSet<Pair> = used.difference(&granted).cloned().collect();
    let unused: BTreeSet<Pair> = granted
        .difference(&used)
        .filter(|p| !authorization_only.contains(p))
        .cloned()
        .collect();
    let outside: BTreeSet<String> = records
        .iter()
        .filter(|r| !r.resource.is_empty() && r.namespace.as_deref() != Some(NS))
        .map(|r| format!("{} {} (namespace {:?})", r.verb, r.resource, r.namespace))
        .collect();
    println!(
        "{label}: {} requests of the operator ({discovery} discovery), {:.1} s\nused:\n{}\ngranted:\n{}",
        records.len(),
        started.elapsed().as_secs_f64(),
        table(&used),
        table(&granted)
    );
    assert!(
        missing.is_empty(),
        "the operator used what the printed RBAC does not grant:\n{}",
        table(&missing)
    );
    assert!(
        unused.is_empty(),
        "the printed RBAC grants what the operator never used:\n{}",
        table(&unused)
    );
    if namespaced {
        assert!(
            outside.is_empty(),
            "the printed Roles hold in {NS} only, but the operator asked outside it: {outside:?}"
        );
        assert!(!yaml.contains("kind: ClusterRole"), "{yaml}");
    }
    assert!(
        authorization_only.is_subset(&granted),
        "databases/finalizers update is needed for blockOwnerDeletion"
    );
    drop(http);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn printed_cluster_role_is_exactly_what_the_operator_uses() {
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    check("cluster", &[], &[], false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn printed_roles_with_leader_election_are_exactly_what_the_operator_uses() {
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    let lease = ["--leader-elect", "--lease-namespace", NS];
    // A short Lease, renewed every ~0.7 s: the run renews it (an `update`)
    // many times over, as a long-lived operator does.
    let run: Vec<&str> = ["-n", NS, "--lease-duration", "2"]
        .into_iter()
        .chain(lease)
        .collect();
    let rbac: Vec<&str> = ["-n", NS].into_iter().chain(lease).collect();
    check("namespaced", &run, &rbac, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn printed_roles_with_sharding_are_exactly_what_the_operator_uses() {
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    // One replica in sharded mode: it holds its shard Lease, runs the
    // assigner (it holds the sharder Lease too) and releases nothing.
    let run = [
        "-n",
        NS,
        "--lease-namespace",
        NS,
        "--lease-duration",
        "2",
        "--shards",
        "--shard-lease",
        "db-shard-0",
    ];
    let rbac = ["-n", NS, "--shards", "--lease-namespace", NS];
    check("sharded", &run, &rbac, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn printed_roles_with_the_web_view_are_exactly_what_the_operator_uses() {
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    // The view runs in the operator's process, with its ServiceAccount:
    // its pages GET the object and its record Secret and list Events.
    let view = free_addr();
    let run = ["-n", NS, "--view-addr", view.as_str()];
    let rbac = ["-n", NS, "--view"];
    check("view", &run, &rbac, true).await;
}
