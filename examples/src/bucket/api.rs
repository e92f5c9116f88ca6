//! The Bucket resource at its two versions, and the conversion between
//! them (hub and spoke: `v1` is the hub, the version the machine reads).

use kube::CustomResource;
use operator_fsm::FsmStatus;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The status both versions share: the machine's record.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BucketStatus {
    /// The machine's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsm: Option<FsmStatus>,
}

/// The first version.
pub mod v1alpha1 {
    use super::*;

    /// A bucket as first released: its size as text (`"10Gi"`).
    #[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[kube(
        group = "storage.example.com",
        version = "v1alpha1",
        kind = "Bucket",
        namespaced,
        status = "BucketStatus"
    )]
    pub struct BucketSpec {
        /// The size, a whole number of Gi with the unit (`"10Gi"`).
        pub size: String,
    }
}

/// The current version: the hub.
pub mod v1 {
    use super::*;

    /// A bucket: its size in Gi, and the region it lives in.
    #[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[kube(
        group = "storage.example.com",
        version = "v1",
        kind = "Bucket",
        namespaced,
        status = "BucketStatus"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct BucketSpec {
        /// The size in Gi.
        pub storage_gi: u32,
        /// The region (`eu` for buckets made before regions existed).
        #[serde(default = "default_region")]
        pub region: String,
    }

    /// Where buckets of `v1alpha1` live.
    pub fn default_region() -> String {
        "eu".to_owned()
    }
}

/// A `v1alpha1` size that is not a whole number of Gi.
#[derive(Debug, thiserror::Error)]
#[error("size {0:?} is not a whole number of Gi (write it as \"10Gi\")")]
pub struct NotGi(pub String);

/// The old version to the hub: the size parsed, the region defaulted.
/// `metadata` and `.status.fsm` are carried by the framework.
impl TryFrom<v1alpha1::Bucket> for v1::Bucket {
    type Error = NotGi;

    fn try_from(old: v1alpha1::Bucket) -> Result<Self, NotGi> {
        let gi = old
            .spec
            .size
            .strip_suffix("Gi")
            .and_then(|n| n.parse().ok());
        let storage_gi = gi.ok_or_else(|| NotGi(old.spec.size.clone()))?;
        Ok(v1::Bucket::new(
            "",
            v1::BucketSpec {
                storage_gi,
                region: v1::default_region(),
            },
        ))
    }
}

/// The hub back to the old version (the region is not part of it).
impl From<v1::Bucket> for v1alpha1::Bucket {
    fn from(new: v1::Bucket) -> Self {
        let size = format!("{}Gi", new.spec.storage_gi);
        v1alpha1::Bucket::new("", v1alpha1::BucketSpec { size })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_convert_both_ways_and_a_bad_one_is_named() {
        let old = v1alpha1::Bucket::new(
            "b",
            v1alpha1::BucketSpec {
                size: "10Gi".into(),
            },
        );
        let new = v1::Bucket::try_from(old).unwrap();
        assert_eq!((new.spec.storage_gi, new.spec.region.as_str()), (10, "eu"));
        assert_eq!(v1alpha1::Bucket::from(new).spec.size, "10Gi");
        let bad = v1alpha1::Bucket::new(
            "b",
            v1alpha1::BucketSpec {
                size: "lots".into(),
            },
        );
        let error = v1::Bucket::try_from(bad).unwrap_err();
        assert_eq!(
            error.to_string(),
            "size \"lots\" is not a whole number of Gi (write it as \"10Gi\")"
        );
    }
}
