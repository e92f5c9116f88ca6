use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = (), version = 2, migrate = migrate)]
enum Job {
    #[fsm(initial, handler = run, next(Done))]
    Pending,
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

// Returns the state itself instead of `Result<Migrated<Job>, MigrationError>`.
fn migrate(_: fsm_core::OldRecord<'_>) -> Job {
    Job::Pending
}

async fn run(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::stay())
}

fn main() {}
