use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = ())]
enum Job {
    #[fsm(initial, handler = start, next(Working))]
    Pending,
    #[fsm(handler = work, next(Done))]
    Working(String, u32),
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

async fn start(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::next(Job::Working("a".into(), 1)))
}

// Forgets the second field.
async fn work(_cx: &mut Step<'_, Job>, _name: &String) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::next(Job::Done))
}

fn main() {}
