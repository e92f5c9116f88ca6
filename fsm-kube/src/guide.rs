//! The guide in `docs/`, pulled in here so that every Rust block in it is
//! compiled (and run, unless marked `no_run`) as a doc test:
//! `cargo test -p fsm-kube --doc guide`. (The tutorial, written against
//! the `operator-fsm` crate, is tested there.)

#[doc = include_str!("../../docs/concepts.md")]
pub mod concepts {}

#[doc = include_str!("../../docs/troubleshooting.md")]
pub mod troubleshooting {}

#[doc = include_str!("../../docs/served-kinds.md")]
pub mod served_kinds {}

#[doc = include_str!("../../docs/tools.md")]
pub mod tools {}

#[doc = include_str!("../../docs/conformance.md")]
pub mod conformance {}

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

#[doc = include_str!("../../docs/evolving-your-api.md")]
pub mod evolving_your_api {}

#[doc = include_str!("../../docs/dependents.md")]
pub mod dependents {}
