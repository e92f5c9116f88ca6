//! An object too large for the finalizer its machine needs (a spec near
//! the server's size limit), on the embedded API server or the real
//! kube-apiserver named by `FSM_REAL_APISERVER_KUBECONFIG`: the refusal is
//! reported once (a Warning event naming the size and the limit; no
//! condition fits on the object), the reconcile is not retried at once,
//! and once the object is made smaller its workflow runs.

use std::time::Duration;

use fsm_kube::StatusStore;
use kube::api::{Api, Patch, PatchParams, PostParams};

use crate::common::{self, Widget, WidgetSpec, eventually};

/// Whether the server refused a write as too large.
fn too_large(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if [413, 422, 500].contains(&s.code)
        && (s.message.contains("too large") || s.message.contains("Too long")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_too_large_for_its_finalizer_is_reported_once_and_waits() {
    let env = common::env().await;
    let api: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    // The largest widget the server stores, within 64 bytes: its
    // finalizer (and the managed fields of the patch) cannot fit.
    let mut size = 1024 * 1024 + 512 * 1024;
    loop {
        let widget = Widget::new("huge", WidgetSpec::colored(&"x".repeat(size)));
        match api.create(&PostParams::default(), &widget).await {
            Ok(_) => break,
            Err(e) if too_large(&e) => size -= 64,
            Err(e) => panic!("creating a widget of {size} bytes: {e}"),
        }
        assert!(size > 1024 * 1024, "no widget of over 1 MiB was stored");
    }
    let ctx = common::ctx(&env.client);
    let controller = common::run_controller(&env, StatusStore::default(), ctx.clone());

    let events = eventually("the ObjectTooLarge event", || async {
        let events = common::events_about(&env.client, &env.ns, "huge", "ObjectTooLarge").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    let note = events[0].note.clone().unwrap_or_default();
    assert!(
        note.contains("too large") && note.contains("finalizer"),
        "{note}"
    );
    // Reported once, not retried at once (the poll interval is an hour).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let again = common::events_about(&env.client, &env.ns, "huge", "ObjectTooLarge").await;
    assert_eq!(again.len(), 1, "{again:#?}");
    let series = again[0].series.as_ref().map_or(1, |s| s.count);
    assert_eq!(series, 1, "one report, not a series: {again:#?}");
    let widget = api.get("huge").await.unwrap();
    assert!(widget.metadata.finalizers.is_none(), "nothing was written");
    assert!(ctx.log.lock().unwrap().is_empty(), "no handler ran");

    // Made smaller, it runs.
    api.patch(
        "huge",
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"spec": {"color": "blue"}})),
    )
    .await
    .unwrap();
    eventually("the workflow of the smaller widget", || async {
        let widget = api.get("huge").await.ok()?;
        let state = widget.status?.fsm?.state_name()?;
        (state == "Ready").then_some(())
    })
    .await;
    controller.abort();
}
