//! `#[fsm(crate = ...)]` for a core crate reached under another path.

mod engine {
    pub use fsm_core::*;
}

use engine::{Fsm, Step, Transition};
use serde::{Deserialize, Serialize};

#[derive(fsm_core::OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = (), crate = crate::engine)]
enum Job {
    #[fsm(initial, handler = start, next(Done))]
    Pending,
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

async fn start(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::next(Job::Done))
}

fn main() {
    assert_eq!(Job::machine().validate(), Ok(()));
    assert_eq!(Job::MERMAID, Job::mermaid());
}
