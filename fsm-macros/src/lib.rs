//! `#[derive(OperatorFsm)]` for operator-fsm.
//!
//! Being built under its own issue; until it lands, machines implement
//! `fsm_core::Fsm` by hand. The entry point exists so that `fsm-core` can
//! re-export it, and it says plainly that it is not there yet.

use proc_macro::TokenStream;

/// Implements `fsm_core::Fsm` for a state enum (not yet available).
#[proc_macro_derive(OperatorFsm, attributes(fsm))]
pub fn derive_operator_fsm(input: TokenStream) -> TokenStream {
    let _ = input;
    "compile_error!(\"#[derive(OperatorFsm)] is not implemented yet; implement fsm_core::Fsm by hand\");"
        .parse()
        .unwrap_or_default()
}
