//! Every key of the grammar, on unit, struct and tuple variants, split over
//! several attributes.

use std::sync::Arc;
use std::time::Duration;

use fsm_core::prelude::*;
use fsm_core::{Jitter, OnDelete, SpecChange};

#[derive(Debug, thiserror::Error)]
#[error("app error")]
pub struct AppError;
impl Classify for AppError {}

pub struct Database {
    pub size: u32,
}
pub struct Ctx;

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Database, context = Arc<Ctx>, error = AppError)]
#[fsm(retry(max_attempts = 7, initial = "500ms", factor = 1.5, max = "1h30m", jitter = full))]
#[fsm(on_failure = Failed, on_spec_change = goto(Provisioning), snapshot_spec)]
#[fsm(cleanup = cleanup, on_delete = compensate)]
pub enum DbState {
    /// Unit variant: initial, with a compensation.
    #[fsm(initial, handler = provision, compensate = deprovision, next(WaitingReady, Failed))]
    Provisioning,
    /// Struct variant with every per-state key.
    #[fsm(
        handler = handlers::wait_ready,
        timeout = "10m",
        attempt_timeout = "30s",
        on_timeout = TimedOut,
        on_exhausted = Cancelled,
        compensate = handlers::forget,
        retry(max_attempts = 3, jitter = none),
        sensitive,
        next(Seeding)
    )]
    WaitingReady { instance_id: String, password: String },
    /// Tuple variant.
    #[fsm(handler = seed, retry(initial = "2s", factor = 3), commits, next(Ready))]
    Seeding(String, u32),
    #[fsm(
        ready,
        handler = check_drift,
        next(Provisioning),
        on_signal(decommission = TimedOut, abort = Cancelled),
        immutable("spec.engine", "metadata.labels.tier"),
        grow_only("spec.storageGi"),
        refuse_delete
    )]
    Ready { instance_id: String },
    #[fsm(final)]
    TimedOut,
    #[fsm(failed)]
    Failed,
    #[fsm(failed)]
    Cancelled,
}

async fn provision(cx: &mut Step<'_, DbState>) -> Result<Transition<DbState>, AppError> {
    let _size = cx.resource().size;
    let _ctx: &Arc<Ctx> = cx.context();
    Ok(Transition::next(DbState::WaitingReady {
        instance_id: "i-1".into(),
        password: "p".into(),
    }))
}

async fn deprovision(_cx: &mut Step<'_, DbState>) -> Result<(), AppError> {
    Ok(())
}

mod handlers {
    use super::*;

    pub async fn wait_ready(
        _cx: &mut Step<'_, DbState>,
        instance_id: &String,
        _password: &String,
    ) -> Result<Transition<DbState>, AppError> {
        Ok(Transition::next(DbState::Seeding(instance_id.clone(), 0)))
    }

    // Not an async fn: any function returning a Send future fits.
    pub fn forget<'a>(
        _cx: &'a mut Step<'_, DbState>,
        _instance_id: &'a String,
        _password: &'a String,
    ) -> BoxFuture<'a, Result<(), AppError>> {
        Box::pin(async { Ok(()) })
    }
}

async fn seed(
    _cx: &mut Step<'_, DbState>,
    instance_id: &String,
    _round: &u32,
) -> Result<Transition<DbState>, AppError> {
    Ok(Transition::next(DbState::Ready {
        instance_id: instance_id.clone(),
    }))
}

async fn check_drift(
    _cx: &mut Step<'_, DbState>,
    _instance_id: &String,
) -> Result<Transition<DbState>, AppError> {
    Ok(Transition::stay())
}

async fn cleanup(_cx: &mut Step<'_, DbState>, _state: &DbState) -> Result<(), AppError> {
    Ok(())
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn main() {
    let m = DbState::machine();
    assert_eq!(m.validate(), Ok(()));
    assert_eq!(DbState::MERMAID, DbState::mermaid());
    assert_eq!(m.spec_change(), SpecChange::Goto("Provisioning"));
    assert!(m.snapshots_spec());
    assert!(m.has_cleanup());
    assert_eq!(m.delete_policy(), OnDelete::Compensate);
    assert_eq!(m.default_failed().map(StateMeta::name), Some("Failed"));

    let default = RetryPolicy::new(7, ms(500), 1.5, ms(5_400_000)).unwrap().with_jitter(Jitter::Full);
    assert_eq!(m.default_retry(), default);

    let p = m.state("Provisioning").unwrap();
    assert!(p.is_initial() && p.has_handler() && p.has_compensation() && !p.has_data());
    assert_eq!(p.targets(), &["WaitingReady", "Failed"]);
    assert_eq!(p.own_retry(), None);

    let w = m.state("WaitingReady").unwrap();
    assert!(w.has_data() && w.is_sensitive() && w.has_compensation());
    assert_eq!(w.state_timeout(), Some(ms(600_000)));
    assert_eq!(w.handler_timeout(), Some(ms(30_000)));
    assert_eq!(w.timeout_target(), Some("TimedOut"));
    assert_eq!(w.exhausted_target(), Some("Cancelled"));
    // Keys not given are inherited from the enum's policy.
    let inherited = RetryPolicy::new(3, ms(500), 1.5, ms(5_400_000)).unwrap();
    assert_eq!(w.own_retry(), Some(inherited));

    let r = m.state("Ready").unwrap();
    assert_eq!(r.immutable_fields(), ["spec.engine", "metadata.labels.tier"]);
    assert_eq!(r.grow_only_fields(), ["spec.storageGi"]);
    assert!(r.is_delete_refused() && r.has_admission_rules());
    assert!(!w.has_admission_rules());
    assert!(m.declares_admission_rules());

    let s = m.state("Seeding").unwrap();
    let seeding = RetryPolicy::new(7, ms(2_000), 3.0, ms(5_400_000)).unwrap().with_jitter(Jitter::Full);
    assert_eq!(s.own_retry(), Some(seeding));
    assert!(s.has_data());
    assert!(s.is_commits() && s.closes_scope());
    assert!(!w.closes_scope());

    assert!(m.state("Ready").unwrap().is_ready() && m.state("Ready").unwrap().closes_scope());
    let ready = m.state("Ready").unwrap();
    assert_eq!(ready.signals(), &[("decommission", "TimedOut"), ("abort", "Cancelled")]);
    assert_eq!(ready.signal_target("abort"), Some("Cancelled"));
    assert_eq!(ready.signal_target("approve"), None);
    assert!(DbState::mermaid().contains("Ready --> Cancelled: signal abort"));
    assert!(m.state("TimedOut").unwrap().is_final());
    assert!(m.state("Cancelled").unwrap().is_failed());

    assert_eq!(DbState::Seeding("x".into(), 1).state_name(), "Seeding");
    assert_eq!(DbState::unit_state("TimedOut"), Some(DbState::TimedOut));
    assert_eq!(DbState::unit_state("Ready"), None);
    assert!(DbState::dot().contains("\"Cancelled\" [color=red];"));
}
