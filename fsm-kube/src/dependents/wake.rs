//! Which changes of a dependent wake its owner: those a converge can act
//! on. A status write that leaves the dependent's readiness where it was
//! (a rollout's progress counters) does not; any other change does.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};

use kube::api::{DynamicObject, ObjectMeta};
use kube::runtime::watcher;
use serde_json::Value;

use super::kind::DependentKind;
use super::readiness::{Readiness, builtin_readiness, readiness_view};
use super::set::{DesiredSet, ReadyCheck};

/// What the runtime knows about waking: the kinds some dependent checks
/// with its own `ready` function (whose status changes all wake), and
/// whether filtering is off. Shared by a runtime's clones.
#[derive(Debug, Default)]
pub(crate) struct WakeFilters {
    custom: RwLock<HashSet<(String, String)>>,
    every_change: AtomicBool,
}

fn kind_key(kind: &DependentKind) -> (String, String) {
    (kind.resource.group.clone(), kind.resource.kind.clone())
}

impl WakeFilters {
    /// Notes the kinds of `set`'s dependents with a custom readiness check.
    pub fn note(&self, set: &DesiredSet) {
        for dependent in &set.dependents {
            if matches!(dependent.ready, ReadyCheck::Custom(_)) {
                let key = kind_key(&dependent.kind);
                let known = self.custom.read().is_ok_and(|c| c.contains(&key));
                if !known && let Ok(mut custom) = self.custom.write() {
                    custom.insert(key);
                }
            }
        }
    }

    /// Every change wakes (no filtering).
    pub fn wake_on_every_change(&self, on: bool) {
        self.every_change.store(on, Ordering::Relaxed);
    }

    /// Whether status changes of `kind` that keep its built-in readiness
    /// may be skipped.
    fn filters(&self, kind: &DependentKind) -> bool {
        !self.every_change.load(Ordering::Relaxed)
            && !self
                .custom
                .read()
                .is_ok_and(|c| c.contains(&kind_key(kind)))
    }
}

/// The wake filter of one watch: the fingerprint of each object last
/// passed on, keyed by a hash of its namespace and name (eight bytes an
/// object where the two strings took about a hundred; two objects whose
/// keys collided, at odds of about 2^-64 a pair, would each be compared
/// with the other's fingerprint, which differs: their owners would be
/// woken more often, never less).
#[derive(Debug)]
pub(crate) struct WakeFilter {
    kind: DependentKind,
    seen: HashMap<u64, u64>,
}

impl WakeFilter {
    pub fn new(kind: DependentKind) -> Self {
        WakeFilter {
            kind,
            seen: HashMap::new(),
        }
    }

    /// Whether `event` should wake owners, given `filters`.
    pub fn passes(&mut self, filters: &WakeFilters, event: &watcher::Event<DynamicObject>) -> bool {
        let object = match event {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => o,
            watcher::Event::Delete(o) => {
                self.seen.remove(&key_of(o));
                return true;
            }
            watcher::Event::Init | watcher::Event::InitDone => return true,
        };
        let filtered = filters.filters(&self.kind);
        let print = fingerprint(&self.kind, object, filtered);
        let previous = self.seen.insert(key_of(object), print);
        !filtered || previous != Some(print)
    }
}

fn key_of(object: &DynamicObject) -> u64 {
    let mut hasher = DefaultHasher::new();
    (&object.metadata.namespace, &object.metadata.name).hash(&mut hasher);
    hasher.finish()
}

