//! A small operator for the integration tests: a `Widget` custom resource
//! whose machine creates a ConfigMap, waits, and rests in `Ready`.
//!
//! Each test gets an [`Env`]: the embedded API server, or the real
//! kube-apiserver named by `FSM_REAL_APISERVER_KUBECONFIG`
//! (`fsm_testkit::TestCluster::from_env`), with the Widget CRD established
//! and a namespace of the test's own, which its controller alone watches.

#![allow(dead_code)]

pub mod http;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fsm_kube::prelude::*;
use fsm_kube::{FsmReconciler, KubeStore};
use fsm_testkit::{ApiServer, TestCluster};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::{Controller, watcher};
use kube::{Client, CustomResource, CustomResourceExt, ResourceExt};

/// The spec: what the ConfigMap holds, and whether configuring must fail.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "test.operator-fsm.io",
    version = "v1",
    kind = "Widget",
    namespaced
)]
#[kube(status = "WidgetStatus")]
pub struct WidgetSpec {
    pub color: String,
    #[serde(default)]
    pub fail: bool,
    /// The first `Pending` handler writes the widget itself, so that the
    /// commit of its transition meets a conflict.
    #[serde(default)]
    pub conflict_once: bool,
}

impl WidgetSpec {
    /// A widget of `color` whose workflow reaches `Ready`.
    pub fn colored(color: &str) -> Self {
        WidgetSpec {
            color: color.into(),
            fail: false,
            conflict_once: false,
        }
    }

    /// A widget of `color` whose workflow fails once it has made its
    /// ConfigMap (and compensates).
    pub fn failing(color: &str) -> Self {
        WidgetSpec {
            fail: true,
            ..WidgetSpec::colored(color)
        }
    }
}

/// The status: the machine's record and the conditions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WidgetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsm: Option<FsmStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// An output the handlers publish (annotations `write-own-status`,
    /// `publish-output`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum WidgetError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Publish(#[from] fsm_core::PublishError),
}
impl Classify for WidgetError {}

/// The operator's context: a client and a log of what ran.
pub struct Ctx {
    pub client: Client,
    pub log: Mutex<Vec<String>>,
}

impl Ctx {
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
    fn push(&self, line: String) {
        self.log.lock().unwrap().push(line);
    }
}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Widget, context = Ctx, error = WidgetError, cleanup = cleanup)]
pub enum WidgetState {
    #[fsm(initial, handler = start, next(Configuring))]
    Pending,
    #[fsm(handler = configure, compensate = unconfigure, next(Ready))]
    Configuring { config_map: String },
    #[fsm(ready, handler = check, next(Pending))]
    Ready { config_map: String },
    #[fsm(failed)]
    Failed,
}

