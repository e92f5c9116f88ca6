//! What an object shows about its health, against the embedded API server
//! or the real kube-apiserver named by `FSM_REAL_APISERVER_KUBECONFIG`:
//! the kstatus contract (`Reconciling`, `Stalled`, top-level
//! `status.observedGeneration`) read by kstatus' rules and by
//! `kubectl wait`, `DependentsReady` refreshed by a staying state, the
//! `Degraded`, `Paused` and `LastCommand` conditions, and no write for a
//! converged resting object per re-sync (its `resourceVersion` on both
//! servers, the request log on the embedded one).

use crate::common::{eventually, init_tracing};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fsm_kube::dependents::{
    Dependent, DependentKind, DependentsError, DependentsRuntime, DesiredSet, SetError,
    owns_dependents,
};
use fsm_kube::prelude::*;
use fsm_kube::records::COMMANDS_ANNOTATION;
use fsm_kube::{ConfigMapStore, FsmReconciler, FsmStatus, KubeStore, StatusStore};
use fsm_testkit::TestCluster;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::{Controller, watcher};
use kube::{Client, CustomResource, CustomResourceExt, ResourceExt};
use serde_json::json;

/// A long-lived object: it starts (held while annotated `hold`, failing
/// when the spec says so), then serves, keeping a ConfigMap converged.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "health.operator-fsm.io",
    version = "v1",
    kind = "Gizmo",
    namespaced,
    status = "GizmoStatus"
)]
pub struct GizmoSpec {
    pub color: String,
    #[serde(default)]
    pub fail: bool,
}

/// The status a CRD declares for the kstatus contract.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GizmoStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsm: Option<FsmStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

#[derive(Debug, Default)]
pub struct GizmoCtx {
    /// How many times `Serving`'s handler ran (each re-sync runs it).
    serving_runs: AtomicUsize,
}

#[derive(Debug, thiserror::Error)]
pub enum GizmoError {
    #[error(transparent)]
    Dependents(#[from] DependentsError),
    #[error(transparent)]
    Set(#[from] SetError),
}

impl Classify for GizmoError {
    fn class(&self) -> fsm_core::ErrorClass {
        match self {
            GizmoError::Dependents(e) => e.class(),
            GizmoError::Set(_) => fsm_core::ErrorClass::Permanent,
        }
    }
}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Gizmo, context = GizmoCtx, error = GizmoError)]
pub enum Life {
    #[fsm(initial, handler = starting, next(Serving))]
    Starting,
    #[fsm(ready, handler = serving)]
    Serving,
    #[fsm(failed)]
    Failed,
}

fn annotation<'a>(gizmo: &'a Gizmo, key: &str) -> Option<&'a str> {
    gizmo.annotations().get(key).map(String::as_str)
}

async fn starting(cx: &mut Step<'_, Life>) -> Result<Transition<Life>, GizmoError> {
    let gizmo = cx.resource();
    if gizmo.spec.fail {
        return Ok(Transition::fail("the spec asks to fail"));
    }
    if annotation(gizmo, "hold").is_some() {
        return Ok(Transition::wait(Duration::from_millis(200)));
    }
    Ok(Transition::next(Life::Serving))
}

/// The ConfigMap `Serving` keeps converged: ready unless a person marked
/// it `broken` (a key the runtime does not manage, so it stays).
fn desired(gizmo: &Gizmo) -> Result<DesiredSet, SetError> {
    let config = ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{}-dep", gizmo.name_any())),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "color".to_owned(),
            gizmo.spec.color.clone(),
        )])),
        ..ConfigMap::default()
    };
    DesiredSet::builder()
        .dependent(
            Dependent::new("config", &config).ready_as(|live: &ConfigMap| {
                !live.data.as_ref().is_some_and(|d| d.contains_key("broken"))
            }),
        )
        .build()
}

async fn serving(cx: &mut Step<'_, Life>) -> Result<Transition<Life>, GizmoError> {
    cx.context().serving_runs.fetch_add(1, Ordering::SeqCst);
    if let Some(reason) = annotation(cx.resource(), "degrade") {
        return Ok(Transition::degraded(reason.to_owned()));
    }
    let set = desired(cx.resource())?;
    cx.converge(&set).await?;
    Ok(Transition::stay())
}

