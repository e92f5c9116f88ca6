//! What `preflight` says about the resource's API versions: the versions
//! objects may still be stored at (the CRD's `status.storedVersions`)
//! against the versions this build's CRD has.
//!
//! The API server keeps each object at the storage version of the day it
//! was last written; a version can leave the CRD only once no object is
//! stored at it, and the server refuses a CRD whose `spec.versions` lacks
//! a version still in `status.storedVersions`. Which objects are at which
//! version the API does not tell: `migrate-storage` rewrites them all.
//!
//! ```
//! use fsm_kube::cli::ApiVersions;
//! use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
//!
//! let crd = |versions: &[(&str, bool)], stored: &[&str]| -> CustomResourceDefinition {
//!     serde_json::from_value(serde_json::json!({
//!         "metadata": {"name": "databases.example.io"},
//!         "spec": {
//!             "group": "example.io",
//!             "names": {"kind": "Database", "plural": "databases"},
//!             "scope": "Namespaced",
//!             "versions": versions.iter().map(|(name, storage)| serde_json::json!({
//!                 "name": name, "served": true, "storage": storage,
//!             })).collect::<Vec<_>>(),
//!         },
//!         "status": {"storedVersions": stored},
//!     }))
//!     .unwrap()
//! };
//! // In the cluster: v1 is the storage version, objects may still be at v1alpha1.
//! let cluster = crd(&[("v1alpha1", false), ("v1", true)], &["v1alpha1", "v1"]);
//! // This build serves v1 only.
//! let build = crd(&[("v1", true)], &[]);
//! let check = ApiVersions::judge(&cluster, &build, 12);
//! assert_eq!(check.dropped_while_stored, ["v1alpha1"]);
//! assert!(!check.allows_this_build());
//! assert!(check.describe().contains("migrate-storage"));
//! ```

use std::fmt::Write as _;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Serialize;

/// The cluster's stored versions of the resource, judged against this
/// build's CRD.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiVersions {
    /// The CRD's name (`plural.group`).
    pub crd: String,
    /// The versions objects may be stored at (`status.storedVersions`).
    pub stored_versions: Vec<String>,
    /// The cluster's storage version now.
    pub storage_version: Option<String>,
    /// The versions this build's CRD has.
    pub build_versions: Vec<String>,
    /// This build's storage version.
    pub build_storage_version: Option<String>,
    /// Stored versions this build's CRD drops: the server refuses the
    /// CRD, and objects at them would be unreadable. Blocks the upgrade.
    pub dropped_while_stored: Vec<String>,
    /// Stored versions other than this build's storage version: objects
    /// `migrate-storage` must rewrite before a build can drop them.
    pub to_migrate: Vec<String>,
    /// How many objects of the kind exist (any of them may be at a
    /// version in `to_migrate`).
    pub objects: usize,
}

impl ApiVersions {
    /// Judges the `cluster`'s CRD (its `status.storedVersions`) against
    /// `build`'s, with `objects` objects of the kind in the cluster.
    pub fn judge(
        cluster: &CustomResourceDefinition,
        build: &CustomResourceDefinition,
        objects: usize,
    ) -> Self {
        let stored_versions = cluster
            .status
            .as_ref()
            .and_then(|status| status.stored_versions.clone())
            .unwrap_or_default();
        let build_versions: Vec<String> = build
            .spec
            .versions
            .iter()
            .map(|version| version.name.clone())
            .collect();
        let build_storage_version = storage_of(build);
        let dropped_while_stored = stored_versions
            .iter()
            .filter(|stored| !build_versions.contains(stored))
            .cloned()
            .collect();
        let to_migrate = stored_versions
            .iter()
            .filter(|stored| Some(*stored) != build_storage_version.as_ref())
            .cloned()
            .collect();
        ApiVersions {
            crd: cluster.metadata.name.clone().unwrap_or_default(),
            stored_versions,
            storage_version: storage_of(cluster),
            build_versions,
            build_storage_version,
            dropped_while_stored,
            to_migrate,
            objects,
        }
    }

    /// Whether this build's CRD keeps every version objects may be
    /// stored at.
    pub fn allows_this_build(&self) -> bool {
        self.dropped_while_stored.is_empty()
    }

    /// Whether there is nothing to say: objects are stored at one
    /// version, the one the cluster and this build store at.
    pub fn is_settled(&self) -> bool {
        self.to_migrate.is_empty()
            && self.dropped_while_stored.is_empty()
            && self.storage_version == self.build_storage_version
    }