async fn start(cx: &mut Step<'_, WidgetState>) -> Result<Transition<WidgetState>, WidgetError> {
    let name = cx.resource().name_any();
    if cx.resource().spec.conflict_once && !cx.resource().labels().contains_key("touched") {
        let ns = cx.resource().namespace().unwrap_or_default();
        let api: Api<Widget> = Api::namespaced(cx.context().client.clone(), &ns);
        let patch = serde_json::json!({"metadata": {"labels": {"touched": "yes"}}});
        api.patch(
            &name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await?;
    }
    if cx.resource().annotations().contains_key("write-own-status") {
        // What a kube-rs author does to publish an output: a status patch
        // of the object the handler runs for, on every run.
        let ns = cx.resource().namespace().unwrap_or_default();
        let api: Api<Widget> = Api::namespaced(cx.context().client.clone(), &ns);
        let runs = cx
            .context()
            .log()
            .iter()
            .filter(|l| **l == format!("start:{name}"))
            .count();
        let patch =
            serde_json::json!({"status": {"output": format!("written by run {}", runs + 1)}});
        api.patch_status(
            &name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await?;
    }
    cx.context().push(format!("start:{name}"));
    Ok(Transition::next(WidgetState::Configuring {
        config_map: format!("{name}-config"),
    }))
}

async fn configure(
    cx: &mut Step<'_, WidgetState>,
    config_map: &str,
) -> Result<Transition<WidgetState>, WidgetError> {
    let widget = cx.resource();
    if widget.annotations().contains_key("publish-output") {
        cx.publish_status(serde_json::json!({ "output": format!("configured {config_map}") }))?;
    }
    if widget.annotations().contains_key("hold") {
        return Ok(Transition::wait(Duration::from_millis(30)));
    }
    cx.context()
        .push(format!("configure:{}", widget.name_any()));
    let ns = widget.namespace().unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(cx.context().client.clone(), &ns);
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(config_map.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some([("color".to_owned(), widget.spec.color.clone())].into()),
        ..ConfigMap::default()
    };
    match api.create(&PostParams::default(), &cm).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_already_exists() => {}
        Err(e) => return Err(e.into()),
    }
    if widget.spec.fail {
        return Ok(Transition::fail("the widget asked to fail"));
    }
    Ok(Transition::next(WidgetState::Ready {
        config_map: config_map.to_owned(),
    }))
}

async fn unconfigure(cx: &mut Step<'_, WidgetState>, config_map: &str) -> Result<(), WidgetError> {
    cx.context().push(format!("unconfigure:{config_map}"));
    let ns = cx.resource().namespace().unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(cx.context().client.clone(), &ns);
    match api.delete(config_map, &Default::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn check(
    _: &mut Step<'_, WidgetState>,
    _config_map: &str,
) -> Result<Transition<WidgetState>, WidgetError> {
    Ok(Transition::stay())
}

async fn cleanup(cx: &mut Step<'_, WidgetState>, _state: &WidgetState) -> Result<(), WidgetError> {
    cx.context()
        .push(format!("cleanup:{}", cx.resource().name_any()));
    Ok(())
}

/// A test's server (embedded, or the real one when the environment names
/// it), its client and the test's own namespace.
pub struct Env {
    pub cluster: TestCluster,
    pub client: Client,
    pub ns: String,
}

impl Env {
    /// The embedded server, for checks only it can answer (its request
    /// log); `None` on a real kube-apiserver.
    pub fn embedded(&self) -> Option<&ApiServer> {
        self.cluster.embedded_server()
    }
}

/// Where a test's widgets live: an [`Env`]'s namespace, or `default` for a
/// bare client of an embedded server (see [`server`]).
pub trait Scope {
    /// A client of the server.
    fn client(&self) -> Client;
    /// The namespace of the test's objects.
    fn ns(&self) -> &str;
}

impl Scope for Env {
    fn client(&self) -> Client {
        self.client.clone()
    }
    fn ns(&self) -> &str {
        &self.ns
    }
}

impl Scope for Client {
    fn client(&self) -> Client {
        self.clone()
    }
    fn ns(&self) -> &str {
        "default"
    }
}

/// Logs to the test's output, filtered by `RUST_LOG`.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// An embedded API server with the Widget CRD installed, for the tests that
/// need the embedded server's own features (they say which).
pub async fn server() -> ApiServer {
    init_tracing();
    let cluster = TestCluster::embedded();
    cluster.install_crd(&Widget::crd()).await.unwrap();
    cluster
        .embedded_server()
        .cloned()
        .expect("an embedded cluster has its server")
}

/// The server of `FSM_REAL_APISERVER_KUBECONFIG`, else a fresh embedded
/// one, with the Widget CRD established and a new namespace.
pub async fn env() -> Env {
    init_tracing();
    let cluster = TestCluster::from_env().await.unwrap();
    cluster.install_crd(&Widget::crd()).await.unwrap();
    let ns = cluster.create_namespace("fsm-kube").await.unwrap();
    Env {
        client: cluster.client(),
        cluster,
        ns,
    }
}

pub fn ctx(client: &Client) -> Arc<Ctx> {
    Arc::new(Ctx {
        client: client.clone(),
        log: Mutex::new(Vec::new()),
    })
}

/// Runs a controller for the widgets of the test's namespace with `store`
/// until the returned handle is aborted.
pub fn run_controller(
    env: &impl Scope,
    store: impl KubeStore<Widget>,
    ctx: Arc<Ctx>,
) -> tokio::task::JoinHandle<()> {
    let fsm = FsmReconciler::<WidgetState>::builder(env.client(), store)
        .options(
            ReconcilerOptions::default()
                .poll_interval(Duration::from_secs(3600))
                .error_requeue(Duration::from_millis(100)),
        )
        .build();
    let widgets: Api<Widget> = Api::namespaced(env.client(), env.ns());
    let controller = Controller::new(widgets, watcher::Config::default())
        .run(fsm.reconcile(), fsm.error_policy(), ctx)
        .for_each(|_| async {});
    tokio::spawn(controller)
}

/// A controller of the Widgets in `ns` through `client`, also woken by
/// the ConfigMaps they own (`owns_dependents`); given a runtime, those
/// watches are its caches.
pub fn widgets_owning_configmaps<S>(client: &Client, ns: &str, source: &S) -> Controller<Widget>
where
    S: fsm_kube::dependents::DependentsWatchSource + ?Sized,
{
    fsm_kube::dependents::owns_dependents(
        Controller::new(
            Api::<Widget>::namespaced(client.clone(), ns),
            watcher::Config::default(),
        ),
        source,
        Some(ns),
        [fsm_kube::dependents::DependentKind::of::<ConfigMap>()],
    )
}

pub async fn create_widget(env: &impl Scope, name: &str, spec: WidgetSpec) -> Widget {
    let api: Api<Widget> = Api::namespaced(env.client(), env.ns());
    api.create(&PostParams::default(), &Widget::new(name, spec))
        .await
        .unwrap()
}

/// Creates a widget whose `Configuring` state waits while it carries the
/// `hold` annotation.
pub async fn create_held_widget(env: &impl Scope, name: &str) -> Widget {
    let api: Api<Widget> = Api::namespaced(env.client(), env.ns());
    let mut widget = Widget::new(name, WidgetSpec::colored("held"));
    widget.metadata.annotations = Some([("hold".to_owned(), "yes".to_owned())].into());
    api.create(&PostParams::default(), &widget).await.unwrap()
}

/// Creates a widget carrying `annotation` (which the handlers read).
pub async fn create_annotated_widget(env: &impl Scope, name: &str, annotation: &str) -> Widget {
    create_widget_annotated(env, name, &[annotation]).await
}

/// Creates a widget carrying `annotations` (which the handlers read).
pub async fn create_widget_annotated(env: &impl Scope, name: &str, annotations: &[&str]) -> Widget {
    let api: Api<Widget> = Api::namespaced(env.client(), env.ns());
    let mut widget = Widget::new(name, WidgetSpec::colored("annotated"));
    widget.metadata.annotations = Some(
        annotations
            .iter()
            .map(|a| ((*a).to_owned(), "yes".to_owned()))
            .collect(),
    );
    api.create(&PostParams::default(), &widget).await.unwrap()
}

/// Removes the `hold` annotation.
pub async fn release_hold(env: &impl Scope, name: &str) {
    let api: Api<Widget> = Api::namespaced(env.client(), env.ns());
    let patch = serde_json::json!({"metadata": {"annotations": {"hold": null}}});
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .unwrap();
}

/// The state of widget `name` as kept by a ConfigMap or Secret store.
pub async fn object_store_state<O>(env: &impl Scope, name: &str) -> Option<String>
where
    O: fsm_kube::store::RecordObject,
{
    let api: Api<O> = Api::namespaced(env.client(), env.ns());
    let object = api
        .get_opt(&record_object_name_for::<WidgetState>(name))
        .await
        .ok()??;
    let text = object.record_text()?.ok()?;
    let record: serde_json::Value = serde_json::from_str(&text).ok()?;
    record.get("state")?.as_str().map(str::to_owned)
}

/// Waits (bounded) until `probe` answers `Some`. The bound is generous:
/// a real kube-apiserver on a busy machine, and its garbage collector,
/// which notices a brand-new CRD's owners only after up to ~30 s.
pub async fn eventually<T, Fut>(what: &str, mut probe: impl FnMut() -> Fut) -> T
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
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until widget `name` has a record in state `state` (status store).
pub async fn wait_for_status_state(env: &impl Scope, name: &str, state: &str) -> Widget {
    let api: Api<Widget> = Api::namespaced(env.client(), env.ns());
    eventually(&format!("{name} in {state}"), || {
        let api = api.clone();
        async move {
            let w = api.get(name).await.ok()?;
            let current = w.status.as_ref()?.fsm.as_ref()?.state_name()?;
            (current == state).then_some(w)
        }
    })
    .await
}

/// The condition `type_` of a widget.
pub fn condition<'a>(widget: &'a Widget, type_: &str) -> Option<&'a Condition> {
    widget
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The events of `reason` about the object `name` in namespace `ns`.
pub async fn events_about(
    client: &Client,
    ns: &str,
    name: &str,
    reason: &str,
) -> Vec<k8s_openapi::api::events::v1::Event> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    events
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect()
}