/// A test's server, namespace and Gizmo controller.
struct Env {
    cluster: TestCluster,
    client: Client,
    ns: String,
    ctx: Arc<GizmoCtx>,
    controller: tokio::task::JoinHandle<()>,
    /// The embedded server served over HTTP, for kubectl.
    _http: Option<fsm_testkit::HttpServer>,
    kubeconfig: PathBuf,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.controller.abort();
    }
}

async fn env<S: KubeStore<Gizmo>>(store: impl FnOnce(&Client) -> S, poll: Duration) -> Env {
    init_tracing();
    let cluster = TestCluster::from_env().await.unwrap();
    cluster.install_crd(&Gizmo::crd()).await.unwrap();
    let ns = cluster.create_namespace("health").await.unwrap();
    let client = cluster.client();
    let (http, kubeconfig) = match cluster.embedded_server() {
        Some(server) => {
            let http = server.serve_http().await.unwrap();
            let path = http.kubeconfig().to_owned();
            (Some(http), path)
        }
        None => (None, cluster.kubeconfig().unwrap().to_owned()),
    };
    let ctx = Arc::new(GizmoCtx::default());
    let fsm = FsmReconciler::<Life>::builder(client.clone(), store(&client))
        .options(
            ReconcilerOptions::default()
                .poll_interval(poll)
                .error_requeue(Duration::from_millis(100)),
        )
        .dependents(
            DependentsRuntime::new(client.clone()).pending_requeue(Duration::from_millis(200)),
        )
        .build();
    let gizmos: Api<Gizmo> = Api::namespaced(client.clone(), &ns);
    let controller = owns_dependents(
        Controller::new(gizmos, watcher::Config::default()),
        &client,
        Some(&ns),
        [DependentKind::of::<ConfigMap>()],
    )
    .run(fsm.reconcile(), fsm.error_policy(), ctx.clone())
    .for_each(|_| async {});
    Env {
        controller: tokio::spawn(controller),
        cluster,
        client,
        ns,
        ctx,
        _http: http,
        kubeconfig,
    }
}

impl Env {
    fn gizmos(&self) -> Api<Gizmo> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    async fn create(&self, name: &str, spec: GizmoSpec, annotations: &[(&str, &str)]) {
        let gizmo = Gizmo {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        };
        self.gizmos()
            .create(&PostParams::default(), &gizmo)
            .await
            .unwrap();
    }

    async fn get(&self, name: &str) -> Gizmo {
        self.gizmos().get(name).await.unwrap()
    }

    /// Waits until `probe` holds for gizmo `name`; returns it then.
    async fn until(&self, name: &str, what: &str, probe: impl Fn(&Gizmo) -> bool) -> Gizmo {
        let gizmos = self.gizmos();
        let probe = &probe;
        eventually(&format!("{name}: {what}"), || {
            let gizmos = gizmos.clone();
            async move {
                let g = gizmos.get(name).await.ok()?;
                probe(&g).then_some(g)
            }
        })
        .await
    }

    async fn annotate(&self, name: &str, key: &str, value: Option<&str>) {
        let patch = json!({"metadata": {"annotations": {key: value}}});
        self.gizmos()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    /// `kubectl -n NS wait gizmos.health.operator-fsm.io/NAME --for=FOR
    /// --timeout=TIMEOUT`: whether it succeeded, and what it printed.
    async fn kubectl_wait(&self, name: &str, condition: &str, timeout: &str) -> (bool, String) {
        let mut command = std::process::Command::new("kubectl");
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["-n", &self.ns, "wait"])
            .arg(format!("gizmos.health.operator-fsm.io/{name}"))
            .arg(format!("--for={condition}"))
            .arg(format!("--timeout={timeout}"))
            .stdin(Stdio::null());
        tokio::task::spawn_blocking(move || {
            let output = command.output().expect("kubectl is installed");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            (output.status.success(), text)
        })
        .await
        .unwrap()
    }

