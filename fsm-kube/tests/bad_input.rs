//! Bad records in the ConfigMap and Secret stores, where the record is text
//! a person (or a broken tool) can edit: malformed JSON, a newer
//! `schemaVersion`, fields of the wrong type, a state the enum no longer
//! has. Each is answered with a `Degraded` condition (reason
//! `CorruptRecord`) naming the problem and a `CorruptRecord` event; the
//! record is left byte-for-byte as it was and no handler runs.
//!
//! (`status_store.rs` covers the status store's unknown state.)

mod common;

use std::time::Duration;

use common::*;
use fsm_kube::store::{MANAGED_BY_LABEL, OWNER_LABEL, RecordObject};
use fsm_kube::{ConfigMapStore, KubeStore, SecretStore};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};

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
        name: Some(format!("{name}-fsm")),
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
    let widget = create_widget(
        &client,
        name,
        WidgetSpec {
            color: "x".into(),
            fail: false,
            conflict_once: false,
        },
    )
    .await;
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
        .get(&format!("{name}-fsm"))
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
