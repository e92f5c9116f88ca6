use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = (), cleanup = tidy)]
enum Job {
    #[fsm(initial, handler = start, next(Done))]
    Pending,
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

async fn start(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::next(Job::Done))
}

// cleanup takes the step and the state (`state: &Job`), not the step only.
async fn tidy(_cx: &mut Step<'_, Job>) -> Result<(), std::convert::Infallible> {
    Ok(())
}

fn main() {}
