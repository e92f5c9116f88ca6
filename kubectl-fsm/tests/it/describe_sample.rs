//! The `kubectl fsm describe` sample in docs/observability.md is the
//! output of the code, not written by hand: a Database machine is driven
//! by the real engine (`Harness`, a virtual clock) until its seeding has
//! failed twice; its record, the conditions the runtime derives from it
//! (`conditions::from_record`) and the events its effects publish
//! (`events::for_effect`, folded as kube's `Recorder` folds repeats) are
//! rendered by the plugin's own functions, and the page's block must be
//! exactly that.
//!
//! When it fails after a change of the plugin's output, the new output is
//! in the failure message: copy it into the page.

use std::time::Duration;

use fsm_core::{Effect, Harness, ManualClock, Timestamp};
use fsm_kube::prelude::*;
use fsm_kube::records::object::Condition;
use fsm_kube::records::record_view::{self, Location};
use fsm_kube::{conditions, events};
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kubectl_fsm::describe::{render_conditions, render_events, render_pending, render_timeline};

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("connection refused")]
    Refused,
}
impl Classify for DbError {}

pub struct Db;

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Db, error = DbError)]
pub enum DbState {
    #[fsm(initial, handler = provision, next(WaitingReady))]
    Provisioning,
    #[fsm(handler = wait_ready, next(Seeding))]
    WaitingReady { instance_id: String },
    #[fsm(handler = seed, next(Ready))]
    Seeding { instance_id: String },
    #[fsm(ready, final)]
    Ready { instance_id: String },
    #[fsm(failed)]
    Failed,
}

async fn provision(_: &mut Step<'_, DbState>) -> Result<Transition<DbState>, DbError> {
    Ok(Transition::next(DbState::WaitingReady {
        instance_id: "i-42".into(),
    }))
}

async fn wait_ready(_: &mut Step<'_, DbState>, id: &str) -> Result<Transition<DbState>, DbError> {
    Ok(Transition::next(DbState::Seeding {
        instance_id: id.into(),
    }))
}

async fn seed(_: &mut Step<'_, DbState>, _: &str) -> Result<Transition<DbState>, DbError> {
    Err(DbError::Refused)
}

/// The page's block: from the `describe` command line to the next one.
fn documented() -> String {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/observability.md"),
    )
    .unwrap();
    let start = page
        .find("$ kubectl fsm describe databases orders -n shop\n")
        .expect("the describe sample");
    let block = &page[start..];
    let block = &block[block.find('\n').unwrap() + 1..];
    block[..block.find("$ ").expect("the next command")].to_owned()
}

/// The page's `--timeline` block: from its command line to the next one.
fn documented_timeline() -> String {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/observability.md"),
    )
    .unwrap();
    let start = page
        .find("$ kubectl fsm describe databases orders -n shop --timeline")
        .expect("the timeline sample");
    let block = &page[start..];
    let block = &block[block.find('\n').unwrap() + 1..];
    block[..block.find("$ ").expect("the next command")].to_owned()
}

/// Folds events as kube's `Recorder` does: one series per type, reason
/// and action, keeping the first note and counting repeats.
fn recorded(published: Vec<(Timestamp, kube::runtime::events::Event)>) -> Vec<Event> {
    let mut series: Vec<Event> = Vec::new();
    for (at, event) in published {
        let type_ = format!("{:?}", event.type_);
        let time = MicroTime(at);
        if let Some(existing) = series.iter_mut().find(|e| {
            e.type_.as_deref() == Some(type_.as_str())
                && e.reason.as_deref() == Some(event.reason.as_str())
                && e.action.as_deref() == Some(event.action.as_str())
        }) {
            let count = existing.series.as_ref().map_or(1, |s| s.count) + 1;
            existing.series = Some(EventSeries {
                count,
                last_observed_time: time,
            });
            continue;
        }
        series.push(Event {
            type_: Some(type_),
            reason: Some(event.reason),
            action: Some(event.action),
            note: event.note,
            event_time: Some(time),
            ..Event::default()
        });
    }
    series
}

#[tokio::test]
async fn the_describe_sample_is_what_the_plugin_prints() {
    let t0: Timestamp = "2026-01-01T12:00:00Z".parse().unwrap();
    let db = Harness::<DbState>::new(Db, ()).clock(ManualClock::at(t0));
    let mut published = Vec::new();
    let mut publish = |at: Timestamp, effects: &[Effect]| {
        for effect in effects {
            if let Some(event) = events::for_effect(effect) {
                published.push((at, event));
            }
        }
    };
    // Provisioning → WaitingReady → Seeding, then two failed attempts.
    for _ in 0..2 {
        let report = db.reconcile().await.unwrap();
        publish(db.now(), &report.effects);
        db.advance(Duration::from_secs(3));
    }
    let report = db.reconcile().await.unwrap();
    publish(db.now(), &report.effects);
    db.advance(Duration::from_secs(1));
    let report = db.reconcile().await.unwrap();
    assert!(matches!(
        report.effects[..],
        [Effect::RetryScheduled { attempt: 2, .. }]
    ));
    publish(db.now(), &report.effects);
    let now = db
        .now()
        .checked_add(Duration::from_secs(1))
        .expect("a time");

    let record = db.record().unwrap();
    let location = Location {
        kind: "Database".into(),
        namespace: Some("shop".into()),
        name: "orders".into(),
        record: format!(
            "Secret shop/{}",
            fsm_kube::store::record_object_name("orders", "example.io", "Database", "DbState")
        ),
    };
    let conditions: Vec<Condition> =
        conditions::from_record(DbState::machine(), &record, Some(1), &[], now)
            .into_iter()
            .map(|c| Condition {
                type_: c.type_,
                status: c.status,
                reason: c.reason,
                message: c.message,
            })
            .collect();
    let mut printed = record_view::render_text(&location, &record, now);
    printed.push_str(&render_pending(None, record.command_seq, now));
    printed.push_str(&render_conditions(&conditions));
    printed.push_str(&render_events(&recorded(published), now));

    let timeline = render_timeline(&record, now);
    assert_eq!(
        documented_timeline(),
        timeline,
        "docs/observability.md's timeline sample is not what the plugin prints; it prints:\n{timeline}"
    );
    assert_eq!(
        documented(),
        printed,
        "docs/observability.md's describe sample is not what the plugin prints; it prints:\n{printed}"
    );
}
