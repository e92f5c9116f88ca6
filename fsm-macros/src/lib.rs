//! `#[derive(OperatorFsm)]` for operator-fsm.
//!
//! Not implemented yet: the derive is tracked by its own issue. Until it
//! lands, machines implement `fsm_core::Fsm` by hand.
