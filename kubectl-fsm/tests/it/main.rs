//! kubectl-fsm's integration tests, one binary for the whole crate.
//!
//! Each file beside this one was a test binary of its own; as modules of one
//! binary they link the crate's dependencies once instead of once per file
//! (docs/testing.md, "How the tests are built"). A test's name is its file's
//! module and its function: `cargo test -p kubectl-fsm --test it -- FILE::`
//! runs one file's tests.

mod demo_serve;
mod describe_sample;
mod plugin;
mod plugin_commands;
