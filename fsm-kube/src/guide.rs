//! The guide in `docs/`, pulled in here so that every Rust block in it is
//! compiled (and run, unless marked `no_run`) as a doc test:
//! `cargo test -p fsm-kube --doc guide`.

#[doc = include_str!("../../docs/tutorial.md")]
pub mod tutorial {}
