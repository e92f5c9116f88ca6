//! Batched commits: the machine opts in, one state opts out; and a machine
//! that opts in state by state.

use std::convert::Infallible;

use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = u32, batch_commits)]
enum Job {
    #[fsm(initial, handler = start, next(Charging))]
    Pending,
    /// Charges a card with the amount its predecessor chose.
    #[fsm(handler = charge, next(Done), commit_on_entry)]
    Charging { amount: u32 },
    #[fsm(final, ready)]
    Done,
    #[fsm(failed)]
    Failed,
}

async fn start(cx: &mut Step<'_, Job>) -> Result<Transition<Job>, Infallible> {
    Ok(Transition::next(Job::Charging {
        amount: *cx.resource(),
    }))
}

async fn charge(_cx: &mut Step<'_, Job>, _amount: &u32) -> Result<Transition<Job>, Infallible> {
    Ok(Transition::next(Job::Done))
}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = u32)]
enum Pipeline {
    #[fsm(initial, handler = first, next(Second))]
    First,
    #[fsm(handler = second, next(Done), batch_entry)]
    Second,
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

async fn first(_cx: &mut Step<'_, Pipeline>) -> Result<Transition<Pipeline>, Infallible> {
    Ok(Transition::next(Pipeline::Second))
}

async fn second(_cx: &mut Step<'_, Pipeline>) -> Result<Transition<Pipeline>, Infallible> {
    Ok(Transition::next(Pipeline::Done))
}

fn main() {
    let m = Job::machine();
    assert_eq!(m.validate(), Ok(()));
    assert!(m.batches_commits());
    let state = |name| m.state(name).unwrap();
    assert!(m.batches_entry(state("Pending")));
    assert!(!m.batches_entry(state("Charging")));
    assert!(m.batches_entry(state("Done")));

    let p = Pipeline::machine();
    assert!(!p.batches_commits());
    assert!(p.batches_entry(p.state("Second").unwrap()));
    assert!(!p.batches_entry(p.state("Done").unwrap()));
}
