//! The cross-crate integration tests (package `integration-tests`), one
//! binary for the whole crate.
//!
//! Each file beside this one was a test binary of its own; as modules of one
//! binary they link the crate's dependencies once instead of once per file
//! (docs/testing.md, "How the tests are built"). A test's name is its file's
//! module and its function: `cargo test -p integration-tests --test it --
//! FILE::` runs one file's tests.
//!
//! `tests/sharding_proof.rs` stays a binary of its own: it runs operator
//! processes that share work through Leases and checks how evenly they
//! share it, so it must run alone, not beside this binary's other tests
//! (cargo runs a binary's tests in parallel), whose load delays Lease
//! renewals and skews the shares.

mod conformance;
mod derive_vs_hand;
mod embedded_webhooks;
mod hand_written_machine;
mod real_cluster;
