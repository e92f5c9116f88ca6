//! `bucket`: an operator whose API evolves with objects in flight.
//!
//! Its first release served `storage.example.com/v1alpha1` (the size as
//! text, `"10Gi"`; [`previous`]). The current build serves `v1` (the size
//! in Gi and a region) as the storage version, and still serves
//! `v1alpha1`, converted by its webhook: the conversions are a `TryFrom`
//! and a `From` between the two types ([`api`]), and the machine's record
//! is carried through untouched. Buckets left half way by the first
//! release are finished by this one, each step run once.
//!
//! Its ready state declares admission rules: a serving bucket's region may
//! not change, its size may only grow, and it may not be deleted; the
//! operator's webhook refuses such writes at either version (the API
//! server converts a `v1alpha1` write to `v1` before asking). Once every
//! bucket is rewritten at `v1` (`migrate-storage`), a later build may drop
//! `v1alpha1`; `preflight` says when.
//!
//! ```text
//! $ bucket-operator crd --webhook-url https://127.0.0.1:9443/convert --webhook-ca-file ca.crt
//! $ bucket-operator run --webhook-addr 127.0.0.1:9443 --webhook-cert-dir certs --operator-user admin
//! $ bucket-operator migrate-storage
//! ```
//!
//! The story runs in `examples/tests/it/bucket.rs`, on the embedded API
//! server and on a real kube-apiserver; docs/evolving-your-api.md tells
//! it.

pub mod api;
mod backend;
pub mod previous;
mod state;

use std::collections::BTreeMap;

use operator_fsm::VersionOptions;
use operator_fsm::cli::{Operator, StoreKind};

pub use api::{BucketStatus, NotGi, v1, v1alpha1};
pub use backend::Backend;
pub use state::{BucketState, Never};

/// The annotation that lets a bucket go on from `Filling`: `yes`.
pub const GO_ANNOTATION: &str = "storage.example.com/fill";

/// Whether `annotations` let a bucket be filled.
fn may_fill(annotations: &BTreeMap<String, String>) -> bool {
    annotations.get(GO_ANNOTATION).map(String::as_str) == Some("yes")
}

/// The current build's command line: `v1` is the machine's (and the
/// storage) version, `v1alpha1` is served, deprecated, through the
/// conversion webhook.
pub fn operator() -> Operator<BucketState> {
    Operator::new("bucket-operator", StoreKind::Status).version_with::<v1alpha1::Bucket>(
        VersionOptions::default().deprecated("storage.example.com/v1alpha1 is deprecated; use v1"),
    )
}
