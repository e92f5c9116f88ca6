//! The derive on real machines: the generated table validates, the diagram
//! constant matches the core's rendering, dispatch reaches the handlers.

use std::time::Duration;

use fsm_core::prelude::*;
use fsm_core::{Jitter, ManualClock};

#[derive(Debug, thiserror::Error)]
#[error("app error")]
struct AppError;
impl Classify for AppError {}

struct Ctx {
    label: &'static str,
}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = String, context = Ctx, error = AppError)]
#[fsm(retry(max_attempts = 5, initial = "1s", factor = 2.0, max = "5m"))]
enum DbState {
    #[fsm(initial, handler = provision, next(WaitingReady))]
    Provisioning,
    #[fsm(handler = wait_ready, timeout = "10m", on_timeout = Failed,
          compensate = deprovision, next(Seeding))]
    WaitingReady { instance_id: String },
    #[fsm(handler = seed, attempt_timeout = "30s", retry(max_attempts = 3), next(Ready))]
    Seeding(String, u32),
    #[fsm(ready, handler = check_drift, next(Provisioning))]
    Ready { instance_id: String },
    #[fsm(failed)]
    Failed,
}

async fn provision(cx: &mut Step<'_, DbState>) -> Result<Transition<DbState>, AppError> {
    Ok(Transition::next(DbState::WaitingReady {
        instance_id: format!("{}-{}", cx.context().label, cx.resource()),
    }))
}

async fn wait_ready(
    _cx: &mut Step<'_, DbState>,
    instance_id: &str,
) -> Result<Transition<DbState>, AppError> {
    Ok(Transition::next(DbState::Seeding(
        instance_id.to_owned(),
        1,
    )))
}

async fn deprovision(_cx: &mut Step<'_, DbState>, _instance_id: &str) -> Result<(), AppError> {
    Ok(())
}

async fn seed(
    _cx: &mut Step<'_, DbState>,
    instance_id: &str,
    round: &u32,
) -> Result<Transition<DbState>, AppError> {
    Ok(Transition::next(DbState::Ready {
        instance_id: format!("{instance_id}/{round}"),
    }))
}

async fn check_drift(
    _cx: &mut Step<'_, DbState>,
    _instance_id: &str,
) -> Result<Transition<DbState>, AppError> {
    Ok(Transition::stay())
}

#[test]
fn the_table_says_what_the_attributes_say() {
    let m = DbState::machine();
    assert_eq!(m.validate(), Ok(()));
    assert_eq!(m.name(), "DbState");
    let names: Vec<_> = m.states().iter().map(StateMeta::name).collect();
    assert_eq!(
        names,
        ["Provisioning", "WaitingReady", "Seeding", "Ready", "Failed"]
    );
    let default = RetryPolicy::new(5, Duration::from_secs(1), 2.0, Duration::from_secs(300))
        .map(|p| p.with_jitter(Jitter::None));
    assert_eq!(Ok(m.default_retry()), default);
    let seeding = m.state("Seeding").unwrap();
    assert_eq!(seeding.own_retry().map(|p| p.max_attempts()), Some(3));
    assert_eq!(seeding.handler_timeout(), Some(Duration::from_secs(30)));
    assert!(seeding.has_data());
    let waiting = m.state("WaitingReady").unwrap();
    assert_eq!(waiting.state_timeout(), Some(Duration::from_secs(600)));
    assert_eq!(waiting.timeout_target(), Some("Failed"));
    assert!(waiting.has_compensation());
    assert!(m.state("Ready").unwrap().is_ready());
    assert_eq!(m.default_failed().map(StateMeta::name), Some("Failed"));
}

#[test]
fn the_diagram_constant_is_the_core_rendering() {
    let expected = "stateDiagram-v2
    [*] --> Provisioning
    Provisioning --> WaitingReady
    Provisioning --> Failed: exhausted, fail
    WaitingReady --> Seeding
    WaitingReady --> Failed: timeout, exhausted, fail
    Seeding --> Ready
    Seeding --> Failed: exhausted, fail
    Ready --> Provisioning
    Ready --> Failed: exhausted, fail
    note right of WaitingReady : compensate deprovision
    Failed --> [*]
";
    assert_eq!(DbState::mermaid(), expected);
    assert_eq!(DbState::MERMAID, expected);
    assert_eq!(
        DbState::machine()
            .state("WaitingReady")
            .and_then(StateMeta::compensation_name),
        Some("deprovision")
    );
    let dot = DbState::dot();
    assert!(
        dot.contains("\"WaitingReady\" [label=\"WaitingReady\\ncompensate deprovision\"];"),
        "{dot}"
    );
    assert!(
        dot.contains("\"Seeding\" -> \"Failed\" [label=\"exhausted, fail\", style=dashed];"),
        "{dot}"
    );
}

#[test]
fn names_and_unit_states() {
    assert_eq!(DbState::Seeding("i".into(), 2).state_name(), "Seeding");
    assert_eq!(DbState::unit_state("Failed"), Some(DbState::Failed));
    assert_eq!(DbState::unit_state("Seeding"), None);
    assert_eq!(DbState::unit_state("Nope"), None);
}

#[tokio::test]
async fn dispatch_passes_the_fields_by_reference() {
    let clock = ManualClock::default();
    let ctx = Ctx { label: "db" };
    let resource = "one".to_owned();
    let state = DbState::Provisioning;
    let mut cx = Step::new(&resource, &ctx, &clock, state.state_name());
    let t = state.handle(&mut cx).await.unwrap();
    assert_eq!(
        t,
        Transition::next(DbState::WaitingReady {
            instance_id: "db-one".into()
        })
    );
    let state = DbState::Seeding("i-1".into(), 7);
    let mut cx = Step::new(&resource, &ctx, &clock, state.state_name());
    let t = state.handle(&mut cx).await.unwrap();
    assert_eq!(
        t,
        Transition::next(DbState::Ready {
            instance_id: "i-1/7".into()
        })
    );
}
