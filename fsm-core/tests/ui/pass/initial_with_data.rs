//! A data-carrying initial state starts with its fields' `Default`;
//! `on_spec_change = compensate_and_restart`; a cleanup that reads the state.

use std::convert::Infallible;

use fsm_core::prelude::*;
use fsm_core::SpecChange;

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = (), on_spec_change = compensate_and_restart, cleanup = tidy)]
enum Order {
    #[fsm(initial, handler = place, compensate = cancel, next(Placed))]
    Placing { request_id: Option<String>, tries: u32 },
    #[fsm(final)]
    Placed { order_id: String },
    #[fsm(failed)]
    Failed,
}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = ())]
enum Pair {
    #[fsm(initial, handler = pair, next(Done))]
    Start(Vec<u8>, bool),
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

async fn place(
    cx: &mut Step<'_, Order>,
    request_id: &Option<String>,
    _tries: &u32,
) -> Result<Transition<Order>, Infallible> {
    let id = request_id.clone().unwrap_or_else(|| "req-1".into());
    let _ = cx.state_name();
    Ok(Transition::next(Order::Placed { order_id: format!("o-{id}") }))
}

async fn cancel(_cx: &mut Step<'_, Order>, _: &Option<String>, _: &u32) -> Result<(), Infallible> {
    Ok(())
}

async fn tidy(_cx: &mut Step<'_, Order>, state: &Order) -> Result<(), Infallible> {
    let _ = state.state_name();
    Ok(())
}

async fn pair(_cx: &mut Step<'_, Pair>, _: &Vec<u8>, _: &bool) -> Result<Transition<Pair>, Infallible> {
    Ok(Transition::next(Pair::Done))
}

fn main() {
    let m = Order::machine();
    assert_eq!(m.validate(), Ok(()));
    assert_eq!(m.spec_change(), SpecChange::CompensateAndRestart);
    assert!(m.state("Placing").unwrap().has_data());
    assert_eq!(
        Order::initial_state(),
        Some(Order::Placing { request_id: None, tries: 0 })
    );
    assert_eq!(Order::unit_state("Placing"), None);
    assert_eq!(Pair::initial_state(), Some(Pair::Start(Vec::new(), false)));
    assert_eq!(Pair::machine().validate(), Ok(()));
}