    /// The write requests the embedded server logged since `since` (none
    /// on a real server).
    fn writes_since(&self, since: usize) -> Vec<String> {
        let Some(server) = self.cluster.embedded_server() else {
            return Vec::new();
        };
        let (_, records) = server.request_log().records_since(since);
        records
            .into_iter()
            .filter(|r| {
                matches!(
                    r.verb.as_str(),
                    "create" | "update" | "patch" | "delete" | "deletecollection"
                )
            })
            .map(|r| {
                let code = if r.code >= 300 {
                    format!(" ({})", r.code)
                } else {
                    String::new()
                };
                format!(
                    "{} {}{} {}{code}",
                    r.verb,
                    r.resource,
                    r.subresource.map(|s| format!("/{s}")).unwrap_or_default(),
                    r.name.unwrap_or_default()
                )
            })
            .collect()
    }

    fn log_position(&self) -> usize {
        self.cluster
            .embedded_server()
            .map_or(0, |s| s.request_log().records_since(0).0)
    }
}

fn condition<'a>(gizmo: &'a Gizmo, type_: &str) -> Option<&'a Condition> {
    gizmo
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// `(status, reason)` of condition `type_`, `("", "")` when absent.
fn cond(gizmo: &Gizmo, type_: &str) -> (String, String) {
    condition(gizmo, type_).map_or_else(Default::default, |c| (c.status.clone(), c.reason.clone()))
}

fn is(gizmo: &Gizmo, type_: &str, status: &str) -> bool {
    condition(gizmo, type_).is_some_and(|c| c.status == status)
}

fn state(gizmo: &Gizmo) -> Option<String> {
    gizmo.status.as_ref()?.fsm.as_ref()?.state_name()
}

/// kstatus' generic rules for a custom resource (cli-utils
/// `pkg/kstatus/status`, `checkGenericProperties`): deletion first, then
/// a `status.observedGeneration` that differs from `metadata.generation`,
/// then the first `Reconciling=True` or `Stalled=True` condition, else
/// `Current`.
fn kstatus(gizmo: &Gizmo) -> &'static str {
    if gizmo.metadata.deletion_timestamp.is_some() {
        return "Terminating";
    }
    let status = gizmo.status.as_ref();
    if let (Some(generation), Some(observed)) = (
        gizmo.metadata.generation,
        status.and_then(|s| s.observed_generation),
    ) && generation != observed
    {
        return "InProgress";
    }
    for c in status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
    {
        if c.type_ == "Reconciling" && c.status == "True" {
            return "InProgress";
        }
        if c.type_ == "Stalled" && c.status == "True" {
            return "Failed";
        }
    }
    "Current"
}

