//! The read side: what tools that look at machines from outside the
//! operator need, without the machine's Rust type — the description of a
//! resource ([`ResourceInfo`]), the machine an operator publishes on its
//! CRD ([`PublishedMachine`]), where an object's record lives and how to
//! read, decode and show it ([`record_view`]), and how names go into API
//! URLs ([`names`]), the annotation commands arrive in
//! ([`COMMANDS_ANNOTATION`], read by [`read_commands`]), and for a
//! [`Watched`] resource the records of its objects as [`rows`], kept up
//! to date from watches ([`changes`]), with what an object says besides
//! ([`object`]: conditions, events). The operator's `status` and
//! `preflight`, its web view and `kubectl fsm` all read through here; its
//! errors are [`ReadError`].

pub mod changes;
mod commands;
mod error;
pub mod names;
pub mod object;
mod published;
pub mod record_view;
mod resource;
pub mod rows;
mod watched;

pub use commands::{COMMANDS_ANNOTATION, read_commands};
pub use error::ReadError;
pub use published::{MACHINE_ANNOTATION, PublishedMachine};
pub use record_view::Location;
pub use resource::ResourceInfo;
pub use watched::Watched;
