use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = (), batch_commits)]
enum Job {
    #[fsm(initial, handler = run, next(Deploying))]
    Pending,
    #[fsm(handler = run, compensate = undo, next(Done), commit_on_entry)]
    Deploying,
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

async fn run(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::stay())
}

async fn undo(_cx: &mut Step<'_, Job>) -> Result<(), std::convert::Infallible> {
    Ok(())
}

fn main() {}
