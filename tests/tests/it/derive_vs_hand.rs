//! The same machine written by hand and with `#[derive(OperatorFsm)]`:
//! equal static tables, and, driven to rest by the harness, the same
//! transitions, delays, effects and compensation order on every path
//! (success with retries and waits, a permanent error, a timeout).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fsm_core::prelude::*;
use fsm_core::{Effect, Settled};

/// The handlers' error.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Retryable.
    #[error("the cloud is busy")]
    Busy,
    /// Permanent.
    #[error("verification rejected the instance")]
    Rejected,
}

impl Classify for AppError {
    fn class(&self) -> ErrorClass {
        match self {
            AppError::Busy => ErrorClass::RETRYABLE,
            AppError::Rejected => ErrorClass::Permanent,
        }
    }
}

/// Which path the workflow takes: the resource of both machines.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scenario {
    /// Configuring fails twice (retried), Verifying waits once, then Ready.
    Succeed,
    /// Verifying fails permanently: compensation runs, then Failed.
    Reject,
    /// Verifying waits forever: its timeout sends it to Failed.
    Stall,
}

/// What the handlers and compensations did, in order: the context.
#[derive(Default)]
pub struct Log(Mutex<Vec<String>>);

impl Log {
    fn push(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// The handlers, written once for each enum.
macro_rules! handlers {
    ($S:ident) => {
        async fn provision(cx: &mut Step<'_, $S>) -> Result<Transition<$S>, AppError> {
            cx.context().push("provision".into());
            Ok(Transition::next($S::Configuring { id: "i-1".into() }))
        }

        async fn configure(cx: &mut Step<'_, $S>, id: &str) -> Result<Transition<$S>, AppError> {
            cx.context()
                .push(format!("configure {id} attempt {}", cx.attempt()));
            if cx.attempt() < 2 {
                return Err(AppError::Busy);
            }
            Ok(Transition::next($S::Verifying(id.to_owned(), 3)))
        }

        async fn verify(
            cx: &mut Step<'_, $S>,
            id: &str,
            rounds: &u32,
        ) -> Result<Transition<$S>, AppError> {
            cx.context().push(format!("verify {id} x{rounds}"));
            match cx.resource() {
                Scenario::Succeed if cx.time_in_state() < Duration::from_secs(5) => {
                    Ok(Transition::wait(Duration::from_secs(5)))
                }
                Scenario::Succeed => Ok(Transition::next($S::Ready { id: id.to_owned() })),
                Scenario::Reject => Err(AppError::Rejected),
                Scenario::Stall => Ok(Transition::wait(Duration::from_secs(20))),
            }
        }

        async fn check(cx: &mut Step<'_, $S>, id: &str) -> Result<Transition<$S>, AppError> {
            cx.context().push(format!("check {id}"));
            Ok(Transition::stay())
        }

        async fn deprovision(cx: &mut Step<'_, $S>) -> Result<(), AppError> {
            cx.context().push("deprovision".into());
            Ok(())
        }

        async fn unconfigure(cx: &mut Step<'_, $S>, id: &str) -> Result<(), AppError> {
            cx.context().push(format!("unconfigure {id}"));
            Ok(())
        }
    };
}

mod derived {
    use super::*;

    #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[fsm(resource = Scenario, context = Arc<Log>, error = AppError)]
    #[fsm(retry(max_attempts = 4, initial = "2s", factor = 2.0, max = "30s"))]
    pub enum Db {
        #[fsm(initial, handler = provision, compensate = deprovision, next(Configuring))]
        Provisioning,
        #[fsm(handler = configure, compensate = unconfigure, next(Verifying))]
        Configuring { id: String },
        #[fsm(handler = verify, timeout = "1m", on_timeout = Failed,
              retry(max_attempts = 2), next(Ready))]
        Verifying(String, u32),
        #[fsm(ready, handler = check)]
        Ready { id: String },
        #[fsm(failed)]
        Failed,
    }

    handlers!(Db);
}

mod hand {
    use fsm_core::Jitter;

    use super::*;

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    pub enum Db {
        Provisioning,
        Configuring { id: String },
        Verifying(String, u32),
        Ready { id: String },
        Failed,
    }

    const fn policy(max_attempts: u32) -> RetryPolicy {
        match RetryPolicy::new(
            max_attempts,
            Duration::from_secs(2),
            2.0,
            Duration::from_secs(30),
        ) {
            Ok(p) => p.with_jitter(Jitter::None),
            Err(_) => panic!("valid policy"),
        }
    }

    static STATES: [StateMeta; 5] = [
        StateMeta::new("Provisioning")
            .initial()
            .with_handler()
            .compensated_by("deprovision")
            .next(&["Configuring"]),
        StateMeta::new("Configuring")
            .with_handler()
            .with_data()
            .compensated_by("unconfigure")
            .next(&["Verifying"]),
        StateMeta::new("Verifying")
            .with_handler()
            .with_data()
            .next(&["Ready"])
            .retry(policy(2))
            .timeout(Duration::from_secs(60))
            .on_timeout("Failed"),
        StateMeta::new("Ready").with_handler().with_data().ready(),
        StateMeta::new("Failed").failed(),
    ];
    static MACHINE: Machine = Machine::new("Db", &STATES).retry(policy(4));

    handlers!(Db);

    impl Fsm for Db {
        type Resource = Scenario;
        type Context = Arc<Log>;
        type Error = AppError;

