use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(context = ())]
enum Job {
    #[fsm(handler = run, next(Dne))]
    Pending,
    #[fsm(final, handler = run)]
    Done,
    Working,
}

async fn run(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::stay())
}

fn main() {}
