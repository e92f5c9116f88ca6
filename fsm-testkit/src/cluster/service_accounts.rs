//! The ServiceAccount controller of kube-controller-manager 1.20
//! (`serviceaccount`): every active namespace has a ServiceAccount
//! `default`. A namespace created gets one, and a `default` account
//! deleted from an active namespace is made again; the token controller
//! ([`super::tokens`]) then gives it its token Secret.
//!
//! The real controller makes it a moment after the namespace appears; here
//! it is made within the request that stored the namespace (or removed
//! the account), so a client that reads the account right after creating
//! a namespace finds it on the embedded server, and may have to wait for
//! it on a real one.

use serde_json::{Value, json};

use super::meta::str_at;
use super::{Cluster, Ownership, namespaces};
use crate::resources::{GroupResource, ResourceDef};

/// The name of every namespace's account.
pub const DEFAULT_ACCOUNT: &str = "default";

/// The field manager of the controller's writes.
const MANAGER: &str = "kube-controller-manager";

fn accounts() -> GroupResource {
    GroupResource {
        group: String::new(),
        resource: "serviceaccounts".into(),
    }
}

impl Cluster {
    /// After `stored` (an object of `def`) was stored: a namespace that is
    /// active gets its `default` ServiceAccount if it has none.
    pub(super) fn ensure_default_account_of(
        &mut self,
        def: &ResourceDef,
        stored: &Value,
        now: jiff::Timestamp,
    ) {
        if def.group_resource() == namespaces()
            && stored["metadata"].get("deletionTimestamp").is_none()
        {
            let ns = str_at(stored, "name").to_string();
            self.ensure_default_account(&ns, now);
        }
    }

    /// After `gone` (an object of `def`) was removed: a `default`
    /// ServiceAccount of an active namespace is made again.
    pub(super) fn default_account_after_removal(
        &mut self,
        def: &ResourceDef,
        gone: &Value,
        now: jiff::Timestamp,
    ) {
        if def.group_resource() == accounts() && str_at(gone, "name") == DEFAULT_ACCOUNT {
            let ns = str_at(gone, "namespace").to_string();
            self.ensure_default_account(&ns, now);
        }
    }

    /// Creates `ns`'s `default` ServiceAccount unless it exists or the
    /// namespace is absent or terminating. Failures are logged, as the
    /// real controller's are.
    fn ensure_default_account(&mut self, ns: &str, now: jiff::Timestamp) {
        let active = self
            .store
            .get(&namespaces(), "", ns)
            .is_some_and(|n| n["metadata"].get("deletionTimestamp").is_none());
        if !active || self.store.get(&accounts(), ns, DEFAULT_ACCOUNT).is_some() {
            return;
        }
        let Some(def) = self.registry.preferred(&accounts()) else {
            return;
        };
        let body = json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": DEFAULT_ACCOUNT, "namespace": ns},
        });
        let owner = Ownership::Update(MANAGER);
        if let Err(e) = self.create_as(&def, ns, body, false, now, &owner) {
            tracing::warn!(ns, error = %e, "creating the default ServiceAccount");
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
    fn every_namespace_has_a_default_account_with_a_token() {
        let mut c = Cluster::new(100, 16, 7);
        for ns in ["default", "kube-system", "kube-public"] {
            assert!(
                c.store.get(&accounts(), ns, DEFAULT_ACCOUNT).is_some(),
                "{ns}"
            );
        }
        let namespaces_def = c.registry.get("", "v1", "namespaces").unwrap();
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}});
        c.create(&namespaces_def, "", body, false, now()).unwrap();
        let account = c.store.get(&accounts(), "n", DEFAULT_ACCOUNT).unwrap();
        assert_eq!(account["secrets"].as_array().map(Vec::len), Some(1));
        // Deleted, it comes back (with a new uid).
        let def = c.registry.get("", "v1", "serviceaccounts").unwrap();
        c.delete(&def, "n", DEFAULT_ACCOUNT, &DeleteOptions::default(), now())
            .unwrap();
        let again = c.store.get(&accounts(), "n", DEFAULT_ACCOUNT).unwrap();
        assert_ne!(again["metadata"]["uid"], account["metadata"]["uid"]);
    }

    #[test]
    fn a_dry_run_namespace_gets_nothing() {
        let mut c = Cluster::new(100, 16, 7);
        let namespaces_def = c.registry.get("", "v1", "namespaces").unwrap();
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "d"}});
        c.create(&namespaces_def, "", body, true, now()).unwrap();
        assert!(c.store.get(&accounts(), "d", DEFAULT_ACCOUNT).is_none());
    }
}
