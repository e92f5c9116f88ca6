use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = ())]
enum Job {
    #[fsm(initial, handler = run, next(Done), renamed_from = "Old", renamed_from = "Done")]
    Pending,
    #[fsm(final, renamed_from = "Old", renamed_from = "Done")]
    Done,
    #[fsm(failed, renamed_from = "Gone", renamed_from = "Gone")]
    Failed,
}

async fn run(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::stay())
}

fn main() {}
