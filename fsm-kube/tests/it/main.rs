//! fsm-kube's integration tests, one binary for the whole crate.
//!
//! Each file beside this one was a test binary of its own; as modules of one
//! binary they link the crate's dependencies once instead of once per file
//! (docs/testing.md, "How the tests are built"). A test's name is its file's
//! module and its function: `cargo test -p fsm-kube --test it -- FILE::` runs
//! one file's tests.
//!
//! `tests/sensitive.rs` stays a binary of its own: it installs the process's
//! global tracing subscriber at the most verbose level and reads everything the
//! process logs, which other tests in the same process would both disturb and
//! write into.

mod bad_input;
mod batched_commits;
mod cli;
mod commands;
mod common;
mod conditions;
mod converge_attr;
mod decode;
mod dependents;
mod dependents_cache;
mod dependents_lifecycle;
mod dependents_matching;
mod dependents_reads;
mod dependents_versions;
mod health;
mod leader;
mod lean;
mod manifests;
mod migrate_storage;
mod oversized;
mod own_write;
mod saga_scopes;
mod sharding;
mod status_store;
mod stores;
mod upgrade;
mod versions;
mod view_access;
mod view_guard;
