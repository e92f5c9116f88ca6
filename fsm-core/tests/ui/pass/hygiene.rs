//! Fields named like the generated bindings and functions named like the
//! trait's methods do not confuse the expansion; a generic handler fits.

use std::convert::Infallible;

use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = (), cleanup = cleanup)]
enum Job {
    #[fsm(initial, handler = handle, next(Working))]
    Pending,
    #[fsm(handler = work, compensate = compensate, next(Done))]
    Working { cx: u32, __fsm_cx: u32, __fsm_field_0: String },
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

async fn handle<S: Fsm>(_cx: &mut Step<'_, S>) -> Result<Transition<Job>, Infallible> {
    Ok(Transition::stay())
}

async fn work(
    _cx: &mut Step<'_, Job>,
    a: &u32,
    b: &u32,
    c: &String,
) -> Result<Transition<Job>, Infallible> {
    assert_eq!((*a, *b, c.as_str()), (1, 2, "three"));
    Ok(Transition::next(Job::Done))
}

async fn cleanup(_cx: &mut Step<'_, Job>, _state: &Job) -> Result<(), Infallible> {
    Ok(())
}

async fn compensate(_cx: &mut Step<'_, Job>, _: &u32, _: &u32, _: &String) -> Result<(), Infallible> {
    Ok(())
}

fn main() {
    assert_eq!(Job::machine().validate(), Ok(()));
    assert_eq!(Job::MERMAID, Job::mermaid());
    let clock = fsm_core::ManualClock::default();
    let state = Job::Working { cx: 1, __fsm_cx: 2, __fsm_field_0: "three".into() };
    let mut cx = Step::new(&(), &(), &clock, "Working");
    let fut = state.handle(&mut cx);
    let t = tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(fut);
    assert_eq!(t, Ok(Transition::next(Job::Done)));
}
