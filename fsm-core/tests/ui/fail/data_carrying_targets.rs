use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = (), on_spec_change = goto(Working))]
enum Job {
    #[fsm(initial, handler = run, next(Working))]
    Pending,
    #[fsm(handler = work, timeout = "5m", on_timeout = TimedOut, on_exhausted = Stuck, next(Done))]
    Working { id: u32 },
    #[fsm(final)]
    TimedOut { after: u64 },
    #[fsm(final)]
    Stuck(String),
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

async fn run(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::stay())
}

async fn work(_cx: &mut Step<'_, Job>, _id: &u32) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::stay())
}

fn main() {}
