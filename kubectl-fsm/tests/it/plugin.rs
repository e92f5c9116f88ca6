//! `kubectl fsm` run by the real `kubectl` (found on `PATH`, with the
//! built plugin first on it), against the embedded API server or the real
//! kube-apiserver named by `FSM_REAL_APISERVER_KUBECONFIG`, while real
//! controllers write the records: what the plugin shows is what the
//! stores wrote, read by their conventions, with sensitive data hidden.
//!
//! These tests need `kubectl` on `PATH` (Debian: `apt-get install
//! kubernetes-client`); without it they fail, they never skip.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use fsm_kube::cli::{Command as OperatorCommand, CrdArgs, Operator, RunContext, StoreKind};
use fsm_kube::prelude::*;
use fsm_kube::records::MACHINE_ANNOTATION;
use fsm_kube::records::rows::Row;
use fsm_kube::{ConfigMapStore, FsmReconciler, KubeStore, StatusStore};
use fsm_testkit::{HttpServer, TestCluster};
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{Controller, watcher};
use kube::{Client, CustomResource, ResourceExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

// ------------------------------------------------------------ the operators

/// A chore: its machine keeps its record in the status.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "plugin.operator-fsm.io",
    version = "v1",
    kind = "Chore",
    namespaced,
    status = "ChoreStatus"
)]
pub(crate) struct ChoreSpec {
    pub(crate) task: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct ChoreStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fsm: Option<FsmStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    conditions: Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ChoreError {
    #[error("the chore refused")]
    Refused,
}
impl Classify for ChoreError {}

/// `Pending` fails with the `fail` annotation (its next attempt an hour
/// later), `Running` carries a secret and waits while the chore has the
/// `hold` annotation.
#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Chore, error = ChoreError)]
pub(crate) enum ChoreState {
    #[fsm(initial, handler = start, next(Running), retry(max_attempts = 3, initial = "1h", max = "1h"))]
    Pending,
    #[fsm(sensitive, handler = work, next(Done))]
    Running { token: String },
    #[fsm(ready, final)]
    Done,
    #[fsm(failed)]
    Failed,
}

/// The secret that `Running` holds, which the plugin must never print.
const TOKEN: &str = "s3cr3t-t0ken";

fn annotated(resource: &impl ResourceExt, key: &str) -> bool {
    resource.annotations().contains_key(key)
}

async fn start(cx: &mut Step<'_, ChoreState>) -> Result<Transition<ChoreState>, ChoreError> {
    if annotated(cx.resource(), "fail") {
        return Err(ChoreError::Refused);
    }
    Ok(Transition::next(ChoreState::Running {
        token: TOKEN.to_owned(),
    }))
}

async fn work(
    cx: &mut Step<'_, ChoreState>,
    _token: &str,
) -> Result<Transition<ChoreState>, ChoreError> {
    if annotated(cx.resource(), "hold") {
        return Ok(Transition::wait(Duration::from_millis(50)));
    }
    Ok(Transition::next(ChoreState::Done))
}

/// An errand: its machine keeps its record in a ConfigMap.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "plugin.operator-fsm.io",
    version = "v1",
    kind = "Errand",
    namespaced,
    status = "ErrandStatus"
)]
struct ErrandSpec {
    shop: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
struct ErrandStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    conditions: Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Errand, error = ChoreError)]
enum ErrandState {
    #[fsm(initial, handler = go, next(Done))]
    Pending,
    #[fsm(ready, final)]
    Done { receipt: String },
    #[fsm(failed)]
    Failed,
}

async fn go(cx: &mut Step<'_, ErrandState>) -> Result<Transition<ErrandState>, ChoreError> {
    Ok(Transition::next(ErrandState::Done {
        receipt: format!("bought at {}", cx.resource().spec.shop),
    }))
}

// ---------------------------------------------------------------- set-up

/// A server (with an HTTP endpoint and a kubeconfig kubectl can use), a
/// client and the test's namespace, with both CRDs installed as the
/// operators' `crd` command prints them.
pub(crate) struct Env {
    pub(crate) client: Client,
    pub(crate) ns: String,
    pub(crate) kubeconfig: PathBuf,
    pub(crate) dir: PathBuf,
    _http: Option<HttpServer>,
    _cluster: TestCluster,
}

