//! The webhooks the real server calls, called by the embedded one too:
//! a CRD's conversion webhook ([`conversion`]) and mutating and
//! validating admission webhooks ([`admission`]), over HTTPS ([`client`]).
//!
//! Webhooks are called from the HTTP handlers, outside the cluster's lock
//! (the cluster's verbs are synchronous): a read converts what the cluster
//! answers at the storage version, a write converts its body to the
//! storage version before the cluster stores it, and admission sees the
//! object a dry run of the write produced before the write is made.

pub mod admission;
pub mod client;
pub mod conversion;
