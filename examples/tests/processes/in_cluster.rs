//! The operator in a real cluster, deployed as its users deploy it (issue
//! 37): `database-operator` as a container image (assembled from the
//! binary and exactly the libraries `ldd` names, imported into the node's
//! containerd by `scripts/real-cluster/import`), and everything its
//! `manifests` prints applied with kubectl. Its two replicas must become
//! ready on their probes, one must hold the Lease, and when that pod is
//! deleted the other takes over; no container restarts on the way (a
//! missing permission or a crash would restart it). It runs with its
//! ServiceAccount's token, under exactly the printed RBAC, against the API
//! server reached through the `kubernetes` Service.
//!
//! `the_leader_pod_deleted_mid_workflow_loses_nothing_and_pays_once` is
//! the crash soak's question asked of the real thing (issue 37, test 3):
//! the operator's pods run the Databases' workflows against `fake-cloud`
//! (on this machine, at the node's address, which pods reach), and the
//! leader's pod is deleted with workflows mid-way, twice. At the end the
//! crash soak's checks (`soak::check_outcome`): every Database rests in its
//! expected state along the exact path of its workflow, no transition
//! twice, one create per Database in the cloud's ledger; and deleting the
//! Databases deletes every instance.
//!
//! `kubectl_fsm_and_the_web_view_show_the_databases_in_the_cluster` is
//! what a person sees of it (issue 37, test 4): `kubectl fsm get` and
//! `describe` (the plugin installed on `PATH`, run by the real `kubectl`;
//! it needs `cargo build -p kubectl-fsm` first) and the web view in the
//! operator's pod through `kubectl port-forward`.
//!
//! `containerd_killed_mid_workflow_loses_nothing_and_pays_once` kills
//! the node's containerd (`-9`) with workflows mid-way and starts it again
//! (`scripts/real-cluster/restart-containerd`): the crash soak's checks
//! again, and the same pods, none restarted.
//!
//! Runs only when `FSM_REAL_CLUSTER_KUBECONFIG` names a cluster from
//! `scripts/real-cluster/start` (as root: the import talks to its
//! containerd); otherwise it says so and returns.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::soak;
use crate::soak::{CloudKeys, check_outcome, create_up_to_in, in_flight_in, settle_in};

use examples::database::Database;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, LogParams};
use operator_fsm::testkit::TestCluster;

const ENV: &str = "FSM_REAL_CLUSTER_KUBECONFIG";
const OPERATOR: &str = "database-operator";
/// A tag of its own (not `latest`: the kubelet would try to pull that).
const IMAGE: &str = "fsm.local/database-operator:in-cluster-test";
const DEADLINE: Duration = Duration::from_secs(120);
/// The node's address on the pods' bridge (scripts/real-cluster/common.sh,
/// NODE_IP): a process of this machine listening there is reachable from
/// the pods.
const NODE_IP: &str = "10.244.0.1";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_owned()
}

/// Polls `check` until it returns `Some`, or panics with `what`.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {DEADLINE:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn run(what: &str, command: &mut Command, stdin: Option<&[u8]>) -> Vec<u8> {
    let mut child = command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input)
            .expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{what} failed: {}", out.status);
    out.stdout
}

/// The Lease's holder, when held.
async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get(&format!("{OPERATOR}-leader"))
        .await
        .ok()?
        .spec?
        .holder_identity
}

async fn ready_pods(pods: &Api<Pod>) -> Option<Vec<Pod>> {
    let list = pods.list(&ListParams::default()).await.ok()?;
    let ready: Vec<Pod> = list
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .collect();
    Some(ready)
}

fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map_or(0, |c| c.iter().map(|c| c.restart_count).sum())
}

/// The real cluster's kubeconfig, or `None` (said on stderr) when the
/// environment names none.
fn kubeconfig(test: &str) -> Option<PathBuf> {
    let Some(path) = std::env::var_os(ENV).filter(|p| !p.is_empty()) else {
        eprintln!("{test}: skipped, {ENV} is not set (scripts/real-cluster/start prints it)");
        return None;
    };
    Some(PathBuf::from(path))
}

