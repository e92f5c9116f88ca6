//! The smallest machine: context `()`, error `Infallible`, default policies.

use std::convert::Infallible;

use fsm_core::prelude::*;
use fsm_core::{OnDelete, SpecChange};

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = u32)]
enum Job {
    #[fsm(initial, handler = start, next(Done))]
    Pending,
    #[fsm(final, ready)]
    Done,
    #[fsm(failed)]
    Failed,
}

async fn start(cx: &mut Step<'_, Job>) -> Result<Transition<Job>, Infallible> {
    let () = *cx.context();
    Ok(Transition::next(Job::Done))
}

fn main() {
    let m = Job::machine();
    assert_eq!(m.validate(), Ok(()));
    assert_eq!(m.default_retry(), RetryPolicy::DEFAULT);
    assert_eq!(m.spec_change(), SpecChange::Restart);
    assert_eq!(m.delete_policy(), OnDelete::Nothing);
    assert!(!m.snapshots_spec() && !m.has_cleanup() && !m.needs_finalizer());
    let _: fn() -> Option<Infallible> = || None::<<Job as Fsm>::Error>;
    assert_eq!(
        Job::MERMAID,
        "stateDiagram-v2\n    [*] --> Pending\n    Pending --> Done\n    Pending --> Failed: exhausted, fail\n    Done --> [*]\n    Failed --> [*]\n"
    );
    assert_eq!(Job::MERMAID, Job::mermaid());
}
