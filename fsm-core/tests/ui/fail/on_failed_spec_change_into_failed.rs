use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = (), on_failure = Failed, on_failed_spec_change = goto(GaveUp))]
enum Job {
    #[fsm(initial, handler = run, next(Done, GaveUp))]
    Pending,
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
    #[fsm(failed)]
    GaveUp,
}

async fn run(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::stay())
}

fn main() {}
