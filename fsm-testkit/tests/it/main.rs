//! fsm-testkit's integration tests, one binary for the whole crate.
//!
//! Each file beside this one was a test binary of its own; as modules of one
//! binary they link the crate's dependencies once instead of once per file
//! (docs/testing.md, "How the tests are built"). A test's name is its file's
//! module and its function: `cargo test -p fsm-testkit --test it -- FILE::`
//! runs one file's tests.

mod api_client;
mod bad_input;
mod common;
mod faults;
mod fidelity;
mod fuzz_parsers;
mod gc;
mod kubectl;
mod leases;
mod patches;
mod protobuf;
mod pruning;
mod reads;
mod runtime;
mod simulation;
mod test_cluster;
mod watch_properties;
