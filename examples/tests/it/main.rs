//! The examples' integration tests, one binary for the whole crate.
//!
//! Each file beside this one was a test binary of its own; as modules of one
//! binary they link the crate's dependencies once instead of once per file
//! (docs/testing.md, "How the tests are built"). A test's name is its file's
//! module and its function: `cargo test -p examples --test it -- FILE::` runs
//! one file's tests.

mod bucket;
mod common;
mod database;
mod demo;
mod diagram_geometry;
mod integration;
mod mutable_jar;
mod real_cluster;
mod shop;
mod web_view;
mod webpage;