const SOON: &str = "2s";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_wait_and_kstatus_read_a_workflow_in_progress_then_current() {
    let env = env(|_| StatusStore::new(), Duration::from_secs(3600)).await;
    env.create(
        "held",
        GizmoSpec {
            color: "red".into(),
            fail: false,
        },
        &[("hold", "yes")],
    )
    .await;

    let held = env
        .until("held", "Reconciling", |g| is(g, "Reconciling", "True"))
        .await;
    assert_eq!(state(&held).as_deref(), Some("Starting"));
    assert_eq!(
        cond(&held, "Reconciling"),
        ("True".into(), "Starting".into())
    );
    assert_eq!(
        cond(&held, "Stalled"),
        ("False".into(), "AsExpected".into())
    );
    assert_eq!(held.status.as_ref().unwrap().observed_generation, Some(1));
    assert_eq!(kstatus(&held), "InProgress");
    let (ok, out) = env
        .kubectl_wait("held", "condition=Reconciling", "30s")
        .await;
    assert!(ok, "{out}");
    let (ok, out) = env
        .kubectl_wait("held", "condition=Reconciling=false", SOON)
        .await;
    assert!(
        !ok,
        "kubectl wait must time out while the workflow runs: {out}"
    );

    env.annotate("held", "hold", None).await;
    let (ok, out) = env
        .kubectl_wait("held", "condition=Reconciling=false", "60s")
        .await;
    assert!(ok, "{out}");
    let (ok, out) = env
        .kubectl_wait("held", "condition=Stalled=false", "30s")
        .await;
    assert!(ok, "{out}");
    let (ok, out) = env.kubectl_wait("held", "condition=Ready", "30s").await;
    assert!(ok, "{out}");
    let (ok, out) = env
        .kubectl_wait("held", "jsonpath={.status.observedGeneration}=1", "30s")
        .await;
    assert!(ok, "{out}");
    let serving = env.get("held").await;
    assert_eq!(state(&serving).as_deref(), Some("Serving"));
    assert_eq!(kstatus(&serving), "Current");
    assert_eq!(
        cond(&serving, "Paused"),
        ("False".into(), "NotPaused".into())
    );

    // A spec change: the machine takes it (default policy: restart) and
    // says so in observedGeneration.
    let patch = json!({"spec": {"color": "blue"}});
    env.gizmos()
        .patch("held", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let changed = env
        .until("held", "observedGeneration 2 and at rest", |g| {
            g.status.as_ref().and_then(|s| s.observed_generation) == Some(2)
                && is(g, "Reconciling", "False")
        })
        .await;
    assert_eq!(kstatus(&changed), "Current");
    assert!(condition(&changed, "Reconciling").is_some_and(|c| c.observed_generation == Some(2)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_object_is_stalled_for_kubectl_wait_and_kstatus() {
    let env = env(|_| StatusStore::new(), Duration::from_secs(3600)).await;
    env.create(
        "doomed",
        GizmoSpec {
            color: "red".into(),
            fail: true,
        },
        &[],
    )
    .await;
    let (ok, out) = env.kubectl_wait("doomed", "condition=Stalled", "60s").await;
    assert!(ok, "{out}");
    let failed = env.get("doomed").await;
    assert_eq!(state(&failed).as_deref(), Some("Failed"));
    assert_eq!(cond(&failed, "Stalled"), ("True".into(), "Failed".into()));
    assert_eq!(
        condition(&failed, "Stalled").unwrap().message,
        "the spec asks to fail"
    );
    assert_eq!(
        cond(&failed, "Reconciling"),
        ("False".into(), "Failed".into())
    );
    assert_eq!(cond(&failed, "Ready").0, "False");
    assert_eq!(kstatus(&failed), "Failed");
    let (ok, out) = env
        .kubectl_wait("doomed", "condition=Reconciling=false", "30s")
        .await;
    assert!(ok, "{out}");
}

/// The done-when of issue 28: a resting object whose dependent breaks
/// shows `DependentsReady=False` within one poll (and `True` again when it
/// is repaired), and a converged resting object costs no write per
/// re-sync.
async fn a_resting_object_keeps_its_health_true(env: Env) {
    env.create(
        "web",
        GizmoSpec {
            color: "green".into(),
            fail: false,
        },
        &[],
    )
    .await;
    let resting = env
        .until("web", "ready with its dependents ready", |g| {
            is(g, "Ready", "True") && is(g, "DependentsReady", "True")
        })
        .await;
    assert_eq!(kstatus(&resting), "Current");
    assert_eq!(
        resting.status.as_ref().unwrap().observed_generation,
        Some(1)
    );

    // Re-syncs of a converged resting object: the handler runs, nothing
    // is written (the object keeps its resourceVersion on both servers).
    // Measured once the controller's watch has delivered the last write
    // (a reconcile of an older copy may still try a write, which the
    // precondition turns into a 409).
    settle(&env, 2).await;
    let resting = env.get("web").await;
    let version = resting.resource_version();
    let at = env.log_position();
    let runs = env.ctx.serving_runs.load(Ordering::SeqCst);
    eventually("four re-syncs", || async {
        (env.ctx.serving_runs.load(Ordering::SeqCst) >= runs + 4).then_some(())
    })
    .await;
    assert_eq!(env.writes_since(at), Vec::<String>::new());
    assert_eq!(env.get("web").await.resource_version(), version);

    // A person breaks the dependent: the change wakes the owner, its
    // staying state reports it, and a status-only write shows it.
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let breaking = tokio::time::Instant::now();
    let runs_before = env.ctx.serving_runs.load(Ordering::SeqCst);
    let at = env.log_position();
    configmaps
        .patch(
            "web-dep",
            &PatchParams {
                field_manager: Some("a-person".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(&json!({"data": {"broken": "yes"}})),
        )
        .await
        .unwrap();
    let broken = env
        .until("web", "DependentsReady=False", |g| {
            is(g, "DependentsReady", "False")
        })
        .await;
    let took = breaking.elapsed();
    let runs = env.ctx.serving_runs.load(Ordering::SeqCst) - runs_before;
    assert_eq!(cond(&broken, "DependentsReady").1, "Pending");
    assert_eq!(cond(&broken, "Ready"), ("True".into(), "Serving".into()));
    assert_eq!(
        broken.status.as_ref().unwrap().fsm,
        resting.status.as_ref().unwrap().fsm,
        "the record is unchanged: a status-only write"
    );
    settle(&env, 2).await;
    let writes: Vec<String> = env
        .writes_since(at)
        .into_iter()
        .filter(|w| w.contains("gizmos") && !w.ends_with("(409)"))
        .collect();
    if env.cluster.embedded_server().is_some() {
        assert_eq!(writes, ["patch gizmos/status web"], "one status write");
    }
    // Within one poll: shown by the handler's first or second run after
    // the break (the ConfigMap's watch event wakes it at once; the
    // re-sync would within 300 ms).
    assert!((1..=2).contains(&runs), "{runs} runs, {took:?}");

    // Broken and resting: re-syncs write nothing either.
    let broken = env.get("web").await;
    let version = broken.resource_version();
    let at = env.log_position();
    let runs = env.ctx.serving_runs.load(Ordering::SeqCst);
    eventually("three re-syncs while broken", || async {
        (env.ctx.serving_runs.load(Ordering::SeqCst) >= runs + 3).then_some(())
    })
    .await;
    assert_eq!(env.writes_since(at), Vec::<String>::new());
    assert_eq!(env.get("web").await.resource_version(), version);

    // Repaired: True again.
    configmaps
        .patch(
            "web-dep",
            &PatchParams {
                field_manager: Some("a-person".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(&json!({"data": {"broken": null}})),
        )
        .await
        .unwrap();
    let repaired = env
        .until("web", "DependentsReady=True", |g| {
            is(g, "DependentsReady", "True")
        })
        .await;
    assert_eq!(kstatus(&repaired), "Current");
}

/// Waits for `polls` more runs of `Serving`'s handler.
async fn settle(env: &Env, polls: usize) {
    let runs = env.ctx.serving_runs.load(Ordering::SeqCst);
    eventually("the next re-syncs", || async {
        (env.ctx.serving_runs.load(Ordering::SeqCst) >= runs + polls).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resting_object_keeps_its_health_true_in_the_status_store() {
    let env = env(|_| StatusStore::new(), Duration::from_millis(300)).await;
    a_resting_object_keeps_its_health_true(env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resting_object_keeps_its_health_true_in_the_config_map_store() {
    let env = env(
        |c| ConfigMapStore::new(c.clone()),
        Duration::from_millis(300),
    )
    .await;
    a_resting_object_keeps_its_health_true(env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_that_cannot_converge_is_degraded_not_ready_and_still_reconciling() {
    let env = env(|_| StatusStore::new(), Duration::from_secs(3600)).await;
    env.create(
        "web",
        GizmoSpec {
            color: "green".into(),
            fail: false,
        },
        &[],
    )
    .await;
    env.until("web", "ready", |g| is(g, "Ready", "True")).await;

    env.annotate(
        "web",
        "degrade",
        Some("Deployment web: conflict with kubectl"),
    )
    .await;
    let degraded = env
        .until("web", "Degraded", |g| {
            cond(g, "Degraded") == ("True".into(), "NotConverged".into())
        })
        .await;
    assert_eq!(state(&degraded).as_deref(), Some("Serving"));
    assert_eq!(
        cond(&degraded, "Ready"),
        ("False".into(), "NotConverged".into())
    );
    assert_eq!(
        cond(&degraded, "Reconciling"),
        ("True".into(), "NotConverged".into())
    );
    assert_eq!(cond(&degraded, "Stalled").0, "False");
    let message = &condition(&degraded, "Degraded").unwrap().message;
    assert!(
        message.contains("Deployment web: conflict with kubectl"),
        "{message}"
    );
    assert_eq!(kstatus(&degraded), "InProgress");
    let (ok, out) = env
        .kubectl_wait("web", "condition=Reconciling=false", SOON)
        .await;
    assert!(
        !ok,
        "a state that cannot converge is not at rest for kstatus: {out}"
    );

    env.annotate("web", "degrade", None).await;
    let recovered = env
        .until("web", "recovered", |g| is(g, "Ready", "True"))
        .await;
    assert_eq!(cond(&recovered, "Degraded").0, "False");
    assert_eq!(kstatus(&recovered), "Current");
}

fn commands(list: &[(u64, &str, Option<&str>)]) -> String {
    let list: Vec<_> = list
        .iter()
        .map(|(seq, command, arg)| {
            let mut c = json!({"seq": seq, "command": command, "by": "alice"});
            if let Some(arg) = arg {
                c["arg"] = json!(arg);
            }
            c
        })
        .collect();
    serde_json::to_string(&list).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_object_says_who_paused_it_and_is_neither_reconciling_nor_stalled() {
    let env = env(|_| StatusStore::new(), Duration::from_secs(3600)).await;
    env.create(
        "held",
        GizmoSpec {
            color: "red".into(),
            fail: false,
        },
        &[("hold", "yes")],
    )
    .await;
    env.until("held", "Reconciling", |g| is(g, "Reconciling", "True"))
        .await;

    let pause = commands(&[(1, "pause", None)]);
    env.annotate("held", COMMANDS_ANNOTATION, Some(&pause))
        .await;
    let paused = env
        .until("held", "Paused", |g| is(g, "Paused", "True"))
        .await;
    assert!(
        condition(&paused, "Paused")
            .unwrap()
            .message
            .contains("alice"),
        "{:?}",
        condition(&paused, "Paused")
    );
    assert_eq!(
        cond(&paused, "Reconciling"),
        ("False".into(), "Paused".into())
    );
    assert_eq!(cond(&paused, "Stalled"), ("False".into(), "Paused".into()));
    assert_eq!(
        cond(&paused, "LastCommand"),
        ("True".into(), "Applied".into())
    );
    assert_eq!(kstatus(&paused), "Current");
    let (ok, out) = env
        .kubectl_wait("held", "condition=Reconciling=false", "30s")
        .await;
    assert!(ok, "{out}");

    // A spec change while paused is not taken: kstatus sees it in
    // observedGeneration, the conditions' own observedGeneration moves.
    let patch = json!({"spec": {"color": "blue"}});
    env.gizmos()
        .patch("held", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let pending = env
        .until("held", "conditions at generation 2", |g| {
            condition(g, "Paused").is_some_and(|c| c.observed_generation == Some(2))
        })
        .await;
    assert_eq!(
        pending.status.as_ref().unwrap().observed_generation,
        Some(1)
    );
    assert_eq!(kstatus(&pending), "InProgress");
    assert_eq!(cond(&pending, "Reconciling").1, "Paused");

    // A command the machine refuses: LastCommand says so, still paused.
    let refused = commands(&[(1, "pause", None), (2, "goto", Some("Nowhere"))]);
    env.annotate("held", COMMANDS_ANNOTATION, Some(&refused))
        .await;
    let refused = env
        .until("held", "LastCommand=False", |g| {
            is(g, "LastCommand", "False")
        })
        .await;
    assert_eq!(cond(&refused, "LastCommand").1, "Refused");
    let message = &condition(&refused, "LastCommand").unwrap().message;
    assert!(
        message.starts_with("goto Nowhere (#2) by alice refused: "),
        "{message}"
    );
    assert!(is(&refused, "Paused", "True"));

    // Resumed: the spec change is taken, the workflow runs again.
    let resume = commands(&[
        (1, "pause", None),
        (2, "goto", Some("Nowhere")),
        (3, "resume", None),
    ]);
    env.annotate("held", COMMANDS_ANNOTATION, Some(&resume))
        .await;
    let resumed = env
        .until("held", "resumed and reconciling generation 2", |g| {
            is(g, "Paused", "False")
                && g.status.as_ref().and_then(|s| s.observed_generation) == Some(2)
                && is(g, "Reconciling", "True")
        })
        .await;
    assert_eq!(
        cond(&resumed, "LastCommand"),
        ("True".into(), "Applied".into())
    );
    assert_eq!(kstatus(&resumed), "InProgress");
}
