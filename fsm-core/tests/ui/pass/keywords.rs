//! The keyword values: `on_spec_change = continue`, `jitter = none`,
//! `on_delete = nothing`, and an explicit `on_spec_change = restart`.

use std::convert::Infallible;

use fsm_core::prelude::*;
use fsm_core::{Jitter, OnDelete, SpecChange};

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = (), on_spec_change = continue, on_delete = nothing)]
#[fsm(retry(jitter = none, max_attempts = 1))]
enum Keep {
    #[fsm(initial, handler = run, next(Done))]
    Pending,
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = (), on_spec_change = restart)]
enum Again {
    // Stays until its retries run out: it rests only by failing.
    #[fsm(initial, handler = again, retry(factor = 1, initial = "1d", max = "2d"), allow(never_rests))]
    Pending,
    #[fsm(failed)]
    Failed,
}

async fn run(_cx: &mut Step<'_, Keep>) -> Result<Transition<Keep>, Infallible> {
    Ok(Transition::next(Keep::Done))
}

async fn again(_cx: &mut Step<'_, Again>) -> Result<Transition<Again>, Infallible> {
    Ok(Transition::stay())
}

fn main() {
    let m = Keep::machine();
    assert_eq!(m.validate(), Ok(()));
    assert_eq!(m.spec_change(), SpecChange::Continue);
    assert_eq!(m.delete_policy(), OnDelete::Nothing);
    assert_eq!(m.default_retry().jitter(), Jitter::None);
    assert_eq!(m.default_retry().max_attempts(), 1);
    assert_eq!(Keep::MERMAID, Keep::mermaid());

    let m = Again::machine();
    assert_eq!(m.validate(), Ok(()));
    assert_eq!(m.spec_change(), SpecChange::Restart);
    let p = m.state("Pending").and_then(StateMeta::own_retry).unwrap();
    assert_eq!(p.factor(), 1.0);
    assert_eq!(p.max().as_secs(), 2 * 86_400);
    assert_eq!(Again::MERMAID, Again::mermaid());
}
