//! The guide pages written against this crate, pulled in so that every
//! Rust block in them is compiled (and run, unless marked `no_run`) as a
//! doc test: `cargo test -p operator-fsm --doc guide`.

#[doc = include_str!("../../docs/tutorial.md")]
pub mod tutorial {}
