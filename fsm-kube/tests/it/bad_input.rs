//! Bad records in the ConfigMap and Secret stores, where the record is text
//! a person (or a broken tool) can edit: malformed JSON, a newer
//! `schemaVersion`, fields of the wrong type, a state the enum no longer
//! has. Each is answered with a `Degraded` condition (reason
//! `CorruptRecord`) naming the problem and a `CorruptRecord` event; the
//! record is left byte-for-byte as it was and no handler runs.
//!
//! (`status_store.rs` covers the status store's unknown state.)
//!
//! Records near the size limits, in each store: one that fits just under
//! the limit commits; one over it is refused before anything is written (a
//! `Degraded` condition and one event, both naming the size and the limit),
//! the last committed record stays byte-for-byte, the runtime does not loop,
//! and a spec that shrinks the record lets the object go on.
//!
//! A spec the handler cannot accept (`Transition::fail`): the object says
//! so (condition and event), the compensation runs, and the history keeps
//! every step.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use fsm_kube::prelude::*;
use fsm_kube::store::size::{DATA_LIMIT, OBJECT_LIMIT};
use fsm_kube::store::{MANAGED_BY_LABEL, OWNER_LABEL, RecordObject};
use fsm_kube::{ConfigMapStore, KubeStore, SecretStore};
use fsm_kube::{FsmReconciler, StatusStore};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::runtime::{Controller, watcher};
use kube::{Client, ResourceExt};
use kube::{CustomResource, CustomResourceExt};

const MALFORMED: &str = r#"{"schemaVersion": 1, "state": "Pending", "enteredAt": "2026-01-01T0"#;
const NEWER: &str =
    r#"{"schemaVersion": 999, "state": "Pending", "enteredAt": "2026-01-01T00:00:00Z"}"#;
const WRONG_TYPES: &str = r#"{"schemaVersion": 1, "state": "Pending", "enteredAt": "2026-01-01T00:00:00Z", "attempt": "three", "history": {"seq": 1}}"#;
const VANISHED: &str =
    r#"{"schemaVersion": 1, "state": "Vanished", "enteredAt": "2026-01-01T00:00:00Z"}"#;

/// Puts `text` in the record object of widget `name`, as the store would
/// have written it (labels and owner reference included).
async fn plant<O: RecordObject>(client: &Client, widget: &Widget, text: &str) {
    let name = widget.name_any();
    let metadata = ObjectMeta {
        name: Some(record_object_name_for::<WidgetState>(&name)),
        namespace: Some("default".into()),
        labels: Some(
            [
                (MANAGED_BY_LABEL.0.to_owned(), MANAGED_BY_LABEL.1.to_owned()),
                (OWNER_LABEL.to_owned(), name.clone()),
            ]
            .into(),
        ),
        owner_references: Some(vec![
            kube::Resource::controller_owner_ref(widget, &()).expect("the widget has a uid"),
        ]),
        ..ObjectMeta::default()
    };
    let api: Api<O> = Api::namespaced(client.clone(), "default");
    api.create(
        &PostParams::default(),
        &O::with_record(metadata, text.into()),
    )
    .await
    .expect("the record object is created");
}