        fn machine() -> &'static Machine {
            &MACHINE
        }
        fn state_name(&self) -> &'static str {
            match self {
                Db::Provisioning => "Provisioning",
                Db::Configuring { .. } => "Configuring",
                Db::Verifying(..) => "Verifying",
                Db::Ready { .. } => "Ready",
                Db::Failed => "Failed",
            }
        }
        fn unit_state(name: &str) -> Option<Self> {
            match name {
                "Provisioning" => Some(Db::Provisioning),
                "Failed" => Some(Db::Failed),
                _ => None,
            }
        }
        fn handle<'a>(
            &'a self,
            cx: &'a mut Step<'_, Self>,
        ) -> BoxFuture<'a, Result<Transition<Self>, AppError>> {
            match self {
                Db::Provisioning => Box::pin(provision(cx)),
                Db::Configuring { id } => Box::pin(configure(cx, id)),
                Db::Verifying(id, rounds) => Box::pin(verify(cx, id, rounds)),
                Db::Ready { id } => Box::pin(check(cx, id)),
                Db::Failed => Box::pin(async { Ok(Transition::stay()) }),
            }
        }
        fn compensate<'a>(
            &'a self,
            cx: &'a mut Step<'_, Self>,
        ) -> BoxFuture<'a, Result<(), AppError>> {
            match self {
                Db::Provisioning => Box::pin(deprovision(cx)),
                Db::Configuring { id } => Box::pin(unconfigure(cx, id)),
                _ => Box::pin(async { Ok(()) }),
            }
        }
    }
}

/// One run: where it rested (as JSON, to compare across the two enums),
/// its history, effects, time and reconciles, and what the user code did.
#[derive(Debug, PartialEq)]
struct Run {
    state: serde_json::Value,
    history: Vec<fsm_core::HistoryEntry>,
    effects: Vec<Effect>,
    elapsed: Duration,
    reconciles: u32,
    log: Vec<String>,
}

async fn run<S: Fsm<Resource = Scenario, Context = Arc<Log>> + serde::Serialize>(
    scenario: Scenario,
) -> Run {
    let log = Arc::new(Log::default());
    let settled: Settled<S> = Harness::<S>::new(scenario, log.clone())
        .run_until_settled()
        .await
        .unwrap();
    Run {
        state: serde_json::to_value(&settled.state).unwrap(),
        history: settled.history,
        effects: settled.effects,
        elapsed: settled.elapsed,
        reconciles: settled.reconciles,
        log: log.lines(),
    }
}

impl Run {
    fn path(&self) -> Vec<&str> {
        self.history.iter().map(|h| h.to.as_str()).collect()
    }
    fn delays(&self) -> Vec<Duration> {
        self.effects
            .iter()
            .filter_map(|e| match e {
                Effect::RetryScheduled { delay, .. } => Some(*delay),
                _ => None,
            })
            .collect()
    }
    fn compensations(&self) -> Vec<&str> {
        self.log
            .iter()
            .map(String::as_str)
            .filter(|l| l.starts_with("unconfigure") || l.starts_with("deprovision"))
            .collect()
    }
}

#[test]
fn the_tables_are_equal() {
    assert_eq!(derived::Db::machine(), hand::Db::machine());
    assert_eq!(derived::Db::machine().validate(), Ok(()));
    assert_eq!(derived::Db::mermaid(), hand::Db::mermaid());
    assert_eq!(derived::Db::MERMAID, hand::Db::mermaid());
}

#[tokio::test]
async fn success_path_is_identical() {
    let by_hand = run::<hand::Db>(Scenario::Succeed).await;
    let derived = run::<derived::Db>(Scenario::Succeed).await;
    assert_eq!(derived, by_hand);
    assert_eq!(
        derived.path(),
        ["Provisioning", "Configuring", "Verifying", "Ready"]
    );
    assert_eq!(
        derived.delays(),
        [Duration::from_secs(2), Duration::from_secs(4)]
    );
}

#[tokio::test]
async fn a_permanent_error_compensates_in_reverse_order_identically() {
    let by_hand = run::<hand::Db>(Scenario::Reject).await;
    let derived = run::<derived::Db>(Scenario::Reject).await;
    assert_eq!(derived, by_hand);
    assert_eq!(derived.state, serde_json::json!("Failed"));
    assert_eq!(derived.compensations(), ["unconfigure i-1", "deprovision"]);
}

#[tokio::test]
async fn a_timeout_takes_on_timeout_identically() {
    let by_hand = run::<hand::Db>(Scenario::Stall).await;
    let derived = run::<derived::Db>(Scenario::Stall).await;
    assert_eq!(derived, by_hand);
    assert_eq!(derived.state, serde_json::json!("Failed"));
    assert!(
        derived.effects.contains(&Effect::TimedOut {
            state: "Verifying".into()
        }),
        "{:#?}",
        derived.effects
    );
    assert_eq!(derived.compensations(), ["unconfigure i-1", "deprovision"]);
}

#[test]
fn the_derived_handler_future_runs_on_a_multi_threaded_runtime() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let transition = runtime.block_on(async {
        tokio::spawn(async {
            let clock = fsm_core::ManualClock::default();
            let log = Arc::new(Log::default());
            let state = derived::Db::Configuring { id: "i-9".into() };
            let mut cx = Step::new(&Scenario::Succeed, &log, &clock, state.state_name())
                .with_attempt(2, clock.now());
            state.handle(&mut cx).await.map_err(|e| e.to_string())
        })
        .await
        .unwrap()
    });
    assert_eq!(
        transition,
        Ok(Transition::next(derived::Db::Verifying("i-9".into(), 3)))
    );
}
