//! The operator's web view ([`web`]): the objects of a resource with
//! their records, kept up to date from watches, served as pages behind an
//! access check ([`access`]). What it shows it reads through
//! [`crate::records`] (rows, changes, an object's conditions and events),
//! as `kubectl fsm` does: no machine type is needed, and the data of
//! sensitive states (or of states the published graph does not know) is
//! never shown.

pub mod access;
mod page;
mod timeline;
pub mod web;

pub use crate::records::Watched;
