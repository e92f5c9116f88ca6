//! The garbage collector: owner references and the three propagation
//! policies of a delete.
//!
//! - `Background` (the default): the owner goes as it would without
//!   dependents; once it is removed from the store, every object whose
//!   owner references now all name absent owners is deleted in turn (a
//!   dependent with another owner left only loses the reference to the gone
//!   one).
//! - `Foreground`: an owner with dependents gets `deletionTimestamp` and the
//!   `foregroundDeletion` finalizer; its dependents are deleted (in the
//!   foreground too); the finalizer is removed, and the owner with it, once
//!   no dependent with `blockOwnerDeletion: true` is left.
//! - `Orphan`: the owner's dependents lose their reference to it, and the
//!   owner goes.
//!
//! # Caveats
//! The real garbage collector runs asynchronously; here it runs within the
//! request that removes the owner, so a client sees the dependents' `DELETED`
//! events right after the owner's. Dangling references (an owner that
//! never existed, or went while the collector did not look) are found by
//! [`Cluster::collect_dangling`], which the server runs shortly after a
//! write that stores owner references; it looks an owner up by name and
//! uid, as the real collector does. Deleting an owner collects the
//! dependents that name its uid.

use serde_json::{Value, json};

use super::meta::{finalizers, str_at};
use super::{Cluster, present};
use crate::resources::{GroupResource, ResourceDef};
use crate::status::Cause;

/// The finalizer that holds an owner deleted in the foreground.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// The finalizer that asks the garbage collector to orphan dependents.
pub const ORPHAN_FINALIZER: &str = "orphan";

/// `DeleteOptions.propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// Dependents are deleted after the owner is gone (the default).
    #[default]
    Background,
    /// The owner waits, terminating, until its blocking dependents are gone.
    Foreground,
    /// Dependents keep living, without their reference to the owner.
    Orphan,
}

impl Propagation {
    /// The policy named `name` (`Background`, `Foreground`, `Orphan`).
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "Background" => Some(Self::Background),
            "Foreground" => Some(Self::Foreground),
            "Orphan" => Some(Self::Orphan),
            _ => None,
        }
    }
}

/// The finalizers a built-in kind may name without a `/` (core
/// validation's `standardFinalizers`).
const STANDARD_FINALIZERS: [&str; 3] = ["kubernetes", ORPHAN_FINALIZER, FOREGROUND_FINALIZER];

