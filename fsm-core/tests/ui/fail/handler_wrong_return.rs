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

// Returns nothing to do next.
async fn start(_cx: &mut Step<'_, Job>) -> Result<(), std::convert::Infallible> {
    Ok(())
}

fn main() {}
