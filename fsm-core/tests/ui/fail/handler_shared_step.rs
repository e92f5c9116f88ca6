use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = ())]
enum Job {
    #[fsm(initial, handler = start, next(Done))]
    Pending,
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

// The step is taken by shared reference; handlers take `&mut Step`.
async fn start(_cx: &Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::next(Job::Done))
}

fn main() {}
