//! Example operators written with operator-fsm.
//!
//! The Kubernetes examples arrive with their own issue; the in-memory
//! examples that need only `fsm-core` live here until then.