    /// A paragraph for a person: what is stored where, and what to do;
    /// empty when [settled](Self::is_settled).
    pub fn describe(&self) -> String {
        if self.is_settled() {
            return String::new();
        }
        let mut out = format!(
            "API versions of {}: objects may be stored at {}",
            self.crd,
            list(&self.stored_versions)
        );
        if let Some(storage) = &self.storage_version {
            let _ = write!(out, "; the cluster stores new writes at {storage}");
        }
        out.push_str(".\n");
        if let (Some(now), Some(build)) = (&self.storage_version, &self.build_storage_version)
            && now != build
        {
            let _ = writeln!(
                out,
                "This build stores at {build}: once its CRD is applied, every write moves an \
                 object to {build}."
            );
        }
        if !self.dropped_while_stored.is_empty() {
            let _ = writeln!(
                out,
                "CANNOT UPGRADE: this build's CRD drops {}, at which objects may still be \
                 stored (the API server refuses the CRD). Run `migrate-storage` with the \
                 build now running first: it rewrites all {} object(s) at the storage version \
                 and then removes the old versions from status.storedVersions.",
                list(&self.dropped_while_stored),
                self.objects
            );
        } else if !self.to_migrate.is_empty() {
            let _ = writeln!(
                out,
                "Before a build drops {}: run `migrate-storage` (it rewrites all {} object(s), \
                 since the API does not tell which are still stored at an old version).",
                list(&self.to_migrate),
                self.objects
            );
        }
        out
    }
}

/// The storage version of `crd`, if it has one.
pub(super) fn storage_of(crd: &CustomResourceDefinition) -> Option<String> {
    crd.spec
        .versions
        .iter()
        .find(|version| version.storage)
        .map(|version| version.name.clone())
}

fn list(versions: &[String]) -> String {
    if versions.is_empty() {
        "no version".to_owned()
    } else {
        versions.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(versions: &[(&str, bool)], stored: &[&str]) -> CustomResourceDefinition {
        let versions: Vec<serde_json::Value> = versions
            .iter()
            .map(|(name, storage)| {
                serde_json::json!({"name": name, "served": true, "storage": storage})
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "databases.example.io"},
            "spec": {
                "group": "example.io",
                "names": {"kind": "Database", "plural": "databases"},
                "scope": "Namespaced",
                "versions": versions,
            },
            "status": {"storedVersions": stored},
        }))
        .expect("a CRD")
    }

    #[test]
    fn one_stored_version_kept_by_the_build_allows_it_and_needs_nothing() {
        let check = ApiVersions::judge(
            &crd(&[("v1", true)], &["v1"]),
            &crd(&[("v1", true)], &[]),
            3,
        );
        assert!(check.allows_this_build());
        assert!(check.to_migrate.is_empty());
        assert!(check.is_settled());
        assert_eq!(check.describe(), "", "nothing to say");
    }

    #[test]
    fn a_build_moving_storage_to_a_new_version_is_allowed_and_says_what_follows() {
        let cluster = crd(&[("v1alpha1", true)], &["v1alpha1"]);
        let build = crd(&[("v1alpha1", false), ("v1", true)], &[]);
        let check = ApiVersions::judge(&cluster, &build, 2);
        assert!(check.allows_this_build());
        assert_eq!(check.to_migrate, ["v1alpha1"]);
        let text = check.describe();
        assert!(text.contains("This build stores at v1"), "{text}");
        assert!(text.contains("Before a build drops v1alpha1"), "{text}");
    }

    #[test]
    fn dropping_a_version_objects_may_be_stored_at_blocks_the_build() {
        let cluster = crd(&[("v1alpha1", false), ("v1", true)], &["v1alpha1", "v1"]);
        let check = ApiVersions::judge(&cluster, &crd(&[("v1", true)], &[]), 7);
        assert!(!check.allows_this_build());
        assert_eq!(check.dropped_while_stored, ["v1alpha1"]);
        assert!(check.describe().contains("CANNOT UPGRADE"));
        assert!(check.describe().contains("all 7 object(s)"));
    }

    #[test]
    fn after_migration_the_same_build_is_allowed() {
        let cluster = crd(&[("v1alpha1", false), ("v1", true)], &["v1"]);
        let check = ApiVersions::judge(&cluster, &crd(&[("v1", true)], &[]), 7);
        assert!(check.allows_this_build());
        assert!(check.to_migrate.is_empty());
    }
}
