//! Deletion: finalizers and `deletionTimestamp`, preconditions, and the
//! cascade from a namespace or a CRD to the objects it contains.

use std::sync::Arc;

use serde_json::{Value, json};

use super::gc::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER, Propagation};
use super::meta::{finalizers, str_at};
use super::{
    Cluster, DeleteOptions, ListQuery, PROTECTED_NAMESPACES, crds, namespaces, not_found, present,
    timestamp,
};
use crate::resources::{GroupResource, ResourceDef};
use crate::status::{ApiError, Subject};

impl Cluster {
    /// Deletes an object: removed at once without finalizers, else marked
    /// with `deletionTimestamp`. Returns the object and whether it is gone.
    ///
    /// # Errors
    /// `NotFound`; `Conflict` when a precondition fails.
    pub fn delete(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
        now: jiff::Timestamp,
    ) -> Result<(Value, bool), ApiError> {
        let current = self
            .store
            .get(&def.group_resource(), ns, name)
            .ok_or_else(|| not_found(def, name))?;
        if def.group_resource() == namespaces() && PROTECTED_NAMESPACES.contains(&name) {
            return Err(ApiError::Forbidden(
                Subject::new("", "namespaces", name),
                format!("namespaces {name:?} is forbidden: this namespace may not be deleted"),
            ));
        }
        if let Some(uid) = &opts.uid {
            let actual = str_at(&current, "uid");
            if uid != actual {
                return Err(ApiError::Conflict(
                    Subject::new(&def.group, &def.kind, name),
                    format!(
                        "the UID in the precondition ({uid}) does not match the UID in record ({actual}). The object might have been deleted and then recreated"
                    ),
                ));
            }
        }
        if let Some(rv) = &opts.resource_version {
            let actual = str_at(&current, "resourceVersion");
            if rv != actual {
                return Err(ApiError::Conflict(
                    Subject::new(&def.group, &def.kind, name),
                    format!(
                        "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({actual}). The object might have been modified"
                    ),
                ));
            }
        }
        let policy = opts.propagation.unwrap_or_default();
        if opts.dry_run {
            return Ok(self.delete_dry_run(def, &current, policy, now));
        }
        Ok(self.delete_with_policy(def, ns, name, &current, policy, now))
    }

