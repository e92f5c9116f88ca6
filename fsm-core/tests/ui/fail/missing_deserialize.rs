use fsm_core::prelude::*;

// Serialize without Deserialize: a stored state could not be read back.
#[derive(OperatorFsm, Clone, Serialize)]
#[fsm(resource = ())]
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

fn main() {}