fn no_run<F: Fsm>(_: RunContext<F>) -> std::future::Ready<()> {
    std::future::ready(())
}

/// The CRD the operator of `F` prints with `crd --printer-columns` (when
/// `columns`).
async fn printed_crd<F>(store: StoreKind, columns: bool) -> CustomResourceDefinition
where
    F: Fsm,
    F::Resource: fsm_kube::KubeResource + kube::CustomResourceExt,
{
    let mut out = Vec::new();
    Operator::<F>::new("plugin-test", store)
        .execute(
            OperatorCommand::Crd(CrdArgs {
                printer_columns: columns,
                ..CrdArgs::default()
            }),
            no_run::<F>,
            &mut out,
        )
        .await
        .unwrap();
    serde_yaml_ng::from_slice(&out).unwrap()
}

/// Installs `crd`, with its annotations (which a re-install keeps up to
/// date on a shared real server).
async fn install(cluster: &TestCluster, crd: &CustomResourceDefinition) {
    cluster.install_crd(crd).await.unwrap();
    let api: Api<CustomResourceDefinition> = Api::all(cluster.client());
    let patch = serde_json::json!({"metadata": {"annotations": crd.metadata.annotations}});
    api.patch(
        &crd.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .unwrap();
}

pub(crate) async fn env() -> Env {
    env_on(TestCluster::from_env().await.unwrap()).await
}

/// The set-up of [`env`] on `cluster`.
pub(crate) async fn env_on(cluster: TestCluster) -> Env {
    let (http, kubeconfig) = match cluster.embedded_server() {
        Some(server) => {
            let http = server.serve_http().await.unwrap();
            let kubeconfig = http.kubeconfig().to_path_buf();
            (Some(http), kubeconfig)
        }
        None => (None, cluster.kubeconfig().unwrap().to_path_buf()),
    };
    install(
        &cluster,
        &printed_crd::<ChoreState>(StoreKind::Status, true).await,
    )
    .await;
    install(
        &cluster,
        &printed_crd::<ErrandState>(StoreKind::ConfigMap, false).await,
    )
    .await;
    let ns = cluster.create_namespace("kubectl-fsm").await.unwrap();
    let dir = std::env::temp_dir().join(format!("kubectl-fsm-{ns}"));
    std::fs::create_dir_all(&dir).unwrap();
    Env {
        client: cluster.client(),
        ns,
        kubeconfig,
        dir,
        _http: http,
        _cluster: cluster,
    }
}

impl Env {
    /// The server the test runs against.
    pub(crate) fn cluster(&self) -> &TestCluster {
        &self._cluster
    }
}

/// Runs the controller of `F` in the test's namespace until dropped.
pub(crate) struct Running(tokio::task::JoinHandle<()>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub(crate) fn run_controller<F>(env: &Env, store: impl KubeStore<F::Resource>) -> Running
where
    F: Fsm<Context = ()>,
    F::Resource: fsm_kube::KubeResource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    let fsm = FsmReconciler::<F>::builder(env.client.clone(), store)
        .options(
            ReconcilerOptions::default()
                .poll_interval(Duration::from_secs(3600))
                .error_requeue(Duration::from_millis(100)),
        )
        .build();
    let api: Api<F::Resource> = Api::namespaced(env.client.clone(), &env.ns);
    let controller = Controller::new(api, watcher::Config::default())
        .run(fsm.reconcile(), fsm.error_policy(), Arc::new(()))
        .for_each(|_| async {});
    Running(tokio::spawn(controller))
}

pub(crate) async fn create_chore(env: &Env, name: &str, annotations: &[&str]) {
    let api: Api<Chore> = Api::namespaced(env.client.clone(), &env.ns);
    let mut chore = Chore::new(
        name,
        ChoreSpec {
            task: "dishes".into(),
        },
    );
    chore.metadata.annotations = Some(
        annotations
            .iter()
            .map(|a| ((*a).to_owned(), "yes".to_owned()))
            .collect(),
    );
    api.create(&PostParams::default(), &chore).await.unwrap();
}

/// The record of chore `name` as the API holds it.
async fn stored_record(env: &Env, name: &str) -> Option<Value> {
    let api: Api<Chore> = Api::namespaced(env.client.clone(), &env.ns);
    let chore = api.get(name).await.ok()?;
    serde_json::to_value(chore.status?.fsm?).ok()
}

/// Waits (bounded) until `probe` answers `Some`; generous, for a real
/// kube-apiserver on a busy machine.
pub(crate) async fn eventually<T, Fut>(what: &str, mut probe: impl FnMut() -> Fut) -> T
where
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) async fn wait_for_state(env: &Env, name: &str, state: &str, attempt: u64) -> Value {
    eventually(&format!("{name} in {state}, attempt {attempt}"), || async {
        stored_record(env, name)
            .await
            .filter(|r| r["state"] == state && r["attempt"].as_u64().unwrap_or(0) == attempt)
    })
    .await
}

