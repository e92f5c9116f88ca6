//! `Step::publish_status`: status fields a step publishes are committed
//! with the step's record, through `StateStore::save` (`Commit::status`), and a
//! step that publishes but stays still commits them.

use std::sync::Arc;

use fsm_core::prelude::*;
use fsm_core::{Engine, EphemeralStore, ObjectKey, Observed, PublishError, StateStore};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error(transparent)]
    Publish(#[from] PublishError),
}
impl Classify for AppError {}

/// The object: the URL the site is served at.
struct Site {
    url: &'static str,
}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Site, error = AppError)]
enum SiteState {
    #[fsm(initial, handler = deploy, next(Waiting))]
    Deploying,
    #[fsm(handler = wait, next(Serving))]
    Waiting,
    #[fsm(ready, final)]
    Serving,
    #[fsm(failed)]
    Failed,
}

async fn deploy(cx: &mut Step<'_, SiteState>) -> Result<Transition<SiteState>, AppError> {
    cx.publish_status(json!({ "url": cx.resource().url, "phase": "deploying" }))?;
    cx.publish_status(json!({ "phase": "deployed" }))?;
    Ok(Transition::next(SiteState::Waiting))
}

async fn wait(cx: &mut Step<'_, SiteState>) -> Result<Transition<SiteState>, AppError> {
    cx.publish_status(json!({ "phase": "waiting", "url": null }))?;
    Ok(Transition::stay())
}

fn observed() -> Observed {
    Observed {
        commands: Vec::new(),
        key: ObjectKey::namespaced("ns", "site"),
        generation: Some(1),
        ..Observed::default()
    }
}

#[tokio::test]
async fn published_fields_are_stored_with_the_commit_and_merged_key_by_key() {
    let engine = Engine::<SiteState>::new().unwrap();
    let store = Arc::new(EphemeralStore::new());
    let site = Site { url: "http://site" };
    let report = engine
        .reconcile(store.as_ref(), &observed(), &site, &())
        .await
        .unwrap();
    assert_eq!(report.state, "Waiting");
    assert_eq!(
        report.commits, 1,
        "the fields rode in the transition's commit"
    );
    let status = store.status(&observed().key).unwrap();
    assert_eq!(
        serde_json::Value::Object(status),
        json!({ "url": "http://site", "phase": "deployed" })
    );
}

#[tokio::test]
async fn a_step_that_stays_but_publishes_commits_its_fields() {
    let engine = Engine::<SiteState>::new().unwrap();
    let store = EphemeralStore::new();
    let site = Site { url: "http://site" };
    engine
        .reconcile(&store, &observed(), &site, &())
        .await
        .unwrap();
    let before = store.load(&observed().key).await.unwrap().version;
    let report = engine
        .reconcile(&store, &observed(), &site, &())
        .await
        .unwrap();
    assert_eq!(report.state, "Waiting");
    assert_eq!(report.commits, 1);
    assert_ne!(store.load(&observed().key).await.unwrap().version, before);
    // `null` removed the url.
    let status = store.status(&observed().key).unwrap();
    assert_eq!(
        serde_json::Value::Object(status),
        json!({ "phase": "waiting" })
    );
}

#[test]
fn the_runtime_fields_and_non_objects_are_refused() {
    let clock = ManualClock::at("2026-01-01T00:00:00Z".parse().unwrap());
    let site = Site { url: "x" };
    let mut cx = Step::<SiteState>::new(&site, &(), &clock, "Deploying");
    assert!(matches!(
        cx.publish_status(json!({ "fsm": {} })),
        Err(PublishError::Reserved(field)) if field == "fsm"
    ));
    assert!(matches!(
        cx.publish_status(json!({ "conditions": [] })),
        Err(PublishError::Reserved(_))
    ));
    assert!(matches!(
        cx.publish_status(json!(["a"])),
        Err(PublishError::NotAnObject("an array"))
    ));
    assert!(cx.published_status().is_none(), "nothing refused is kept");
    cx.publish_status(json!({ "a": 1 })).unwrap();
    cx.publish_status(json!({ "b": 2, "a": 3 })).unwrap();
    assert_eq!(
        serde_json::Value::Object(cx.published_status().unwrap().clone()),
        json!({ "a": 3, "b": 2 })
    );
    assert_eq!(
        PublishError::NotAnObject("a string").class(),
        ErrorClass::Permanent
    );
}

#[tokio::test]
async fn the_harness_shows_what_the_steps_published() {
    let harness = Harness::<SiteState>::new(Site { url: "http://h" }, ());
    harness.reconcile().await.unwrap();
    assert_eq!(
        serde_json::Value::Object(harness.published_status().unwrap()),
        json!({ "url": "http://h", "phase": "deployed" })
    );
}
