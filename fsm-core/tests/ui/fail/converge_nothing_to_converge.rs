use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = ())]
enum Job {
    #[fsm(initial, converge = desired, next(Done))]
    Pending,
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

// A list of names does not implement `Converge<Job>`.
fn desired(_cx: &Step<'_, Job>) -> Result<Vec<String>, std::convert::Infallible> {
    Ok(Vec::new())
}

fn main() {}
