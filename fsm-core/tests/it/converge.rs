//! A state declared `#[fsm(converge = desired_fn, next(S))]` under the
//! harness: it waits while what it converges is pending, moves to its
//! `next` state (built with its fields' `Default`) once it is ready, is
//! retried or fails under its policy when something failed, and times out
//! as any state does.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fsm_core::prelude::*;
use fsm_core::{Effect, Settled};

/// What one round of convergence finds.
#[derive(Clone, Copy, Debug)]
enum Look {
    /// Some dependent is still on its way.
    Pending,
    /// Every dependent is ready.
    Ready,
    /// A dependent failed; it may recover.
    Failed,
    /// A dependent failed for good.
    Gone,
}

/// The fake world: what the rounds find, in order (the last one repeats),
/// and a log of the calls.
struct World {
    looks: Mutex<VecDeque<Look>>,
    log: Mutex<Vec<String>>,
}

impl World {
    fn new(looks: impl IntoIterator<Item = Look>) -> Arc<Self> {
        Arc::new(World {
            looks: Mutex::new(looks.into_iter().collect()),
            log: Mutex::new(Vec::new()),
        })
    }
    fn next_look(&self) -> Look {
        let mut looks = self.looks.lock().unwrap();
        if looks.len() > 1 {
            looks.pop_front().unwrap()
        } else {
            *looks.front().expect("a look scripted")
        }
    }
    fn note(&self, line: impl Into<String>) {
        self.log.lock().unwrap().push(line.into());
    }
    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error("dependent of {0} failed")]
    Failed(String),
    #[error("dependent of {0} is gone for good")]
    Gone(String),
    #[error("the resource names no application")]
    NoName,
}

impl Classify for AppError {
    fn class(&self) -> ErrorClass {
        match self {
            AppError::Failed(_) => ErrorClass::RETRYABLE,
            AppError::Gone(_) | AppError::NoName => ErrorClass::Permanent,
        }
    }
}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = String, context = Arc<World>, error = AppError)]
#[fsm(retry(max_attempts = 3, initial = "10s", factor = 1.0, max = "10s"))]
enum App {
    #[fsm(initial, handler = start, next(Deploying))]
    Starting,
    #[fsm(
        converge = pods,
        next(Running),
        timeout = "1m",
        on_timeout = TimedOut,
        compensate = undeploy
    )]
    Deploying { release: String, replicas: u32 },
    #[fsm(ready, final)]
    Running { restarts: u32 },
    #[fsm(final)]
    TimedOut,
    #[fsm(failed)]
    Failed,
}

async fn start(cx: &mut Step<'_, App>) -> Result<Transition<App>, AppError> {
    Ok(Transition::next(App::Deploying {
        release: format!("{}-v1", cx.resource()),
        replicas: 3,
    }))
}

/// What `Deploying` converges: built from the state's fields.
fn pods(cx: &Step<'_, App>, release: &str, replicas: &u32) -> Result<Pods, AppError> {
    if cx.resource().is_empty() {
        return Err(AppError::NoName);
    }
    cx.context().note(format!("desired {release} x{replicas}"));
    Ok(Pods {
        release: release.to_owned(),
    })
}

async fn undeploy(cx: &mut Step<'_, App>, release: &str, _: &u32) -> Result<(), AppError> {
    cx.context().note(format!("undeploy {release}"));
    Ok(())
}

/// A fake set of dependents, whose rounds the world scripts.
struct Pods {
    release: String,
}

impl Converge<App> for Pods {
    fn converge_state<'a>(
        &'a self,
        cx: &'a mut Step<'_, App>,
        next: App,
    ) -> BoxFuture<'a, Result<Transition<App>, AppError>> {
        Box::pin(async move {
            let world = cx.context();
            world.note(format!("converge attempt {}", cx.attempt()));
            match world.next_look() {
                Look::Pending => Ok(Transition::wait(Duration::from_secs(5))),
                Look::Ready => Ok(Transition::next(next)),
                Look::Failed => Err(AppError::Failed(self.release.clone())),
                Look::Gone => Err(AppError::Gone(self.release.clone())),
            }
        })
    }
}

async fn settle(resource: &str, world: &Arc<World>) -> Settled<App> {
    Harness::<App>::new(resource.to_owned(), world.clone())
        .run_until_settled()
        .await
        .expect("the machine settles")
}

fn deploying() -> App {
    App::Deploying {
        release: "web-v1".into(),
        replicas: 3,
    }
}

#[tokio::test]
async fn a_converge_state_waits_while_pending_and_moves_on_when_ready() {
    let world = World::new([Look::Pending, Look::Pending, Look::Ready]);
    let settled = settle("web", &world).await;
    assert_eq!(settled.path(), ["Starting", "Deploying", "Running"]);
    // The next state carries data: it is entered with its fields' Default.
    assert_eq!(settled.state, App::Running { restarts: 0 });
    // Two waits of 5 s, each a round that found something pending.
    assert_eq!(settled.elapsed, Duration::from_secs(10));
    assert_eq!(
        world.log(),
        [
            "desired web-v1 x3",
            "converge attempt 0",
            "desired web-v1 x3",
            "converge attempt 0",
            "desired web-v1 x3",
            "converge attempt 0",
        ]
    );
    assert_eq!(settled.record.attempt, 0);
}

