//! The read side: what tools that look at machines from outside the
//! operator need, without the machine's Rust type — the description of a
//! resource ([`ResourceInfo`]), the machine an operator publishes on its
//! CRD ([`PublishedMachine`]), where an object's record lives and how to
//! read, decode and show it ([`record_view`]), and how names go into API
//! URLs ([`names`]), and the annotation commands arrive in
//! ([`COMMANDS_ANNOTATION`], read by [`read_commands`]). The operator's
//! `status` and `preflight`, its web view and `kubectl fsm` all read
//! through here; its errors are [`ReadError`].

mod commands;
mod error;
pub mod names;
mod published;
pub mod record_view;
mod resource;

pub use commands::{COMMANDS_ANNOTATION, read_commands};
pub use error::ReadError;
pub use published::{MACHINE_ANNOTATION, PublishedMachine};
pub use record_view::Location;
pub use resource::ResourceInfo;
