use fsm_core::prelude::*;

// `kube::Error` is in the same position: a foreign error type, which the
// orphan rule forbids implementing `Classify` for.
#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = (), error = std::fmt::Error)]
enum Job {
    #[fsm(initial, handler = start, next(Done))]
    Pending,
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

async fn start(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::fmt::Error> {
    Ok(Transition::next(Job::Done))
}

fn main() {}
