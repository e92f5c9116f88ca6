//! Storage object in-use protection, as on every 1.20 cluster: the
//! admission plugin `StorageObjectInUseProtection` gives a new
//! PersistentVolumeClaim the finalizer `kubernetes.io/pvc-protection` and
//! a new PersistentVolume `kubernetes.io/pv-protection`; the controllers
//! `pvc-protection` and `pv-protection` of kube-controller-manager take
//! them off a claim being deleted that no running pod uses, and off a
//! volume being deleted that is not bound, so the object goes.
//!
//! Here the controllers run within the request that marks the object for
//! deletion, and again when a pod that held a claim is removed.

use serde_json::{Value, json};

use super::meta::{finalizers, str_at};
use super::{Cluster, Ownership, Part, present};
use crate::resources::{GroupResource, ResourceDef};

use crate::kind_defaults::{CLAIM_PROTECTION, VOLUME_PROTECTION};

const MANAGER: &str = "kube-controller-manager";

fn core(resource: &str) -> GroupResource {
    GroupResource {
        group: String::new(),
        resource: resource.into(),
    }
}

/// The protection finalizer of `def`'s objects, if they have one.
fn protection_of(def: &ResourceDef) -> Option<&'static str> {
    let gr = def.group_resource();
    if gr == core("persistentvolumeclaims") {
        Some(CLAIM_PROTECTION)
    } else if gr == core("persistentvolumes") {
        Some(VOLUME_PROTECTION)
    } else {
        None
    }
}

/// Whether `pod` (not finished) mounts the claim `claim`.
fn uses_claim(pod: &Value, claim: &str) -> bool {
    let finished = matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    );
    !finished
        && pod["spec"]["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v["persistentVolumeClaim"]["claimName"] == claim)
}

impl Cluster {
    /// After an object of `def` was marked for deletion: the protection
    /// controllers take their finalizer off a claim no pod uses or a
    /// volume not bound.
    pub(super) fn release_protection(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        now: jiff::Timestamp,
    ) {
        let Some(finalizer) = protection_of(def) else {
            return;
        };
        let Some(current) = self.store.get(&def.group_resource(), ns, name) else {
            return;
        };
        if current["metadata"].get("deletionTimestamp").is_none()
            || !finalizers(&current).iter().any(|f| f == finalizer)
        {
            return;
        }
        let in_use = if finalizer == CLAIM_PROTECTION {
            self.store
                .list(&core("pods"), Some(ns))
                .iter()
                .any(|p| uses_claim(p, name))
        } else {
            current["status"]["phase"] == "Bound"
        };
        if in_use {
            return;
        }
        let mut updated = present(def, &current);
        let kept: Vec<String> = finalizers(&current)
            .into_iter()
            .filter(|f| f != finalizer)
            .collect();
        updated["metadata"]["finalizers"] = json!(kept);
        let owner = Ownership::Update(MANAGER);
        if let Err(e) = self.update_as(def, ns, name, updated, Part::Main, false, now, &owner) {
            tracing::warn!(ns, name, error = %e, "removing a storage protection finalizer");
        }
    }

    /// After `gone` (an object of `def`) was removed: a pod's claims being
    /// deleted lose their protection if nothing else uses them.
    pub(super) fn protection_after_removal(
        &mut self,
        def: &ResourceDef,
        gone: &Value,
        now: jiff::Timestamp,
    ) {
        if def.group_resource() != core("pods") {
            return;
        }
        let Some(claims) = self.registry.preferred(&core("persistentvolumeclaims")) else {
            return;
        };
        let ns = str_at(gone, "namespace").to_string();
        let names: Vec<String> = gone["spec"]["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["persistentVolumeClaim"]["claimName"].as_str())
            .map(String::from)
            .collect();
        for name in names {
            self.release_protection(&claims, &ns, &name, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::DeleteOptions;

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000).unwrap()
    }

    #[test]
    fn a_claim_goes_once_no_pod_uses_it() {
        let mut c = Cluster::new(100, 16, 7);
        let claims = c.registry.get("", "v1", "persistentvolumeclaims").unwrap();
        let pods = c.registry.get("", "v1", "pods").unwrap();
        let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        let created = c.create(&claims, "default", claim, false, now()).unwrap();
        assert_eq!(created["metadata"]["finalizers"], json!([CLAIM_PROTECTION]));
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i"}],
                "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}});
        c.create(&pods, "default", pod, false, now()).unwrap();
        let (held, gone) = c
            .delete(&claims, "default", "data", &DeleteOptions::default(), now())
            .unwrap();
        assert!(!gone);
        assert!(held["metadata"]["deletionTimestamp"].is_string());
        assert!(
            c.get(&claims, "default", "data").is_ok(),
            "held while the pod uses it"
        );
        c.delete(&pods, "default", "p", &DeleteOptions::default(), now())
            .unwrap();
        assert!(
            c.get(&claims, "default", "data").is_err(),
            "gone with the pod"
        );
    }

    #[test]
    fn an_unbound_volume_goes_at_once() {
        let mut c = Cluster::new(100, 16, 7);
        let volumes = c.registry.get("", "v1", "persistentvolumes").unwrap();
        let volume = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}}});
        let created = c.create(&volumes, "", volume, false, now()).unwrap();
        assert_eq!(
            created["metadata"]["finalizers"],
            json!([VOLUME_PROTECTION])
        );
        c.delete(&volumes, "", "pv", &DeleteOptions::default(), now())
            .unwrap();
        assert!(c.get(&volumes, "", "pv").is_err());
    }
}
