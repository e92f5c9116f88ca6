use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = ())]
enum Job {
    #[fsm(initial, handler = run, next(Serving))]
    Pending,
    #[fsm(ready, commits, handler = run_serving, next(Pending))]
    Serving,
    #[fsm(failed)]
    Failed,
}

async fn run(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::stay())
}

async fn run_serving(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::stay())
}

fn main() {}