/// The operator deployed in namespace `ns` of the cluster, from its own
/// image and `manifests`, its cloud at `cloud_url`.
struct Deployed {
    kubeconfig: PathBuf,
    ns: String,
    cluster: TestCluster,
    deployments: Api<Deployment>,
    pods: Api<Pod>,
    leases: Api<Lease>,
}

impl Deployed {
    async fn start(kubeconfig: PathBuf, prefix: &str, cloud_url: &str) -> Deployed {
        Deployed::start_with(kubeconfig, prefix, cloud_url, &[]).await
    }

    /// [`Deployed::start`] with more arguments for `manifests`.
    async fn start_with(
        kubeconfig: PathBuf,
        prefix: &str,
        cloud_url: &str,
        manifests_args: &[&str],
    ) -> Deployed {
        let cluster = TestCluster::connect(&kubeconfig)
            .await
            .expect("the real cluster");
        let ns = cluster.create_namespace(prefix).await.expect("a namespace");
        run(
            "scripts/real-cluster/import",
            Command::new(repo_root().join("scripts/real-cluster/import"))
                .arg(env!("CARGO_BIN_EXE_database-operator"))
                .arg(IMAGE),
            None,
        );
        // Watching its own namespace only: a Role there instead of a
        // ClusterRole, so nothing but the CRD is shared with other runs.
        let cloud_arg = format!("--arg=--cloud-url={cloud_url}");
        let manifests = run(
            "database-operator manifests",
            Command::new(env!("CARGO_BIN_EXE_database-operator"))
                .args([
                    "manifests",
                    "--image",
                    IMAGE,
                    "-n",
                    &ns,
                    "--watch-namespace",
                    &ns,
                    // Kubernetes 1.20 serves PodDisruptionBudgets as v1beta1 only.
                    "--pdb-api-version",
                    "policy/v1beta1",
                    &cloud_arg,
                ])
                .args(manifests_args),
            None,
        );
        run(
            "kubectl apply",
            Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["apply", "-f", "-"]),
            Some(&manifests),
        );
        Deployed {
            kubeconfig,
            deployments: Api::namespaced(cluster.client(), &ns),
            pods: Api::namespaced(cluster.client(), &ns),
            leases: Api::namespaced(cluster.client(), &ns),
            ns,
            cluster,
        }
    }

    /// Waits for both replicas ready and one of them leading; the leader.
    async fn leader(&self) -> String {
        eventually("the operator's two replicas available", || async {
            let status = self.deployments.get(OPERATOR).await.ok()?.status?;
            (status.available_replicas == Some(2)).then_some(())
        })
        .await;
        let ready = eventually("two ready pods", || async {
            ready_pods(&self.pods).await.filter(|p| p.len() == 2)
        })
        .await;
        let names: Vec<String> = ready
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        eventually("the Lease held by one of them", || async {
            holder(&self.leases).await.filter(|h| names.contains(h))
        })
        .await
    }

    /// Deletes the leader's pod `leader` (as a node drain or a rollout
    /// does: SIGTERM, then the pod goes); waits until another pod holds
    /// the Lease, which it returns.
    async fn delete_leader(&self, leader: &str) -> String {
        self.pods
            .delete(leader, &DeleteParams::default())
            .await
            .expect("delete the leader's pod");
        eventually("another pod holding the Lease", || async {
            holder(&self.leases)
                .await
                .filter(|h| h != leader && !h.is_empty())
        })
        .await
    }

    /// Waits until two pods, none of them in `gone`, are ready; checks
    /// that no container restarted (a missing permission or a crash would
    /// restart it) and no log shows a panic.
    async fn two_ready_without(&self, gone: &[String]) {
        let ready = eventually("two ready pods again", || async {
            ready_pods(&self.pods).await.filter(|p| {
                p.len() == 2
                    && p.iter()
                        .all(|p| !gone.iter().any(|g| p.metadata.name.as_ref() == Some(g)))
            })
        })
        .await;
        for pod in &ready {
            let name = pod.metadata.name.clone().unwrap_or_default();
            assert_eq!(restarts(pod), 0, "{name} restarted");
            let log = self
                .pods
                .logs(&name, &LogParams::default())
                .await
                .unwrap_or_else(|e| panic!("the log of {name}: {e}"));
            assert!(!log.contains("panicked"), "{name} panicked:\n{log}");
        }
    }

    /// Deletes every Database while the operator runs: each one's
    /// compensation deletes its instance before the finalizer lets it go
    /// (deleting the namespace alone would leave them waiting for an
    /// operator it deletes too). Checks that no instance is left in the
    /// cloud at `cloud_url`.
    async fn delete_databases(&self, cloud_url: &str) {
        let databases: Api<Database> = Api::namespaced(self.cluster.client(), &self.ns);
        databases
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await
            .expect("delete the Databases");
        eventually("the Databases gone", || async {
            let left = databases.list(&ListParams::default()).await.ok()?;
            left.items.is_empty().then_some(())
        })
        .await;
        let after = soak::ledger(cloud_url).await;
        let kept: Vec<_> = after
            .charges
            .iter()
            .filter(|c| !after.deleted.contains(&c.instance_id))
            .map(|c| &c.name)
            .collect();
        assert!(
            kept.is_empty(),
            "instances left after their Database: {kept:?}"
        );
    }

    async fn delete(self) {
        let namespaces: Api<Namespace> = Api::all(self.cluster.client());
        let _ = namespaces.delete(&self.ns, &DeleteParams::default()).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_operator_runs_from_its_manifests_and_fails_over() {
    let Some(kubeconfig) = kubeconfig("in_cluster") else {
        return;
    };
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    // No cloud here: the operator starts, elects and serves its probes all
    // the same (a Database would wait for the cloud).
    let deployed = Deployed::start(kubeconfig, "in-cluster", "http://127.0.0.1:9").await;
    let leader = deployed.leader().await;

    // The leader's pod goes away (as in a node drain or a rollout): the
    // standby takes the Lease, the ReplicaSet replaces the pod.
    let next = deployed.delete_leader(&leader).await;
    assert_ne!(next, leader);
    deployed.two_ready_without(&[leader]).await;
    deployed.delete().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_leader_pod_deleted_mid_workflow_loses_nothing_and_pays_once() {
    const OBJECTS: usize = 30;
    const DELETIONS: usize = 2;
    let Some(kubeconfig) = kubeconfig("in_cluster") else {
        return;
    };
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    // The crash soak's cloud (a fifth of its calls fail, seeded), keys
    // honoured as in failover.rs: a terminated leader stops acting before
    // it gives the Lease up, but its last call may still be answered.
    // Instances take 3 s to be ready, so every wave is still mid-way when
    // its leader goes, however fast the machine.
    let (_cloud, cloud_url) =
        soak::cloud_ready_after(1, 20, CloudKeys::On, &format!("{NODE_IP}:0"), "3s");
    let deployed = Deployed::start(kubeconfig, "in-cluster-soak", &cloud_url).await;
    let client = deployed.cluster.client();
    let ns = deployed.ns.clone();
    let mut leader = deployed.leader().await;

    // Databases in waves; after each wave but the last, the leader's pod
    // is deleted as soon as workflows run.
    let mut created = 0;
    let mut deleted = Vec::new();
    let mut interrupted = Vec::new();
    for wave in 0..=DELETIONS {
        let until = OBJECTS * (wave + 1) / (DELETIONS + 1);
        create_up_to_in(&client, &ns, &mut created, until).await;
        if wave == DELETIONS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        interrupted.push(in_flight_in(&client, &ns, created).await);
        let next = deployed.delete_leader(&leader).await;
        deleted.push(std::mem::replace(&mut leader, next));
        // The replacement pod up as the standby before the next wave.
        deployed.two_ready_without(&deleted).await;
    }
    let records = settle_in(&client, &ns, OBJECTS, DEADLINE).await;
    let ledger = soak::ledger(&cloud_url).await;
    let per_database = check_outcome(
        &records,
        &ledger,
        &format!("leader pods deleted: {deleted:?}, workflows in flight then: {interrupted:?}"),
    );
    // Deletions that land between workflows prove nothing.
    assert!(
        interrupted.iter().all(|n| *n > 0),
        "a deletion interrupted no workflow: {interrupted:?}"
    );
    deployed.two_ready_without(&deleted).await;

    deployed.delete_databases(&cloud_url).await;
    println!(
        "in-cluster failover: {OBJECTS} Databases, leader pods deleted {deleted:?} with \
         {interrupted:?} workflows in flight; creates per database {per_database:?}; \
         cloud: {} charges, {} deletes, {} injected failures, {} replays",
        ledger.charges.len(),
        ledger.deleted.len(),
        ledger.injected_failures,
        ledger.replays,
    );
    deployed.delete().await;
}

/// The web view's port in the operator's pods (`manifests --view-port`:
/// on the pod's loopback, reached with `kubectl port-forward`).
const VIEW_PORT: &str = "8090";

/// The built `kubectl-fsm` plugin (next to the operator's binary in the
/// same target directory: `cargo build -p kubectl-fsm`), installed as a
/// person installs it: copied into a directory of its own (`bin` of
/// `scratch`, as `cargo install --root` makes), which goes on `PATH`.
/// (Not the target directory itself: kubectl would take its
/// `kubectl-fsm.d` for a plugin too.)
fn install_plugin(scratch: &soak::Scratch) -> PathBuf {
    let built = Path::new(env!("CARGO_BIN_EXE_database-operator")).with_file_name("kubectl-fsm");
    assert!(
        built.is_file(),
        "no {built:?}: build the plugin first (cargo build -p kubectl-fsm)"
    );
    let bin = scratch.0.join("bin");
    std::fs::create_dir_all(&bin).expect("the plugin's directory");
    std::fs::copy(&built, bin.join("kubectl-fsm")).expect("install kubectl-fsm");
    bin
}

/// `kubectl ARGS` with the plugin's directory `bin` first on `PATH` and
/// the real cluster's kubeconfig; its stdout, after checking that it
/// succeeded.
fn kubectl_with_plugin(bin: &Path, kubeconfig: &Path, args: &[&str]) -> String {
    let mut paths = vec![bin.to_owned()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let out = run(
        &format!("kubectl {}", args.join(" ")),
        Command::new("kubectl")
            .args(args)
            .env("PATH", std::env::join_paths(paths).expect("PATH"))
            .env("KUBECONFIG", kubeconfig),
        None,
    );
    String::from_utf8(out).expect("UTF-8")
}

/// `kubectl port-forward` to the operator's Deployment (one of its pods),
/// stopped when dropped; its stdout kept open (closed, kubectl's next
/// line would end it).
struct PortForward(
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
);

impl PortForward {
    /// Forwards a free local port to `port` of the Deployment's pod;
    /// the local address.
    fn start(kubeconfig: &Path, ns: &str, port: &str) -> (PortForward, std::net::SocketAddr) {
        use std::io::BufRead;
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["-n", ns, "port-forward", &format!("deploy/{OPERATOR}")])
            .arg(format!(":{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("kubectl port-forward");
        let stdout = child.stdout.take().expect("its stdout");
        let mut forward = PortForward(child, std::io::BufReader::new(stdout));
        // "Forwarding from 127.0.0.1:PORT -> 8090"
        let mut line = String::new();
        forward
            .1
            .read_line(&mut line)
            .expect("kubectl port-forward's first line");
        let addr = line
            .strip_prefix("Forwarding from ")
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|addr| addr.parse().ok());
        let Some(addr) = addr else {
            forward.stop();
            panic!("kubectl port-forward said {line:?}");
        };
        (forward, addr)
    }

    fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for PortForward {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Issue 37, test 4: what a person sees of the operator deployed in the
/// cluster. With the Databases at rest, `kubectl fsm get` (the installed
/// plugin, run by the real `kubectl`) lists each in the state its record
/// holds, `kubectl fsm describe` shows one's state and path, and the web
/// view in the operator's pod (`manifests --view-port`, reached with
/// `kubectl port-forward` as docs/deploying.md says) serves the list and
/// the object's page.
#[tokio::test(flavor = "multi_thread")]
async fn kubectl_fsm_and_the_web_view_show_the_databases_in_the_cluster() {
    const OBJECTS: usize = 7;
    let Some(kubeconfig) = kubeconfig("in_cluster") else {
        return;
    };
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    let scratch = soak::Scratch::new("in-cluster-plugin");
    let bin = install_plugin(&scratch);
    let (_cloud, cloud_url) = soak::cloud(1, 0, CloudKeys::On, &format!("{NODE_IP}:0"));
    let deployed = Deployed::start_with(
        kubeconfig,
        "in-cluster-plugin",
        &cloud_url,
        &["--view-port", VIEW_PORT],
    )
    .await;
    let client = deployed.cluster.client();
    let ns = deployed.ns.clone();
    deployed.leader().await;
    let mut created = 0;
    create_up_to_in(&client, &ns, &mut created, OBJECTS).await;
    let records = settle_in(&client, &ns, OBJECTS, DEADLINE).await;
    let states: Vec<String> = records
        .iter()
        .map(|r| r.as_ref().map(|r| r.state.clone()).unwrap_or_default())
        .collect();
    let expected: Vec<&str> = (0..OBJECTS).map(soak::expected).collect();
    assert_eq!(states, expected, "the Databases did not settle");
    let kubeconfig = deployed.kubeconfig.clone();
    assert!(
        kubectl_with_plugin(&bin, &kubeconfig, &["plugin", "list"])
            .contains(&bin.join("kubectl-fsm").display().to_string()),
        "kubectl does not find the plugin"
    );

    // `kubectl fsm get`: one row per Database, the state its record holds.
    let json = kubectl_with_plugin(
        &bin,
        &kubeconfig,
        &["fsm", "get", "databases", "-n", &ns, "-o", "json"],
    );
    let rows: Vec<serde_json::Value> = serde_json::from_str(&json).expect("rows");
    let shown: Vec<(String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap_or_default().to_owned(),
                r["state"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let wanted: Vec<(String, String)> = (0..OBJECTS)
        .map(|i| (soak::name(i), soak::expected(i).to_owned()))
        .collect();
    assert_eq!(shown, wanted, "{json}");
    let table = kubectl_with_plugin(&bin, &kubeconfig, &["fsm", "get", "databases", "-n", &ns]);
    assert!(table.starts_with("NAME"), "{table}");
    for (name, state) in &wanted {
        assert!(
            table.lines().any(|l| l
                .split_whitespace()
                .take(2)
                .eq([name.as_str(), state.as_str()])),
            "no row `{name} {state}`:\n{table}"
        );
    }

    // `kubectl fsm describe`: the object, where its record is, its state
    // and the path it took.
    let first = soak::name(0);
    let described = kubectl_with_plugin(
        &bin,
        &kubeconfig,
        &["fsm", "describe", "database", &first, "-n", &ns],
    );
    assert!(
        described.starts_with(&format!("Database {ns}/{first} (record in Secret {ns}/")),
        "{described}"
    );
    assert!(
        described
            .lines()
            .any(|l| l.starts_with("State:") && l.split_whitespace().nth(1) == Some("Ready")),
        "{described}"
    );
    for (from, to) in soak::HAPPY {
        assert!(
            described.contains(&format!("{from} → {to}")),
            "no {from} → {to} in:\n{described}"
        );
    }

    // The web view, in an operator pod, through `kubectl port-forward`.
    let (mut forward, view) = PortForward::start(&kubeconfig, &ns, VIEW_PORT);
    let (status, body) = soak::http_get(view, "/api/objects", None).await;
    assert!(
        status.contains(" 200 "),
        "GET /api/objects: {status}\n{body}"
    );
    for i in 0..OBJECTS {
        assert!(
            body.contains(&soak::name(i)),
            "no {} in:\n{body}",
            soak::name(i)
        );
    }
    let page = format!("/objects/Database/{ns}/{first}");
    let (status, body) = soak::http_get(view, &page, None).await;
    assert!(status.contains(" 200 "), "GET {page}: {status}\n{body}");
    assert!(
        body.contains(&first) && body.contains("Ready"),
        "GET {page}:\n{body}"
    );
    assert!(
        !body.contains("forbidden") && !body.contains("cannot list"),
        "GET {page} shows a failure:\n{body}"
    );
    forward.stop();

    deployed.two_ready_without(&[]).await;
    deployed.delete_databases(&cloud_url).await;
    deployed.delete().await;
}

/// Issue 37, test 3, second half: the node's containerd killed (`-9`)
/// with workflows mid-way, then started again as it was
/// (`scripts/real-cluster/restart-containerd --kill`). The containers
/// outlive it (their shims do), the kubelet finds them again, and the
/// operator's workflows go on: at the end the crash soak's checks hold
/// (every Database at rest along its exact path, no transition twice, one
/// create each in the cloud's ledger), the same two pods run, none
/// restarted, and deleting the Databases deletes every instance.
#[tokio::test(flavor = "multi_thread")]
async fn containerd_killed_mid_workflow_loses_nothing_and_pays_once() {
    const OBJECTS: usize = 20;
    let Some(kubeconfig) = kubeconfig("in_cluster") else {
        return;
    };
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    // Instances take 3 s to be ready: the first half is still mid-way
    // when containerd dies, however fast the machine (at 200 ms all ten
    // were once at rest before the kill).
    let (_cloud, cloud_url) =
        soak::cloud_ready_after(2, 20, CloudKeys::On, &format!("{NODE_IP}:0"), "3s");
    let deployed = Deployed::start(kubeconfig, "in-cluster-containerd", &cloud_url).await;
    let client = deployed.cluster.client();
    let ns = deployed.ns.clone();
    deployed.leader().await;
    let before: Vec<String> = ready_pods(&deployed.pods)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();

    // Half the Databases; once workflows run, containerd dies. The other
    // half is created while it is down (the operator's pods keep running
    // without it), then it comes back.
    let mut created = 0;
    create_up_to_in(&client, &ns, &mut created, OBJECTS / 2).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let interrupted = in_flight_in(&client, &ns, created).await;
    let restart = std::thread::spawn(|| {
        run(
            "scripts/real-cluster/restart-containerd --kill --down 5",
            Command::new(repo_root().join("scripts/real-cluster/restart-containerd"))
                .args(["--kill", "--down", "5"]),
            None,
        )
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    create_up_to_in(&client, &ns, &mut created, OBJECTS).await;
    let during = in_flight_in(&client, &ns, created).await;
    tokio::task::spawn_blocking(move || restart.join())
        .await
        .expect("the restart's thread")
        .expect("restart-containerd");

    let records = settle_in(&client, &ns, OBJECTS, DEADLINE).await;
    let ledger = soak::ledger(&cloud_url).await;
    let per_database = check_outcome(
        &records,
        &ledger,
        &format!("containerd killed with {interrupted} workflows in flight, {during} while down"),
    );
    assert!(interrupted > 0, "the kill interrupted no workflow");
    // The containers outlived containerd: the same pods, none restarted
    // (two_ready_without checks restarts and panics).
    deployed.two_ready_without(&[]).await;
    let after: Vec<String> = ready_pods(&deployed.pods)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(after, before, "the operator's pods changed");
    deployed.delete_databases(&cloud_url).await;
    println!(
        "containerd killed: {OBJECTS} Databases, {interrupted} workflows in flight at the kill, \
         {during} while it was down; creates per database {per_database:?}; cloud: {} charges, \
         {} injected failures, {} replays",
        ledger.charges.len(),
        ledger.injected_failures,
        ledger.replays,
    );
    deployed.delete().await;
}