// ---------------------------------------------------------------- kubectl

pub(crate) fn kubectl_binary() -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("kubectl"))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "kubectl was not found on PATH. The plugin's tests run it: install it with \
             `apt-get install -y kubernetes-client` (.ci/run does). These tests fail rather than skip."
        )
    })
}

/// `kubectl ARGS` with the built plugin first on `PATH` and the test's
/// kubeconfig.
pub(crate) fn kubectl(env: &Env, args: &[&str]) -> tokio::process::Command {
    let plugin = Path::new(env!("CARGO_BIN_EXE_kubectl-fsm"));
    let mut paths = vec![plugin.parent().unwrap().to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let mut command = tokio::process::Command::new(kubectl_binary());
    command
        .args(args)
        .env("PATH", std::env::join_paths(paths).unwrap())
        .env("KUBECONFIG", &env.kubeconfig)
        .env("KUBECACHEDIR", env.dir.join("cache"))
        .kill_on_drop(true);
    command
}

/// Runs `kubectl ARGS`; its stdout, after checking that it succeeded.
pub(crate) async fn ok(env: &Env, args: &[&str]) -> String {
    let output = kubectl(env, args).output().await.unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        output.status.success(),
        "kubectl {args:?} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    stdout
}

/// Splits a table into rows of whitespace-separated cells.
fn table(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

/// A chore in `Done`, one failing in `Pending` (attempt 1, the next in an
/// hour) and one held in the sensitive `Running`.
async fn three_chores(env: &Env) {
    create_chore(env, "c-done", &[]).await;
    create_chore(env, "c-fail", &["fail"]).await;
    create_chore(env, "c-held", &["hold"]).await;
    wait_for_state(env, "c-done", "Done", 0).await;
    wait_for_state(env, "c-fail", "Pending", 1).await;
    wait_for_state(env, "c-held", "Running", 0).await;
}

// ---------------------------------------------------------------- tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_shows_what_the_status_store_wrote() {
    let env = env().await;
    let _controller = run_controller::<ChoreState>(&env, StatusStore::new());
    three_chores(&env).await;

    let json = ok(&env, &["fsm", "get", "chores", "-n", &env.ns, "-o", "json"]).await;
    let rows: Vec<Row> = serde_json::from_str(&json).unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["c-done", "c-fail", "c-held"]);
    for row in &rows {
        let stored = stored_record(&env, &row.name).await.unwrap();
        assert_eq!(row.state.as_deref(), stored["state"].as_str(), "{row:?}");
        assert_eq!(u64::from(row.attempt), stored["attempt"].as_u64().unwrap());
        assert_eq!(row.last_error.as_deref(), stored["lastError"].as_str());
        assert_eq!(
            row.entered_at.map(|t| t.to_string()).as_deref(),
            stored["enteredAt"].as_str()
        );
        assert_eq!(row.namespace.as_deref(), Some(env.ns.as_str()));
    }
    assert_eq!(rows[1].last_error.as_deref(), Some("the chore refused"));
    assert!(rows[1].next_attempt_at.is_some());

    let text = ok(&env, &["fsm", "get", "chore", "-n", &env.ns]).await;
    let cells = table(&text);
    assert_eq!(
        cells[0],
        [
            "NAME",
            "STATE",
            "ATTEMPT",
            "IN-STATE",
            "NEXT-RETRY",
            "LAST-ERROR"
        ]
    );
    assert_eq!(cells[1][..3], ["c-done", "Done", "0"]);
    assert_eq!(cells[1][4..], ["-", "-"]);
    assert_eq!(cells[2][..3], ["c-fail", "Pending", "1"]);
    assert_eq!(cells[2][4], "in", "{text}");
    assert!(text.contains("the chore refused"), "{text}");
    assert_eq!(cells[3][..3], ["c-held", "Running", "0"]);
    assert!(!text.contains(TOKEN), "{text}");

    // The printer columns `crd --printer-columns` added, in kubectl's own get.
    let text = ok(&env, &["get", "chores", "-n", &env.ns]).await;
    let cells = table(&text);
    assert_eq!(cells[0], ["NAME", "STATE", "ATTEMPT", "IN-STATE", "AGE"]);
    assert_eq!(cells[1][..3], ["c-done", "Done", "0"]);
    assert_eq!(cells[2][..3], ["c-fail", "Pending", "1"]);
    assert_eq!(cells[3][..3], ["c-held", "Running", "0"]);

    // All namespaces: a namespace column.
    let text = ok(&env, &["fsm", "get", "chores.plugin.operator-fsm.io", "-A"]).await;
    assert!(text.starts_with("NAMESPACE"), "{text}");
    assert!(
        table(&text)
            .iter()
            .any(|row| row[..3] == [env.ns.as_str(), "c-held", "Running"]),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_shows_history_error_conditions_and_events_without_secrets() {
    let env = env().await;
    let _controller = run_controller::<ChoreState>(&env, StatusStore::new());
    three_chores(&env).await;

    // Events are written after the commits they report: wait for them.
    let held = eventually("the events of c-held", || async {
        let text = ok(
            &env,
            &["fsm", "describe", "chores", "c-held", "-n", &env.ns],
        )
        .await;
        text.contains("Transitioned").then_some(text)
    })
    .await;
    assert!(
        held.starts_with(&format!(
            "Chore {}/c-held (record in .status.fsm)\nState:        Running <redacted: sensitive state>\n",
            env.ns
        )),
        "{held}"
    );
    assert!(!held.contains(TOKEN), "{held}");
    assert!(held.contains("History:\n"), "{held}");
    assert!(held.contains("→ Pending"), "{held}");
    assert!(held.contains("Pending → Running"), "{held}");
    assert!(held.contains("Conditions:\n"), "{held}");
    assert!(held.contains("  Ready        False"), "{held}");
    assert!(held.contains("  Progressing  True"), "{held}");
    assert!(held.contains("Events:\n"), "{held}");

    let failing = ok(
        &env,
        &["fsm", "describe", "chores", "c-fail", "-n", &env.ns],
    )
    .await;
    assert!(failing.contains("State:        Pending\n"), "{failing}");
    assert!(failing.contains("Attempt:      1, next at "), "{failing}");
    assert!(
        failing.contains("Last error:   the chore refused\n"),
        "{failing}"
    );
    assert!(
        failing.contains("  Degraded     True    Retrying"),
        "{failing}"
    );
    assert!(!failing.contains("Timeline:"), "{failing}");
    let timeline = ok(
        &env,
        &[
            "fsm",
            "describe",
            "chores",
            "c-fail",
            "-n",
            &env.ns,
            "--timeline",
        ],
    )
    .await;
    assert!(timeline.contains("\nTimeline: "), "{timeline}");
    assert!(timeline.contains("▏ #1 Pending "), "{timeline}");
    assert!(timeline.contains(" (now)\n"), "{timeline}");
    assert!(
        timeline.contains("▏ 1 failed attempt so far in Pending, the last: the chore refused\n"),
        "{timeline}"
    );
    assert!(timeline.contains("↻"), "{timeline}");

    let output = kubectl(&env, &["fsm", "describe", "chores", "nope", "-n", &env.ns])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains(&format!(
            "Chore {}/nope (record in .status.fsm): not found",
            env.ns
        )),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_in_config_maps_are_read_by_the_stores_conventions() {
    let env = env().await;
    let _controller = run_controller::<ErrandState>(
        &env,
        ConfigMapStore::namespaced(env.client.clone(), env.ns.clone()),
    );
    let api: Api<Errand> = Api::namespaced(env.client.clone(), &env.ns);
    api.create(
        &PostParams::default(),
        &Errand::new(
            "e1",
            ErrandSpec {
                shop: "the corner".into(),
            },
        ),
    )
    .await
    .unwrap();
    let rows: Vec<Row> = eventually("errand e1 in Done", || async {
        let json = ok(
            &env,
            &["fsm", "get", "errands", "-n", &env.ns, "-o", "json"],
        )
        .await;
        let rows: Vec<Row> = serde_json::from_str(&json).unwrap();
        rows.iter()
            .any(|r| r.state.as_deref() == Some("Done"))
            .then_some(rows)
    })
    .await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].name, "e1");

    let text = ok(&env, &["fsm", "describe", "errand", "e1", "-n", &env.ns]).await;
    let record_object = fsm_kube::store::record_object_name_for::<ErrandState>("e1");
    assert!(
        text.starts_with(&format!(
            "Errand {ns}/e1 (record in ConfigMap {ns}/{record_object})\n\
             State:        Done {{\"receipt\":\"bought at the corner\"}}\n",
            ns = env.ns
        )),
        "{text}"
    );
    assert!(text.contains("Pending → Done"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_diagram_is_the_published_machine_with_live_counts() {
    let env = env().await;
    let _controller = run_controller::<ChoreState>(&env, StatusStore::new());
    three_chores(&env).await;

    let text = ok(&env, &["fsm", "diagram", "chores"]).await;
    assert_eq!(text, ChoreState::machine().graph().text());
    assert!(text.contains("  Running  (sensitive)\n"), "{text}");

    let svg = ok(
        &env,
        &["fsm", "diagram", "chores", "-o", "svg", "-n", &env.ns],
    )
    .await;
    assert!(svg.starts_with("<svg"), "{svg}");
    let count_of = |state: &str| {
        let at = svg
            .find(&format!(r#"class="count" data-state="{state}""#))
            .unwrap_or_else(|| panic!("no count for {state}: {svg}"));
        let rest = &svg[at..];
        rest[rest.find('>').unwrap() + 1..rest.find('<').unwrap()].to_owned()
    };
    assert_eq!(count_of("Pending"), "1");
    assert_eq!(count_of("Running"), "1");
    assert_eq!(count_of("Done"), "1");
    assert_eq!(count_of("Failed"), "0");
    assert!(
        svg.contains(r#"class="state failed" data-state="Failed""#),
        "{svg}"
    );

    // The machine is published on the CRD; a resource without a CRD is
    // refused by name.
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    assert!(
        crds.get("chores.plugin.operator-fsm.io")
            .await
            .unwrap()
            .annotations()
            .contains_key(MACHINE_ANNOTATION)
    );
    let output = kubectl(&env, &["fsm", "get", "no-such-things"])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("no custom resource named \"no-such-things\""),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_follows_a_chore_through_two_transitions() {
    let env = env().await;
    let _controller = run_controller::<ChoreState>(&env, StatusStore::new());
    let mut child = kubectl(&env, &["fsm", "watch", "chores", "-n", &env.ns])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let header = lines.next_line().await.unwrap().unwrap();
    assert_eq!(
        header,
        "TIME NAME STATE ATTEMPT IN-STATE NEXT-RETRY LAST-ERROR"
    );
    // The watch is open once it has printed its header; the chore is
    // created after, and held in Running until released.
    create_chore(&env, "c-w", &["hold"]).await;
    let mut seen = Vec::new();
    let mut next_state = async || loop {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("a line within a minute")
            .unwrap()
            .expect("the watch goes on");
        let cells: Vec<String> = line.split_whitespace().map(String::from).collect();
        if cells.get(1).map(String::as_str) == Some("c-w") {
            return cells[2].clone();
        }
    };
    loop {
        let state = next_state().await;
        seen.push(state.clone());
        if state == "Running" {
            break;
        }
    }
    let api: Api<Chore> = Api::namespaced(env.client.clone(), &env.ns);
    let release = serde_json::json!({"metadata": {"annotations": {"hold": null}}});
    api.patch("c-w", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    loop {
        let state = next_state().await;
        seen.push(state.clone());
        if state == "Done" {
            break;
        }
    }
    // Each state once, in order: the chore may show first without a record
    // (created, not reconciled yet), and Pending may pass before a read.
    seen.dedup();
    if seen.first().map(String::as_str) == Some("<none>") {
        seen.remove(0);
    }
    assert!(
        seen == ["Pending", "Running", "Done"] || seen == ["Running", "Done"],
        "{seen:?}"
    );
    child.kill().await.unwrap();
}

// ---------------------------------------------------------------- web view
// The operator's web view reads records with the same code as the plugin
// (fsm_kube::view); it is checked here, with the same operators.

/// `METHOD path` on `addr` over HTTP/1.0 (the server closes after the
/// answer); the status line and the body.
async fn http(addr: std::net::SocketAddr, method: &str, path: &str) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("{method} {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (
        head.lines().next().unwrap_or_default().to_owned(),
        body.to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_view_streams_rows_and_never_sensitive_data() {
    use fsm_kube::records::Watched;
    use fsm_kube::view::web::{KindRow, WebView};

    let env = env().await;
    let _controller = run_controller::<ChoreState>(&env, StatusStore::new());
    three_chores(&env).await;
    let view = WebView::new(
        env.client.clone(),
        vec![Watched::of::<ChoreState>(StoreKind::Status)],
        Some(env.ns.clone()),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = Running(tokio::spawn({
        let view = view.clone();
        async move {
            view.serve(listener).await.unwrap();
        }
    }));

    // The rows, as the watches delivered them, are the records' own.
    let rows: Vec<KindRow> = eventually("the view's three rows", || async {
        let (status, body) = http(addr, "GET", "/api/objects").await;
        assert_eq!(status, "HTTP/1.0 200 OK");
        let rows: Vec<KindRow> = serde_json::from_str(&body).unwrap();
        (rows.len() == 3).then_some(rows)
    })
    .await;
    for row in &rows {
        let stored = stored_record(&env, &row.row.name).await.unwrap();
        assert_eq!(row.kind, "Chore");
        assert_eq!(row.row.state.as_deref(), stored["state"].as_str());
        assert_eq!(
            u64::from(row.row.attempt),
            stored["attempt"].as_u64().unwrap()
        );
    }

    // Live: a snapshot, then an update when c-held moves on.
    let mut events = tokio::net::TcpStream::connect(addr).await.unwrap();
    {
        use tokio::io::AsyncWriteExt;
        events
            .write_all(
                b"GET /events HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n",
            )
            .await
            .unwrap();
    }
    let mut lines = BufReader::new(events).lines();
    let mut next_event = async || {
        let mut name = String::new();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
                .await
                .expect("an event within a minute")
                .unwrap()
                .expect("the stream goes on");
            assert!(!line.contains(TOKEN), "{line}");
            if let Some(event) = line.strip_prefix("event: ") {
                name = event.to_owned();
            } else if let Some(data) = line.strip_prefix("data: ") {
                return (name.clone(), serde_json::from_str::<Value>(data).unwrap());
            }
        }
    };
    let (name, snapshot) = next_event().await;
    assert_eq!(name, "snapshot");
    assert_eq!(snapshot.as_array().unwrap().len(), 3);
    eventually("a viewer", || async { (view.viewers() > 0).then_some(()) }).await;
    let api: Api<Chore> = Api::namespaced(env.client.clone(), &env.ns);
    let release = serde_json::json!({"metadata": {"annotations": {"hold": null}}});
    api.patch("c-held", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    loop {
        let (name, update) = next_event().await;
        assert_eq!(name, "update");
        if update["name"] == "c-held" && update["row"]["state"] == "Done" {
            break;
        }
    }

    // The pages: the index carries the diagram, an object's page its
    // history; no secret anywhere; nothing but GET.
    let (status, index) = http(addr, "GET", "/").await;
    assert_eq!(status, "HTTP/1.0 200 OK");
    assert!(index.contains(r#"<section class="machine" data-kind="Chore""#));
    assert!(index.contains(r#"<text class="count" data-state="Running""#));
    let (status, page) = http(addr, "GET", &format!("/objects/Chore/{}/c-held", env.ns)).await;
    assert_eq!(status, "HTTP/1.0 200 OK");
    assert!(page.contains(r#"<li data-to="Running">"#), "{page}");
    assert!(page.contains(r#"<li data-to="Done">"#), "{page}");
    assert!(page.contains("<td>Ready</td><td>True</td>"), "{page}");
    assert!(page.contains("Transitioned"), "{page}");
    for text in [&index, &page] {
        assert!(!text.contains(TOKEN));
    }
    let (status, _) = http(addr, "GET", &format!("/objects/Chore/{}/nope", env.ns)).await;
    assert_eq!(status, "HTTP/1.0 404 Not Found");
    let (status, _) = http(addr, "POST", "/api/objects").await;
    assert_eq!(status, "HTTP/1.0 405 Method Not Allowed");
    drop(server);
}
