use fsm_core::prelude::*;

// Clone only: the states are stored, so the enum must derive Serialize and
// Deserialize too.
#[derive(OperatorFsm, Clone)]
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
