use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = ())]
enum Job {
    #[fsm(initial, handler = run, next(Poll, Done))]
    Pending,
    #[fsm(handler = run, next(Check))]
    Poll,
    #[fsm(handler = run, next(Poll))]
    Check,
    // Allowed: a loop that runs until it fails, on purpose.
    #[fsm(handler = run, next(Watch), allow(never_rests, unreachable))]
    Watch,
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

async fn run(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::stay())
}

fn main() {}