#[tokio::test]
async fn the_generated_handler_returns_what_the_converged_value_answers() {
    let world = World::new([Look::Ready]);
    let ready = Harness::<App>::new("web".into(), world.clone())
        .in_state(deploying())
        .run_handler()
        .await;
    assert_eq!(
        ready.unwrap(),
        Transition::next(App::Running { restarts: 0 })
    );

    let world = World::new([Look::Pending]);
    let pending = Harness::<App>::new("web".into(), world.clone())
        .in_state(deploying())
        .run_handler()
        .await;
    assert_eq!(pending.unwrap(), Transition::wait(Duration::from_secs(5)));
}

#[tokio::test]
async fn a_failed_dependent_is_retried_under_the_states_policy() {
    let world = World::new([Look::Failed, Look::Ready]);
    let settled = settle("web", &world).await;
    assert_eq!(settled.path(), ["Starting", "Deploying", "Running"]);
    assert!(settled.effects.contains(&Effect::RetryScheduled {
        state: "Deploying".into(),
        attempt: 1,
        delay: Duration::from_secs(10),
        error: "dependent of web-v1 failed".into(),
    }));
    // The retry sees its attempt.
    assert!(world.log().contains(&"converge attempt 1".to_owned()));
}

#[tokio::test]
async fn a_dependent_that_keeps_failing_exhausts_the_retries_and_compensates() {
    let world = World::new([Look::Failed]);
    let settled = settle("web", &world).await;
    assert_eq!(settled.state, App::Failed);
    assert!(settled.effects.contains(&Effect::RetriesExhausted {
        state: "Deploying".into(),
        error: "dependent of web-v1 failed".into(),
    }));
    let log = world.log();
    let rounds = log.iter().filter(|l| l.starts_with("converge")).count();
    assert_eq!(rounds, 3, "max_attempts = 3: {log:?}");
    assert_eq!(log.last().map(String::as_str), Some("undeploy web-v1"));
}

#[tokio::test]
async fn a_permanent_failure_fails_the_workflow_at_once() {
    let world = World::new([Look::Gone]);
    let settled = settle("web", &world).await;
    assert_eq!(settled.state, App::Failed);
    assert_eq!(
        world.log(),
        ["desired web-v1 x3", "converge attempt 0", "undeploy web-v1"]
    );
    assert_eq!(
        settled.record.last_error.as_deref(),
        Some("dependent of web-v1 is gone for good")
    );
}

#[tokio::test]
async fn an_error_of_the_desired_function_is_the_handlers_error() {
    let world = World::new([Look::Ready]);
    let settled = settle("", &world).await;
    assert_eq!(settled.state, App::Failed);
    assert_eq!(
        settled.record.last_error.as_deref(),
        Some("the resource names no application")
    );
    // Nothing was converged; the state's compensation still runs, as for
    // any state entered.
    assert_eq!(world.log(), ["undeploy -v1"]);
}

#[tokio::test]
async fn a_converge_state_that_stays_pending_times_out() {
    let world = World::new([Look::Pending]);
    let settled = settle("web", &world).await;
    assert_eq!(settled.path(), ["Starting", "Deploying", "TimedOut"]);
    assert!(settled.effects.contains(&Effect::TimedOut {
        state: "Deploying".into()
    }));
    assert_eq!(
        settled.record.last_error.as_deref(),
        Some("timed out in Deploying after 1m")
    );
    // Moving to a state that is not `failed` compensates nothing.
    assert!(!world.log().iter().any(|l| l.starts_with("undeploy")));
}

// ---- an `async` desired function ----

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = String, context = Arc<World>, error = AppError)]
enum LateApp {
    #[fsm(initial, converge = pods_later, next(Running), timeout = "1m")]
    Deploying { replicas: u32 },
    #[fsm(ready, final)]
    Running,
    #[fsm(failed)]
    Failed,
}

/// What `Deploying` converges, found out asynchronously (a read).
async fn pods_later(cx: &mut Step<'_, LateApp>, replicas: &u32) -> Result<LatePods, AppError> {
    tokio::task::yield_now().await;
    if cx.resource().is_empty() {
        return Err(AppError::NoName);
    }
    cx.context()
        .note(format!("desired {} x{replicas}, later", cx.resource()));
    Ok(LatePods)
}

struct LatePods;

impl Converge<LateApp> for LatePods {
    fn converge_state<'a>(
        &'a self,
        cx: &'a mut Step<'_, LateApp>,
        next: LateApp,
    ) -> BoxFuture<'a, Result<Transition<LateApp>, AppError>> {
        Box::pin(async move {
            match cx.context().next_look() {
                Look::Ready => Ok(Transition::next(next)),
                _ => Ok(Transition::wait(Duration::from_secs(5))),
            }
        })
    }
}

#[tokio::test]
async fn an_async_desired_function_is_awaited_and_its_errors_are_the_handlers() {
    let world = World::new([Look::Pending, Look::Ready]);
    let settled = Harness::<LateApp>::new("web".to_owned(), world.clone())
        .run_until_settled()
        .await
        .unwrap();
    assert_eq!(settled.path(), ["Deploying", "Running"]);
    assert_eq!(
        world.log(),
        ["desired web x0, later", "desired web x0, later"]
    );

    let refused = Harness::<LateApp>::new(String::new(), World::new([Look::Ready]))
        .run_until_settled()
        .await
        .unwrap();
    assert_eq!(refused.state, LateApp::Failed);
    assert_eq!(
        refused.record.last_error.as_deref(),
        Some("the resource names no application")
    );
}
