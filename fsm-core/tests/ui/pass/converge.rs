//! `converge = desired_fn`: a generated handler that converges what the
//! function returns and moves to the one `next` state; the function may
//! take `&Step` or `&mut Step`, then the fields by reference (tuple
//! variants too); its error converts into the machine's; the state keeps
//! `timeout`, `retry`, `compensate`; it is drawn as a handler state.

use std::time::Duration;

use fsm_core::prelude::*;

#[derive(Debug, thiserror::Error)]
#[error("app error")]
struct AppError;
impl Classify for AppError {}
impl From<std::fmt::Error> for AppError {
    fn from(_: std::fmt::Error) -> Self {
        AppError
    }
}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = u32, error = AppError)]
enum App {
    #[fsm(initial, converge = config, next(Deploying))]
    Configuring,
    #[fsm(
        converge = self::desired::pods,
        next(Running),
        timeout = "10m",
        on_timeout = TimedOut,
        attempt_timeout = "30s",
        retry(max_attempts = 2),
        compensate = undeploy
    )]
    Deploying(String, u8),
    #[fsm(ready, final)]
    Running { restarts: u32, note: Option<String> },
    #[fsm(final)]
    TimedOut,
    #[fsm(failed)]
    Failed,
}

/// What every state of `App` converges in this test: ready at once.
struct Ready;

impl<S: Fsm> Converge<S> for Ready {
    fn converge_state<'a>(
        &'a self,
        _cx: &'a mut Step<'_, S>,
        next: S,
    ) -> BoxFuture<'a, Result<Transition<S>, S::Error>> {
        Box::pin(async move { Ok(Transition::next(next)) })
    }
}

// `&Step`, and an error that converts with `?`.
fn config(cx: &Step<'_, App>) -> Result<Ready, std::fmt::Error> {
    let _ = cx.resource();
    Ok(Ready)
}

mod desired {
    use super::*;

    // `&mut Step`, then the tuple variant's fields.
    pub fn pods(cx: &mut Step<'_, App>, release: &str, replicas: &u8) -> Result<Ready, AppError> {
        let _ = (cx.attempt(), release, replicas);
        Ok(Ready)
    }
}

async fn undeploy(_cx: &mut Step<'_, App>, _: &String, _: &u8) -> Result<(), AppError> {
    Ok(())
}

fn main() {
    let m = App::machine();
    assert_eq!(m.validate(), Ok(()));
    let deploying = m.state("Deploying").unwrap();
    assert!(deploying.has_handler() && deploying.has_compensation());
    assert_eq!(deploying.targets(), ["Running"]);
    assert_eq!(deploying.state_timeout(), Some(Duration::from_secs(600)));
    assert_eq!(m.retry_policy(deploying).max_attempts(), 2);
    assert_eq!(App::MERMAID, App::mermaid());
    assert!(App::MERMAID.contains("Deploying --> TimedOut: timeout\n"));

    let settled = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(Harness::<App>::new(3, ()).in_state(App::Deploying("web".into(), 3)).run_until_settled())
        .unwrap();
    assert_eq!(settled.state, App::Running { restarts: 0, note: None });
}