/// Runs the controller (with the store `make` builds) over a widget whose
/// record is `text`, and checks the answer: a `Degraded` condition whose
/// message contains `problem`, one event, the record untouched, no handler
/// run.
async fn rejected<O, S>(make: impl FnOnce(Client) -> S, text: &str, problem: &str)
where
    O: RecordObject,
    S: KubeStore<Widget>,
{
    let server = server().await;
    let client = server.client();
    let name = "bad";
    let widget = create_widget(&client, name, WidgetSpec::colored("x")).await;
    plant::<O>(&client, &widget, text).await;

    let ctx = ctx(&client);
    let controller = run_controller(&client, make(client.clone()), ctx.clone());
    let widgets: Api<Widget> = Api::namespaced(client.clone(), "default");
    let degraded = eventually("the Degraded condition", || {
        let widgets = widgets.clone();
        async move {
            let w = widgets.get(name).await.ok()?;
            condition(&w, "Degraded")
                .filter(|c| c.reason == "CorruptRecord" && c.status == "True")
                .cloned()
        }
    })
    .await;
    // Give a wrongly looping runtime the time to show itself.
    tokio::time::sleep(Duration::from_millis(500)).await;
    controller.abort();

    assert!(
        degraded.message.contains(problem),
        "the message does not name the problem ({problem:?}): {:?}",
        degraded.message
    );
    let records: Api<O> = Api::namespaced(client.clone(), "default");
    let stored = records
        .get(&record_object_name_for::<WidgetState>(name))
        .await
        .expect("the record object is still there");
    assert_eq!(
        stored.record_text(),
        Some(Ok(text.to_owned())),
        "the record was overwritten"
    );
    assert!(ctx.log().is_empty(), "a handler ran: {:?}", ctx.log());
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let events: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .expect("the events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("CorruptRecord"))
        .collect();
    assert_eq!(events.len(), 1, "one CorruptRecord event: {events:#?}");
    let regarding = events[0].regarding.as_ref().and_then(|r| r.name.as_deref());
    assert_eq!(regarding, Some(name));
    let writes = server
        .request_log()
        .records()
        .iter()
        .filter(|r| {
            matches!(r.verb.as_str(), "update" | "patch" | "delete")
                && (r.resource == "configmaps" || r.resource == "secrets")
        })
        .count();
    assert_eq!(writes, 0, "the runtime wrote to the record object");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configmap_malformed_json() {
    rejected::<ConfigMap, _>(ConfigMapStore::new, MALFORMED, "malformed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configmap_newer_schema_version() {
    rejected::<ConfigMap, _>(ConfigMapStore::new, NEWER, "999").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configmap_wrong_field_types() {
    // The message says what is wrong ("invalid type: string \"three\",
    // expected u32") but not where: serde's error carries no field path.
    rejected::<ConfigMap, _>(ConfigMapStore::new, WRONG_TYPES, "\"three\"").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configmap_state_the_enum_no_longer_has() {
    rejected::<ConfigMap, _>(ConfigMapStore::new, VANISHED, "Vanished").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_malformed_json() {
    rejected::<Secret, _>(SecretStore::new, MALFORMED, "malformed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_newer_schema_version() {
    rejected::<Secret, _>(SecretStore::new, NEWER, "999").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_state_the_enum_no_longer_has() {
    rejected::<Secret, _>(SecretStore::new, VANISHED, "Vanished").await;
}

// ---- Records near the size limits ----

/// A resource whose record carries `spec.size` bytes once filled.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "size.operator-fsm.io",
    version = "v1",
    kind = "Blob",
    namespaced
)]
#[kube(status = "BlobStatus")]
pub struct BlobSpec {
    /// The bytes of payload the record carries once filled.
    pub size: usize,
}

/// The record and the conditions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BlobStatus {
    /// The record (status store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsm: Option<FsmStatus>,
    /// The conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

/// The blob machine's error (its handlers do not fail).
#[derive(Debug, thiserror::Error)]
#[error("blob handlers do not fail")]
pub struct BlobError;
impl Classify for BlobError {}

/// Counts the runs of the filling handler.
#[derive(Default)]
pub struct BlobCtx {
    fills: AtomicUsize,
}

/// Pending → Started → Filled: the record grows by `spec.size` bytes in
/// the second transition, so that a record is committed before it.
#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Blob, context = BlobCtx, error = BlobError)]
pub enum BlobState {
    /// Starts.
    #[fsm(initial, handler = start, next(Started))]
    Pending,
    /// Fills the payload.
    #[fsm(handler = fill, next(Filled))]
    Started,
    /// Holds it.
    #[fsm(ready, handler = keep, next(Pending))]
    Filled {
        /// `spec.size` bytes.
        payload: String,
    },
    /// Not reached.
    #[fsm(failed)]
    Failed,
}

async fn start(_: &mut Step<'_, BlobState>) -> Result<Transition<BlobState>, BlobError> {
    Ok(Transition::next(BlobState::Started))
}

async fn fill(cx: &mut Step<'_, BlobState>) -> Result<Transition<BlobState>, BlobError> {
    cx.context().fills.fetch_add(1, Ordering::SeqCst);
    Ok(Transition::next(BlobState::Filled {
        payload: "x".repeat(cx.resource().spec.size),
    }))
}

async fn keep(
    _: &mut Step<'_, BlobState>,
    _payload: &str,
) -> Result<Transition<BlobState>, BlobError> {
    Ok(Transition::stay())
}

/// Which store keeps the blob's record.
#[derive(Clone, Copy, Debug)]
enum Keeper {
    Status,
    ConfigMap,
    Secret,
}

impl Keeper {
    /// The record as committed: the status's `fsm` as JSON text, or the
    /// record object's text.
    async fn committed(self, client: &Client, name: &str) -> Option<String> {
        match self {
            Keeper::Status => {
                let blobs: Api<Blob> = Api::namespaced(client.clone(), "default");
                let blob = blobs.get(name).await.ok()?;
                let fsm = blob.status?.fsm?;
                serde_json::to_string(&fsm).ok()
            }
            Keeper::ConfigMap => record_text::<ConfigMap>(client, name).await,
            Keeper::Secret => record_text::<Secret>(client, name).await,
        }
    }

    fn run(self, client: &Client, ctx: Arc<BlobCtx>) -> tokio::task::JoinHandle<()> {
        match self {
            Keeper::Status => run_blobs(client, StatusStore::new(), ctx),
            Keeper::ConfigMap => run_blobs(client, ConfigMapStore::new(client.clone()), ctx),
            Keeper::Secret => run_blobs(client, SecretStore::new(client.clone()), ctx),
        }
    }
}

async fn record_text<O: RecordObject>(client: &Client, name: &str) -> Option<String> {
    let api: Api<O> = Api::namespaced(client.clone(), "default");
    api.get(&record_object_name_for::<BlobState>(name))
        .await
        .ok()?
        .record_text()?
        .ok()
}

fn run_blobs(
    client: &Client,
    store: impl KubeStore<Blob>,
    ctx: Arc<BlobCtx>,
) -> tokio::task::JoinHandle<()> {
    let fsm = FsmReconciler::<BlobState>::builder(client.clone(), store)
        .options(
            ReconcilerOptions::default()
                .poll_interval(Duration::from_secs(3600))
                // A runtime that treated the refusal as a passing error would
                // retry ten times a second.
                .error_requeue(Duration::from_millis(100)),
        )
        .build();
    let blobs: Api<Blob> = Api::all(client.clone());
    let controller = Controller::new(blobs, watcher::Config::default())
        .run(fsm.reconcile(), fsm.error_policy(), ctx)
        .for_each(|_| async {});
    tokio::spawn(controller)
}

fn blob_condition<'a>(blob: &'a Blob, type_: &str) -> Option<&'a Condition> {
    blob.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

async fn blob_server() -> (fsm_testkit::ApiServer, Client) {
    let server = server().await;
    let client = server.client();
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    crds.create(&PostParams::default(), &Blob::crd())
        .await
        .expect("the Blob CRD");
    (server, client)
}

async fn wait_filled(client: &Client, keeper: Keeper, name: &str) -> String {
    eventually(&format!("{name} Filled"), || async move {
        let text = keeper.committed(client, name).await?;
        text.contains("\"Filled\"").then_some(text)
    })
    .await
}

/// A record that fits just under the limit commits (the runtime's check
/// and the server agree on the limit).
async fn fits_just_under(keeper: Keeper, size: usize) {
    let (_server, client) = blob_server().await;
    let ctx = Arc::new(BlobCtx::default());
    let controller = keeper.run(&client, ctx.clone());
    let blobs: Api<Blob> = Api::namespaced(client.clone(), "default");
    blobs
        .create(
            &PostParams::default(),
            &Blob::new("near", BlobSpec { size }),
        )
        .await
        .expect("the blob");
    let text = wait_filled(&client, keeper, "near").await;
    controller.abort();
    println!("{keeper:?}: a record of {} bytes committed", text.len());
    assert!(text.len() > size, "the payload is in the record");
}

/// A record over the limit: refused with a clear report, nothing lost, no
/// loop; then a smaller spec lets the object go on.
async fn refused_over(keeper: Keeper, size: usize, limit: usize) {
    let (server, client) = blob_server().await;
    let ctx = Arc::new(BlobCtx::default());
    let controller = keeper.run(&client, ctx.clone());
    let blobs: Api<Blob> = Api::namespaced(client.clone(), "default");
    blobs
        .create(&PostParams::default(), &Blob::new("big", BlobSpec { size }))
        .await
        .expect("the blob");
    let degraded = eventually("the RecordTooLarge condition", || {
        let blobs = blobs.clone();
        async move {
            let b = blobs.get("big").await.ok()?;
            blob_condition(&b, "Degraded")
                .filter(|c| c.reason == "RecordTooLarge" && c.status == "True")
                .cloned()
        }
    })
    .await;
    let committed = keeper
        .committed(&client, "big")
        .await
        .expect("the first record was committed");
    // The write that made the condition visible may still be on its way
    // into the request log (the object is stored before the request
    // returns): count once the log has settled.
    let writes_before = settled_record_writes(&server, keeper).await;
    let fills_then = ctx.fills.load(Ordering::SeqCst);
    // Give a looping runtime the time to show itself.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let fills = ctx.fills.load(Ordering::SeqCst);
    println!(
        "{keeper:?}: {}; the handler ran {fills} times ({fills_then} when reported)",
        degraded.message
    );
    assert!(
        degraded.message.contains(&limit.to_string()),
        "the message names the limit {limit}: {:?}",
        degraded.message
    );
    let named_size: usize = degraded
        .message
        .split_whitespace()
        .find_map(|w| w.parse().ok().filter(|n| *n > limit))
        .expect("the message names the size");
    assert!(
        named_size > size,
        "{named_size} counts the payload of {size}"
    );
    assert!(
        fills <= 4,
        "the handler ran {fills} times: the runtime loops on a record too large"
    );
    assert_eq!(
        record_writes(&server, keeper),
        writes_before,
        "the record was written again"
    );
    assert!(
        committed.contains("\"Started\"") && !committed.contains("xxxx"),
        "the committed record is the last one that fit: {committed}"
    );
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let events: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .expect("the events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("RecordTooLarge"))
        .collect();
    assert_eq!(events.len(), 1, "one RecordTooLarge event: {events:#?}");
    let note = events[0].note.as_deref().unwrap_or_default();
    assert!(
        note.contains(&named_size.to_string()) && note.contains(&limit.to_string()),
        "the event names the size and the limit: {note}"
    );
    assert_eq!(
        events[0].regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("big")
    );
    assert_eq!(
        keeper.committed(&client, "big").await.as_deref(),
        Some(committed.as_str()),
        "the committed record changed"
    );

    // A smaller spec: the object goes on, and the condition clears.
    let patch = serde_json::json!({"spec": {"size": 10}});
    blobs
        .patch(
            "big",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .expect("the spec shrinks");
    wait_filled(&client, keeper, "big").await;
    let recovered = eventually("the Degraded condition cleared", || {
        let blobs = blobs.clone();
        async move {
            let b = blobs.get("big").await.ok()?;
            blob_condition(&b, "Degraded")
                .filter(|c| c.status == "False")
                .cloned()
        }
    })
    .await;
    controller.abort();
    assert_ne!(recovered.reason, "RecordTooLarge");
}

/// Writes of the record: status patches carrying `fsm` cannot be told
/// from condition patches in the log, so for the status store this counts
/// every status write; for the object stores, updates and patches of the
/// record objects.
/// [`record_writes`] once it has not changed for 200 ms (bounded).
async fn settled_record_writes(server: &fsm_testkit::ApiServer, keeper: Keeper) -> usize {
    let mut seen = record_writes(server, keeper);
    for _ in 0..25 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = record_writes(server, keeper);
        if now == seen {
            break;
        }
        seen = now;
    }
    seen
}

fn record_writes(server: &fsm_testkit::ApiServer, keeper: Keeper) -> usize {
    server
        .request_log()
        .records()
        .iter()
        .filter(|r| match keeper {
            Keeper::Status => {
                r.resource == "blobs" && r.subresource.as_deref() == Some("status") && r.code < 300
            }
            Keeper::ConfigMap => {
                r.resource == "configmaps" && matches!(r.verb.as_str(), "update" | "patch")
            }
            Keeper::Secret => {
                r.resource == "secrets" && matches!(r.verb.as_str(), "update" | "patch")
            }
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_record_just_under_the_object_limit_commits() {
    fits_just_under(Keeper::Status, OBJECT_LIMIT - 8 * 1024).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_record_over_the_object_limit_is_refused() {
    refused_over(Keeper::Status, OBJECT_LIMIT, OBJECT_LIMIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configmap_record_just_under_1_mib_commits() {
    fits_just_under(Keeper::ConfigMap, DATA_LIMIT - 1024).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configmap_record_over_1_mib_is_refused() {
    refused_over(Keeper::ConfigMap, DATA_LIMIT, DATA_LIMIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_record_just_under_1_mib_commits() {
    fits_just_under(Keeper::Secret, DATA_LIMIT - 1024).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_record_over_1_mib_is_refused() {
    refused_over(Keeper::Secret, DATA_LIMIT, DATA_LIMIT).await;
}

// ---- A spec the handler cannot accept ----

/// The handler refuses the spec (`Transition::fail`): the object rests in
/// `Failed` with a `Degraded` condition and a `Failed` event naming the
/// reason, the compensation undid what was done, and the history keeps
/// every step (nothing overwritten).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_the_handler_cannot_accept() {
    let server = server().await;
    let client = server.client();
    let ctx = ctx(&client);
    let controller = run_controller(&client, StatusStore::new(), ctx.clone());
    create_widget(&client, "refused", WidgetSpec::failing("red")).await;
    let widget = wait_for_status_state(&client, "refused", "Failed").await;
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let failed = eventually("the Failed event", || {
        let events = events.clone();
        async move {
            events
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("Failed"))
        }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    controller.abort();

    let degraded = condition(&widget, "Degraded").expect("a Degraded condition");
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "Failed")
    );
    assert_eq!(degraded.message, "the widget asked to fail");
    let ready = condition(&widget, "Ready").expect("a Ready condition");
    assert_eq!(ready.status, "False");
    assert_eq!(failed.type_.as_deref(), Some("Warning"));
    assert_eq!(
        failed.note.as_deref(),
        Some("Configuring: the widget asked to fail")
    );
    assert_eq!(
        failed.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("refused")
    );
    assert!(ctx.log().contains(&"unconfigure:refused-config".to_owned()));
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    assert!(cms.get_opt("refused-config").await.unwrap().is_none());
    let fsm = serde_json::to_value(widget.status.and_then(|s| s.fsm)).unwrap();
    let path: Vec<&str> = fsm["history"]
        .as_array()
        .expect("a history")
        .iter()
        .filter_map(|h| h["to"].as_str())
        .collect();
    println!("history: {}", fsm["history"]);
    assert_eq!(
        path,
        ["Pending", "Configuring", "Failed"],
        "every step is kept"
    );
    assert_eq!(fsm["history"][2]["reason"], "the widget asked to fail");
}
