//! The guide in `docs/`, pulled in here so that every Rust block in it is
//! compiled (and run, unless marked `no_run`) as a doc test:
//! `cargo test -p fsm-kube --doc guide`. (`docs/concepts.md` is the crate's
//! own documentation, tested with it; the tutorial, written against the
//! `operator-fsm` crate, is tested there.)

#[doc = include_str!("../../docs/attributes.md")]
pub mod attributes {}

#[doc = include_str!("../../docs/stores.md")]
pub mod stores {}

#[doc = include_str!("../../docs/observability.md")]
pub mod observability {}

#[doc = include_str!("../../docs/deploying.md")]
pub mod deploying {}

#[doc = include_str!("../../docs/comparison.md")]
pub mod comparison {}

#[doc = include_str!("../../docs/README.md")]
pub mod index {}

#[doc = include_str!("../../docs/testing.md")]
pub mod testing {}

#[doc = include_str!("../../docs/semantics.md")]
pub mod semantics {}

#[doc = include_str!("../../docs/lifecycle.md")]
pub mod lifecycle {}

#[doc = include_str!("../../docs/upgrading.md")]
pub mod upgrading {}

#[doc = include_str!("../../docs/dependents.md")]
pub mod dependents {}
