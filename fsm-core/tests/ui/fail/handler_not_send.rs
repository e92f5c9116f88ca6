use fsm_core::prelude::*;

use std::rc::Rc;

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

async fn pause() {}

// Holds an Rc across an await: the future cannot move between threads.
async fn start(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
    let shared = Rc::new(1);
    pause().await;
    drop(shared);
    Ok(Transition::next(Job::Done))
}

fn main() {}