    /// Deletes every object of `def` in `ns` matching `q`; returns the list
    /// as it was read before the deletions, as kube-apiserver's
    /// `DeleteCollection` does: an object a finalizer holds is answered
    /// without its `deletionTimestamp`, a deleted one at its last version.
    ///
    /// # Errors
    /// As [`Cluster::list`].
    pub fn delete_collection(
        &mut self,
        def: &ResourceDef,
        ns: Option<&str>,
        q: &ListQuery,
        opts: &DeleteOptions,
        now: jiff::Timestamp,
    ) -> Result<Value, ApiError> {
        let list = self.list(def, ns, q)?;
        if let Some(items) = list["items"].as_array() {
            for item in items {
                let (ns, name) = (str_at(item, "namespace"), str_at(item, "name"));
                match self.delete(def, ns, name, opts, now) {
                    Ok(_) | Err(ApiError::NotFound(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(list)
    }

    /// What a delete would answer, changing nothing: an object that a
    /// finalizer (its own, or the one `policy` adds) or content would hold
    /// is answered marked for deletion; any other is answered gone.
    fn delete_dry_run(
        &self,
        def: &ResourceDef,
        current: &Value,
        policy: Propagation,
        now: jiff::Timestamp,
    ) -> (Value, bool) {
        let is_namespace = def.group_resource() == namespaces();
        let contains = is_namespace || def.group_resource() == crds();
        let added = match policy {
            _ if contains => None,
            Propagation::Orphan => Some(ORPHAN_FINALIZER),
            Propagation::Foreground => Some(FOREGROUND_FINALIZER),
            Propagation::Background => None,
        };
        let mut list = finalizers(current);
        if let Some(f) = added
            && !list.iter().any(|x| x == f)
        {
            list.push(f.into());
        }
        if !is_namespace && list.is_empty() && !self.has_content(def, current) {
            return (present(def, current), true);
        }
        let mut marked = current.clone();
        if !list.is_empty() {
            marked["metadata"]["finalizers"] = json!(list);
        }
        if marked["metadata"].get("deletionTimestamp").is_none() {
            marked["metadata"]["deletionTimestamp"] = json!(timestamp(now));
            if !is_namespace {
                marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            }
            if def.generation {
                let g = marked["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
                marked["metadata"]["generation"] = json!(g);
            }
            if is_namespace {
                marked["status"]["phase"] = json!("Terminating");
            }
        }
        (present(def, &marked), false)
    }

    pub(super) fn delete_object(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        current: &Value,
        now: jiff::Timestamp,
    ) -> (Value, bool) {
        let is_namespace = def.group_resource() == namespaces();
        // A namespace is emptied later by the namespace controller
        // (`finalize_namespaces`); a CRD's objects go at once.
        if !is_namespace {
            self.delete_content(def, current, now);
        }
        if !is_namespace && finalizers(current).is_empty() && !self.has_content(def, current) {
            let gone = self.remove_object(def, ns, name, current.clone());
            return (present(def, &gone), true);
        }
        if current["metadata"].get("deletionTimestamp").is_some() {
            return (present(def, current), false);
        }
        let mut marked = current.clone();
        marked["metadata"]["deletionTimestamp"] = json!(timestamp(now));
        if !is_namespace {
            marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        }
        if def.generation {
            let g = marked["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            marked["metadata"]["generation"] = json!(g);
        }
        if def.group.is_empty() && def.kind == "Namespace" {
            marked["status"]["phase"] = json!("Terminating");
        }
        let stored = self.store.put(&def.group_resource(), ns, name, marked);
        // Answered as marked, as the real server answers before its
        // controllers run.
        self.release_protection(def, ns, name, now);
        (present(def, &stored), false)
    }

    /// The namespace controller: empties every terminating namespace and
    /// removes those left with no content and no finalizers. Returns the
    /// namespaces removed. The server runs it after each namespace deletion,
    /// as the real controller does shortly after.
    pub fn finalize_namespaces(&mut self, now: jiff::Timestamp) -> Vec<String> {
        let Some(def) = self.registry.preferred(&namespaces()) else {
            return Vec::new();
        };
        let terminating: Vec<Arc<Value>> = self
            .store
            .list(&namespaces(), Some(""))
            .into_iter()
            .filter(|n| n["metadata"].get("deletionTimestamp").is_some())
            .collect();
        let mut removed = Vec::new();
        for ns in terminating {
            self.delete_content(&def, &ns, now);
            let name = str_at(&ns, "name").to_string();
            // Emptying may already have removed it (`finish_if_done`).
            let Some(current) = self.store.get(&namespaces(), "", &name) else {
                removed.push(name);
                continue;
            };
            if finalizers(&current).is_empty() && !self.has_content(&def, &current) {
                self.remove_object(&def, "", &name, (*current).clone());
                removed.push(name);
            }
        }
        removed
    }

    /// Objects a namespace or a CRD contains are deleted with it.
    pub(super) fn delete_content(
        &mut self,
        def: &ResourceDef,
        object: &Value,
        now: jiff::Timestamp,
    ) {
        for (gr, ns) in self.content_of(def, object) {
            let Some(child_def) = self.registry.preferred(&gr) else {
                continue;
            };
            for child in self.store.list(&gr, ns.as_deref()) {
                let (cns, cname) = (str_at(&child, "namespace"), str_at(&child, "name"));
                let (cns, cname) = (cns.to_string(), cname.to_string());
                self.delete_object(&child_def, &cns, &cname, &child, now);
            }
        }
    }

    /// The (resource, namespace) sets `object` contains: a namespace holds
    /// every namespaced object in it, a CRD every object of its resource.
    pub(super) fn content_of(
        &self,
        def: &ResourceDef,
        object: &Value,
    ) -> Vec<(GroupResource, Option<String>)> {
        if def.group_resource() == namespaces() {
            let ns = str_at(object, "name").to_string();
            self.store
                .resources()
                .into_iter()
                .filter(|gr| self.registry.preferred(gr).is_some_and(|d| d.namespaced))
                .map(|gr| (gr, Some(ns.clone())))
                .collect()
        } else if def.group_resource() == crds() {
            let gr = GroupResource {
                group: object["spec"]["group"].as_str().unwrap_or_default().into(),
                resource: object["spec"]["names"]["plural"]
                    .as_str()
                    .unwrap_or_default()
                    .into(),
            };
            vec![(gr, None)]
        } else {
            Vec::new()
        }
    }

    pub(super) fn has_content(&self, def: &ResourceDef, object: &Value) -> bool {
        self.content_of(def, object)
            .iter()
            .any(|(gr, ns)| self.store.any(gr, ns.as_deref()))
    }

    /// Removes an object for good, then finishes a terminating namespace or
    /// CRD that it was the last content of.
    pub(super) fn remove_object(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        last: Value,
    ) -> Arc<Value> {
        let gr = def.group_resource();
        let removed = self.store.remove(&gr, ns, name, last.clone());
        let was_stored = removed.is_some();
        let gone = removed.unwrap_or_else(|| Arc::new(last));
        self.collect_garbage(&gone, jiff::Timestamp::now());
        if was_stored {
            self.tokens_after_removal(def, &gone, jiff::Timestamp::now());
            self.default_account_after_removal(def, &gone, jiff::Timestamp::now());
            self.protection_after_removal(def, &gone, jiff::Timestamp::now());
        }
        if gr == crds() {
            if let Some((g, p)) = name.split_once('.').map(|(p, g)| (g, p)) {
                self.registry.remove(&GroupResource {
                    group: g.into(),
                    resource: p.into(),
                });
            }
        } else if def.custom {
            self.finish_if_done(&crds(), "", &format!("{}.{}", gr.resource, gr.group));
        }
        if def.namespaced {
            self.finish_if_done(&namespaces(), "", ns);
        }
        gone
    }

    pub(super) fn finish_if_done(&mut self, gr: &GroupResource, ns: &str, name: &str) {
        let Some(container) = self.store.get(gr, ns, name) else {
            return;
        };
        let Some(def) = self.registry.preferred(gr) else {
            return;
        };
        if container["metadata"].get("deletionTimestamp").is_some()
            && finalizers(&container).is_empty()
            && !self.has_content(&def, &container)
        {
            self.remove_object(&def, ns, name, (*container).clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Part;

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn cluster() -> Cluster {
        Cluster::new(100, 16, 7)
    }

    fn def(c: &Cluster, g: &str, p: &str) -> Arc<ResourceDef> {
        c.registry.get(g, "v1", p).unwrap()
    }

    #[test]
    fn finalizers_delay_removal() {
        let mut c = cluster();
        let d = def(&c, "", "configmaps");
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "finalizers": ["x/y"]}});
        c.create(&d, "default", body, false, now()).unwrap();
        let (o, gone) = c
            .delete(&d, "default", "a", &DeleteOptions::default(), now())
            .unwrap();
        assert!(!gone);
        assert!(o["metadata"]["deletionTimestamp"].is_string());
        let mut added = o.clone();
        added["metadata"]["finalizers"] = json!(["x/y", "new"]);
        let e = c
            .update(&d, "default", "a", added, Part::Main, false, now())
            .unwrap_err();
        assert_eq!(e.reason(), "Invalid");
        let mut cleared = o.clone();
        cleared["metadata"]["finalizers"] = json!([]);
        c.update(&d, "default", "a", cleared, Part::Main, false, now())
            .unwrap();
        assert_eq!(c.get(&d, "default", "a").unwrap_err().reason(), "NotFound");
    }

    #[test]
    fn namespace_deletion_takes_content() {
        let mut c = cluster();
        let ns = def(&c, "", "namespaces");
        let cm = def(&c, "", "configmaps");
        c.create(
            &ns,
            "",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t"}}),
            false,
            now(),
        )
        .unwrap();
        c.create(&cm, "t", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "finalizers": ["example.com/f"]}}), false, now()).unwrap();
        let (o, gone) = c
            .delete(&ns, "", "t", &DeleteOptions::default(), now())
            .unwrap();
        assert!(!gone);
        assert_eq!(o["status"]["phase"], "Terminating");
        assert!(
            c.get(&cm, "t", "a").is_ok(),
            "content goes with the controller"
        );
        assert!(
            c.finalize_namespaces(now()).is_empty(),
            "held by a finalizer"
        );
        assert!(c.get(&cm, "t", "a").unwrap()["metadata"]["deletionTimestamp"].is_string());
        let e = c
            .create(
                &cm,
                "t",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}),
                false,
                now(),
            )
            .unwrap_err();
        assert_eq!(e.reason(), "Forbidden");
        let mut a = c.get(&cm, "t", "a").unwrap();
        a["metadata"]["finalizers"] = json!(null);
        c.update(&cm, "t", "a", a, Part::Main, false, now())
            .unwrap();
        assert!(
            c.get(&ns, "", "t").is_err(),
            "namespace goes with its last object"
        );
    }

    #[test]
    fn empty_namespaces_go_when_the_controller_runs() {
        let mut c = cluster();
        let ns = def(&c, "", "namespaces");
        c.create(
            &ns,
            "",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "e"}}),
            false,
            now(),
        )
        .unwrap();
        let (o, gone) = c
            .delete(&ns, "", "e", &DeleteOptions::default(), now())
            .unwrap();
        assert!(!gone);
        assert_eq!(o["status"]["phase"], "Terminating");
        assert_eq!(c.finalize_namespaces(now()), vec!["e".to_string()]);
        assert!(c.get(&ns, "", "e").is_err());
    }

    #[test]
    fn dangling_owner_references_are_collected() {
        let mut c = cluster();
        let cm = def(&c, "", "configmaps");
        let owner = c
            .create(
                &cm,
                "default",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}}),
                false,
                now(),
            )
            .unwrap();
        let r = |name: &str, uid: &Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid});
        let live = r("owner", &owner["metadata"]["uid"]);
        let ghost = r("ghost", &json!("no-such-uid"));
        for (name, refs) in [("both", json!([live, ghost])), ("orphan", json!([ghost]))] {
            c.create(
                &cm,
                "default",
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "ownerReferences": refs}}),
                false,
                now(),
            )
            .unwrap();
        }
        assert_eq!(c.collect_dangling(now()), 2);
        assert_eq!(
            c.get(&cm, "default", "orphan").unwrap_err().reason(),
            "NotFound"
        );
        let both = c.get(&cm, "default", "both").unwrap();
        assert_eq!(both["metadata"]["ownerReferences"], json!([live]));
        assert_eq!(c.collect_dangling(now()), 0, "nothing left to do");
        // The owner's uid under another name is no owner.
        let wrong = r("impostor", &owner["metadata"]["uid"]);
        c.create(
            &cm,
            "default",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "misled", "ownerReferences": [wrong]}}),
            false,
            now(),
        )
        .unwrap();
        assert_eq!(c.collect_dangling(now()), 1);
        assert!(c.get(&cm, "default", "misled").is_err());
    }

    #[test]
    fn dry_run_delete_answers_what_a_delete_would_leave() {
        let mut c = cluster();
        let cm = def(&c, "", "configmaps");
        c.create(
            &cm,
            "default",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "finalizers": ["example.com/x"]}}),
            false,
            now(),
        )
        .unwrap();
        let opts = DeleteOptions {
            dry_run: true,
            propagation: Some(Propagation::Orphan),
            ..DeleteOptions::default()
        };
        let (o, gone) = c.delete(&cm, "default", "a", &opts, now()).unwrap();
        assert!(!gone);
        assert!(o["metadata"]["deletionTimestamp"].is_string());
        assert_eq!(
            o["metadata"]["finalizers"],
            json!(["example.com/x", "orphan"])
        );
        let stored = c.get(&cm, "default", "a").unwrap();
        assert!(stored["metadata"].get("deletionTimestamp").is_none());
        assert_eq!(
            stored["metadata"]["resourceVersion"],
            o["metadata"]["resourceVersion"]
        );
    }

    #[test]
    fn system_namespaces_cannot_be_deleted() {
        let mut c = cluster();
        let ns = def(&c, "", "namespaces");
        for name in PROTECTED_NAMESPACES {
            let e = c
                .delete(&ns, "", name, &DeleteOptions::default(), now())
                .unwrap_err();
            assert_eq!(e.reason(), "Forbidden");
            assert_eq!(e.code().as_u16(), 403);
        }
    }
}