/// What the real server's `ValidateObjectMeta` says about `meta`'s owner
/// references (every reference's missing parts, an Event owner, a second
/// controller).
pub(super) fn owner_reference_causes(meta: &serde_json::Map<String, Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let text = |r: &Value, k: &str| {
        r.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let refs = meta
        .get("ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut controller: Option<String> = None;
    for r in &refs {
        let api_version = text(r, "apiVersion");
        let version = api_version.rsplit('/').next().unwrap_or_default();
        let checks = [
            (
                "apiVersion",
                api_version.clone(),
                version.is_empty(),
                "version must not be empty",
            ),
            (
                "kind",
                text(r, "kind"),
                text(r, "kind").is_empty(),
                "kind must not be empty",
            ),
            (
                "name",
                text(r, "name"),
                text(r, "name").is_empty(),
                "name must not be empty",
            ),
            (
                "uid",
                text(r, "uid"),
                text(r, "uid").is_empty(),
                "uid must not be empty",
            ),
        ];
        for (field, value, bad, why) in checks {
            if bad {
                causes.push(Cause::invalid(
                    &format!("metadata.ownerReferences.{field}"),
                    &value,
                    why,
                ));
            }
        }
        if api_version == "v1" && text(r, "kind") == "Event" {
            causes.push(Cause::invalid(
                "metadata.ownerReferences",
                &r.to_string(),
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if r.get("controller") == Some(&json!(true)) {
            let name = text(r, "name");
            match &controller {
                Some(first) => causes.push(Cause {
                    reason: "FieldValueInvalid".into(),
                    message: format!(
                        "Invalid value: {}: Only one reference can have Controller set to true. Found \"true\" in references for {first} and {name}",
                        Value::Array(refs.clone())
                    ),
                    field: "metadata.ownerReferences".into(),
                }),
                None => controller = Some(name),
            }
        }
    }
    causes
}

/// The finalizers of `meta`, as text.
fn finalizer_list(meta: &serde_json::Map<String, Value>) -> Vec<String> {
    meta.get("finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|f| f.as_str().map_or_else(|| f.to_string(), String::from))
        .collect()
}

/// What apimachinery's `ValidateFinalizers` says about `meta`'s
/// finalizers: each one's qualified-name problems (on the path
/// `metadata.finalizers`), then `orphan` with `foregroundDeletion`.
pub(super) fn finalizer_causes(meta: &serde_json::Map<String, Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let list = finalizer_list(meta);
    for f in &list {
        for problem in crate::validation::qualified_name_problems(f) {
            causes.push(Cause::invalid("metadata.finalizers", f, &problem));
        }
    }
    if list.iter().any(|f| f == ORPHAN_FINALIZER) && list.iter().any(|f| f == FOREGROUND_FINALIZER)
    {
        causes.push(Cause {
            reason: "FieldValueInvalid".into(),
            message: format!(
                "Invalid value: []string{{{}}}: finalizer {ORPHAN_FINALIZER} and {FOREGROUND_FINALIZER} cannot be both set",
                list.iter().map(|f| format!("{f:?}")).collect::<Vec<_>>().join(", ")
            ),
            field: "metadata.finalizers".into(),
        });
    }
    causes
}

/// What core validation adds about a built-in kind's finalizers
/// (`validateKubeFinalizerName`): each one without `/` that is not a
/// standard one, on its index. Custom resources get none.
pub(super) fn kube_finalizer_causes(
    def: &ResourceDef,
    meta: &serde_json::Map<String, Value>,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    if !def.custom {
        for (i, f) in finalizer_list(meta).iter().enumerate() {
            if !f.contains('/') && !STANDARD_FINALIZERS.contains(&f.as_str()) {
                causes.push(Cause::invalid(
                    &format!("metadata.finalizers[{i}]"),
                    f,
                    "name is neither a standard finalizer name nor is it fully qualified",
                ));
            }
        }
    }
    causes
}

/// A stored object's identity: resource, namespace, name.
type Key = (GroupResource, String, String);

/// The owner uids of `object`'s `ownerReferences`, with whether each blocks
/// the owner's foreground deletion.
fn owner_refs(object: &Value) -> Vec<(String, bool)> {
    object["metadata"]["ownerReferences"]
        .as_array()
        .map(|refs| {
            refs.iter()
                .filter_map(|r| {
                    let uid = r["uid"].as_str()?;
                    Some((uid.to_string(), r["blockOwnerDeletion"] == json!(true)))
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Cluster {
    /// Every object with an owner reference to `uid`, with whether that
    /// reference blocks the owner's deletion.
    fn dependents_of(&self, uid: &str) -> Vec<(Key, Value, bool)> {
        let mut out = Vec::new();
        if uid.is_empty() {
            return out;
        }
        for gr in self.store.resources() {
            for o in self.store.list(&gr, None) {
                if let Some((_, block)) = owner_refs(&o).into_iter().find(|(u, _)| u == uid) {
                    let key = (
                        gr.clone(),
                        str_at(&o, "namespace").to_string(),
                        str_at(&o, "name").to_string(),
                    );
                    out.push((key, (*o).clone(), block));
                }
            }
        }
        out
    }

    /// Whether an object with this uid is stored (owners are looked up by
    /// uid in every resource, as an owner reference names no namespace).
    fn uid_exists(&self, uid: &str) -> bool {
        self.store.by_uid(uid).is_some()
    }

    /// Deletes `current` with `policy`. Returns the object as answered and
    /// whether it is gone.
    pub(super) fn delete_with_policy(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        current: &serde_json::Value,
        policy: Propagation,
        now: jiff::Timestamp,
    ) -> (Value, bool) {
        let uid = str_at(current, "uid").to_string();
        let contains =
            def.group_resource() == super::namespaces() || def.group_resource() == super::crds();
        let orphan = policy == Propagation::Orphan
            || finalizers(current).iter().any(|f| f == ORPHAN_FINALIZER);
        if contains || !(orphan || policy == Propagation::Foreground) {
            return self.delete_object(def, ns, name, current, now);
        }
        if orphan {
            // As the real server: the owner is answered held by the `orphan`
            // finalizer, the collector strips the references, then lets go.
            let answer = self.hold(def, ns, name, current, ORPHAN_FINALIZER, now);
            self.orphan_dependents(&uid);
            self.release(def, ns, name, ORPHAN_FINALIZER);
            return (answer, false);
        }
        // Foreground: hold the owner, then delete its dependents. The answer
        // is the held owner, as the real server's (its collector runs
        // afterwards).
        let answer = self.hold(def, ns, name, current, FOREGROUND_FINALIZER, now);
        for ((dgr, dns, dname), dependent, _) in self.dependents_of(&uid) {
            let Some(ddef) = self.registry.preferred(&dgr) else {
                continue;
            };
            self.delete_with_policy(
                &ddef,
                &dns,
                &dname,
                &dependent,
                Propagation::Foreground,
                now,
            );
        }
        self.release_foreground(&uid);
        (answer, false)
    }

    /// Stores `current` as being deleted, held by `finalizer`; returns it
    /// as answered.
    fn hold(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        current: &Value,
        finalizer: &str,
        now: jiff::Timestamp,
    ) -> Value {
        let mut held = current.clone();
        let mut list = finalizers(&held);
        if !list.iter().any(|f| f == finalizer) {
            list.push(finalizer.into());
        }
        held["metadata"]["finalizers"] = json!(list);
        if held["metadata"].get("deletionTimestamp").is_none() {
            held["metadata"]["deletionTimestamp"] = json!(super::timestamp(now));
            held["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            if def.generation {
                let g = held["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
                held["metadata"]["generation"] = json!(g);
            }
        }
        present(def, &self.store.put(&def.group_resource(), ns, name, held))
    }

    /// Removes `finalizer` from a held object, and the object with it when
    /// nothing else holds it.
    fn release(&mut self, def: &ResourceDef, ns: &str, name: &str, finalizer: &str) {
        let gr = def.group_resource();
        let Some(held) = self.store.get(&gr, ns, name) else {
            return;
        };
        let mut released = (*held).clone();
        let left: Vec<String> = finalizers(&held)
            .into_iter()
            .filter(|f| f != finalizer)
            .collect();
        if left.is_empty() {
            if let Some(meta) = released["metadata"].as_object_mut() {
                meta.remove("finalizers");
            }
            if !self.has_content(def, &released) {
                self.remove_object(def, ns, name, released);
                return;
            }
        } else {
            released["metadata"]["finalizers"] = json!(left);
        }
        self.store.put(&gr, ns, name, released);
    }

    /// Removes the owner reference to `uid` from every dependent.
    fn orphan_dependents(&mut self, uid: &str) {
        for ((gr, ns, name), mut dependent, _) in self.dependents_of(uid) {
            if let Some(refs) = dependent["metadata"]["ownerReferences"].as_array_mut() {
                refs.retain(|r| r["uid"].as_str() != Some(uid));
                if refs.is_empty()
                    && let Some(meta) = dependent["metadata"].as_object_mut()
                {
                    meta.remove("ownerReferences");
                }
            }
            self.store.put(&gr, &ns, &name, dependent);
        }
    }

    /// After `removed` was removed from the store: collects its dependents
    /// (background), and releases owners of it deleted in the foreground.
    pub(super) fn collect_garbage(&mut self, removed: &Value, now: jiff::Timestamp) {
        let uid = str_at(removed, "uid").to_string();
        for ((gr, ns, name), dependent, _) in self.dependents_of(&uid) {
            let others: Vec<String> = owner_refs(&dependent)
                .into_iter()
                .map(|(u, _)| u)
                .filter(|u| *u != uid && self.uid_exists(u))
                .collect();
            if others.is_empty() {
                if let Some(def) = self.registry.preferred(&gr) {
                    // May already be gone when it depended twice on the same owner.
                    if let Some(current) = self.store.get(&gr, &ns, &name) {
                        self.delete_object(&def, &ns, &name, &current, now);
                    }
                }
            } else {
                let mut kept = dependent;
                if let Some(refs) = kept["metadata"]["ownerReferences"].as_array_mut() {
                    refs.retain(|r| r["uid"].as_str() != Some(uid.as_str()));
                }
                self.store.put(&gr, &ns, &name, kept);
            }
        }
        for (owner, _) in owner_refs(removed) {
            self.release_foreground(&owner);
        }
    }

    /// The collector's sweep for dangling owner references over every
    /// stored object (the real one finds them shortly after a write): an
    /// object none of whose owners exists is deleted (in the background);
    /// one with some owners left loses its references to the absent ones.
    /// Returns how many objects it deleted or changed.
    ///
    /// The server itself checks only the object a write stored
    /// ([`Cluster::collect_dangling_of`]); a full sweep costs a look at
    /// every stored object.
    pub fn collect_dangling(&mut self, now: jiff::Timestamp) -> usize {
        let mut dependents = Vec::new();
        for gr in self.store.resources() {
            for o in self.store.list(&gr, None) {
                if !owner_refs(&o).is_empty() {
                    dependents.push((
                        gr.clone(),
                        str_at(&o, "namespace").to_string(),
                        str_at(&o, "name").to_string(),
                    ));
                }
            }
        }
        dependents
            .into_iter()
            .filter(|(gr, ns, name)| self.collect_dangling_of(gr, ns, name, now))
            .count()
    }

    /// The collector's look at one stored object after a write of it:
    /// when none of its owners exists it is deleted (in the background);
    /// when some do, it loses its references to the absent ones. An owner
    /// exists when an object with the reference's uid is stored under the
    /// reference's name, in the dependent's namespace unless the owner is
    /// cluster-scoped, as the real collector looks it up. Returns whether
    /// it deleted or changed the object (not when it is gone already).
    pub fn collect_dangling_of(
        &mut self,
        gr: &GroupResource,
        ns: &str,
        name: &str,
        now: jiff::Timestamp,
    ) -> bool {
        // An earlier deletion may have taken it.
        let Some(current) = self.store.get(gr, ns, name) else {
            return false;
        };
        self.gc_checks += 1;
        let refs = current["metadata"]["ownerReferences"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let solid = |r: &Value| {
            let (uid, owner) = (r["uid"].as_str(), r["name"].as_str());
            uid.and_then(|u| self.store.by_uid(u))
                .is_some_and(|(_, o)| {
                    let ons = str_at(&o, "namespace");
                    Some(str_at(&o, "name")) == owner && (ons.is_empty() || ons == ns)
                })
        };
        let kept: Vec<Value> = refs.iter().filter(|r| solid(r)).cloned().collect();
        if kept.len() == refs.len() {
            return false;
        }
        let Some(def) = self.registry.preferred(gr) else {
            return false;
        };
        if kept.is_empty() {
            if current["metadata"].get("deletionTimestamp").is_none() {
                self.delete_object(&def, ns, name, &current, now);
            }
        } else {
            let mut changed = (*current).clone();
            changed["metadata"]["ownerReferences"] = Value::Array(kept);
            self.store.put(gr, ns, name, changed);
        }
        true
    }

    /// How many stored objects the garbage collector has looked at for
    /// dangling owner references since the cluster started: one per write
    /// of an object with owner references, however many objects are
    /// stored (a full [`Cluster::collect_dangling`] sweep adds one per
    /// object with owner references).
    #[must_use]
    pub fn garbage_collector_checks(&self) -> u64 {
        self.gc_checks
    }

    /// Removes the `foregroundDeletion` finalizer of the owner `uid` (and
    /// the owner, when nothing else holds it) once none of its dependents
    /// blocks it.
    fn release_foreground(&mut self, uid: &str) {
        let Some((gr, owner)) = self.store.by_uid(uid) else {
            return;
        };
        if owner["metadata"].get("deletionTimestamp").is_none()
            || !finalizers(&owner).iter().any(|f| f == FOREGROUND_FINALIZER)
            || self.dependents_of(uid).iter().any(|(_, _, block)| *block)
        {
            return;
        }
        let Some(def) = self.registry.preferred(&gr) else {
            return;
        };
        let (ns, name) = (
            str_at(&owner, "namespace").to_string(),
            str_at(&owner, "name").to_string(),
        );
        self.release(&def, &ns, &name, FOREGROUND_FINALIZER);
    }
}
