use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = (), version = 0)]
enum Job {
    #[fsm(initial, handler = run, next(Done))]
    Pending,
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

// `migrate` without a version above 1 is never asked.
#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = (), migrate = migrate)]
enum Task {
    #[fsm(initial, handler = task, next(Done))]
    Pending,
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

fn migrate(_: fsm_core::OldRecord<'_>) -> Result<fsm_core::Migrated<Task>, fsm_core::MigrationError> {
    Ok(fsm_core::Migrated::Keep)
}

async fn run(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::stay())
}

async fn task(_cx: &mut Step<'_, Task>) -> Result<Transition<Task>, std::convert::Infallible> {
    Ok(Transition::stay())
}

fn main() {}
