use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = (), error = AppError)]
enum Job {
    #[fsm(initial, handler = start, next(Done))]
    Pending,
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

#[derive(Debug, thiserror::Error)]
#[error("app error")]
struct AppError;
impl Classify for AppError {}

// The machine's error is AppError.
async fn start(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::io::Error> {
    Ok(Transition::next(Job::Done))
}

fn main() {}
