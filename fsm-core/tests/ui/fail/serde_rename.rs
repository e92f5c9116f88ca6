use fsm_core::prelude::*;

// States are stored by variant name in serde's default representation.
#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = ())]
#[serde(rename_all = "snake_case")]
enum Job {
    #[fsm(initial, handler = run, next(Done))]
    Pending,
    #[fsm(final)]
    #[serde(rename = "finished")]
    Done,
    #[fsm(failed)]
    Failed,
}

async fn run(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::stay())
}

fn main() {}
