use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = ())]
enum Job {
    #[fsm(initial, converge = desired)]
    Pending,
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

fn desired(_cx: &Step<'_, Job>) -> Result<(), std::convert::Infallible> {
    Ok(())
}

fn main() {}