/// A hash of what a converge can act on: the object without its
/// `resourceVersion`, `managedFields` and `status`, and the class of its
/// built-in readiness (ready, pending or failed), not its message; or,
/// unfiltered, with its whole `status`. Serialized straight into the
/// hasher: nothing of the object is copied but the few fields readiness
/// reads.
fn fingerprint(kind: &DependentKind, object: &DynamicObject, by_readiness: bool) -> u64 {
    let mut hasher = DefaultHasher::new();
    // Every field but the two that change with every write; destructured,
    // so that a field added to ObjectMeta is not left out unnoticed.
    let ObjectMeta {
        annotations,
        creation_timestamp,
        deletion_grace_period_seconds,
        deletion_timestamp,
        finalizers,
        generate_name,
        generation,
        labels,
        managed_fields: _,
        name,
        namespace,
        owner_references,
        resource_version: _,
        self_link,
        uid,
    } = &object.metadata;
    hash_serialized(
        &mut hasher,
        &(
            annotations,
            creation_timestamp,
            deletion_grace_period_seconds,
            deletion_timestamp,
            finalizers,
            generate_name,
            generation,
            labels,
            name,
            namespace,
            owner_references,
            self_link,
            uid,
        ),
    );
    let status = match object.data.as_object() {
        Some(body) => {
            for (key, value) in body.iter().filter(|(key, _)| *key != "status") {
                key.hash(&mut hasher);
                hash_serialized(&mut hasher, value);
            }
            body.get("status")
        }
        None => {
            hash_serialized(&mut hasher, &object.data);
            None
        }
    };
    if by_readiness {
        let view = readiness_view(&object.data, *generation);
        let class = match builtin_readiness(&kind.resource.group, &kind.resource.kind, &view) {
            Readiness::Ready => 0u8,
            Readiness::Pending(_) => 1,
            Readiness::Failed(_) => 2,
        };
        class.hash(&mut hasher);
    } else {
        hash_serialized(&mut hasher, status.unwrap_or(&Value::Null));
    }
    hasher.finish()
}

/// Hashes `value`'s JSON as it is written, without building the text.
pub(crate) fn hash_serialized<T: serde::Serialize + ?Sized>(hasher: &mut DefaultHasher, value: &T) {
    // Writing into a hasher cannot fail, nor can serializing these
    // (JSON values and API types); were it to, what was written of the
    // value so far is hashed.
    let _ = serde_json::to_writer(HashWriter(hasher), value);
}

/// An `io::Write` that feeds a hasher.
struct HashWriter<'h>(&'h mut DefaultHasher);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.write(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use serde_json::json;

    fn deployment(rv: &str, replicas: i64, ready: i64, image: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns", "resourceVersion": rv, "generation": 1},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": image}]}}},
            "status": {"observedGeneration": 1, "replicas": replicas, "updatedReplicas": ready,
                "readyReplicas": ready, "availableReplicas": ready}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn progress_within_a_readiness_does_not_wake_but_its_end_and_spec_changes_do() {
        let filters = WakeFilters::default();
        let mut filter = WakeFilter::new(DependentKind::of::<Deployment>());
        let apply = |o| watcher::Event::Apply(o);
        assert!(filter.passes(&filters, &apply(deployment("1", 3, 0, "a"))));
        assert!(
            !filter.passes(&filters, &apply(deployment("2", 3, 1, "a"))),
            "still pending"
        );
        assert!(
            !filter.passes(&filters, &apply(deployment("3", 3, 2, "a"))),
            "still pending"
        );
        assert!(
            filter.passes(&filters, &apply(deployment("4", 3, 3, "a"))),
            "ready now"
        );
        assert!(
            filter.passes(&filters, &apply(deployment("5", 3, 3, "b"))),
            "spec changed"
        );
        assert!(filter.passes(
            &filters,
            &watcher::Event::Delete(deployment("6", 3, 3, "b"))
        ));
    }

    #[test]
    fn every_status_change_wakes_with_a_custom_check_or_when_asked() {
        let filters = WakeFilters::default();
        filters.wake_on_every_change(true);
        let mut filter = WakeFilter::new(DependentKind::of::<Deployment>());
        assert!(filter.passes(&filters, &watcher::Event::Apply(deployment("1", 3, 0, "a"))));
        assert!(filter.passes(&filters, &watcher::Event::Apply(deployment("2", 3, 1, "a"))));
        filters.wake_on_every_change(false);
        // The first event after the switch is compared by another
        // fingerprint; the next progress is filtered.
        filter.passes(&filters, &watcher::Event::Apply(deployment("3", 3, 2, "a")));
        assert!(!filter.passes(&filters, &watcher::Event::Apply(deployment("4", 3, 1, "a"))));
        let app = k8s_openapi::api::apps::v1::Deployment {
            metadata: kube::api::ObjectMeta {
                name: Some("d".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let set = DesiredSet::builder()
            .dependent(super::super::set::Dependent::new("app", &app).ready(|_: &Value| true))
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        filters.note(&set);
        filter.passes(&filters, &watcher::Event::Apply(deployment("5", 3, 2, "a")));
        assert!(filter.passes(&filters, &watcher::Event::Apply(deployment("6", 3, 1, "a"))));
    }
}
