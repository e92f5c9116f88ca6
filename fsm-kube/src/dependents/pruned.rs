//! What the last successful prune of each owner left behind: the shape of
//! its desired set (kinds, keys and placements of the active dependents),
//! so that converging the same shape again need not list to prune.
//!
//! After a prune, the owner's labelled objects are a subset of the shape's
//! placements; converging the same shape only creates objects inside it,
//! so a list would find nothing to delete. Any other shape forgets the
//! owner's entry before its first apply, so a converge that fails half way
//! leaves nothing remembered.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use super::object::{Owner, Placement, placement};
use super::set::DesiredSet;

/// How many owners the memory holds; past it, it starts over (each
/// forgotten owner costs one list per kind at its next converge).
pub(crate) const MAX_REMEMBERED_OWNERS: usize = 100_000;

/// A desired set as pruning sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PruneShape {
    /// Group, kind and scope of every kind the set creates or prunes.
    kinds: BTreeSet<(String, String, bool)>,
    /// Key and placement of every object an active dependent desires.
    desired: BTreeSet<(String, Placement)>,
}

impl PruneShape {
    /// The shape of `set` for `owner`.
    pub(crate) fn of(set: &DesiredSet, owner: &Owner) -> Self {
        PruneShape {
            kinds: set
                .kinds()
                .into_iter()
                .map(|k| (k.resource.group, k.resource.kind, k.namespaced))
                .collect(),
            desired: set
                .dependents
                .iter()
                .filter(|d| d.active)
                .flat_map(|d| {
                    d.objects
                        .iter()
                        .map(|o| (d.key.clone(), placement(o, &d.kind, owner)))
                })
                .collect(),
        }
    }
}

/// Per owner UID, the shape its last successful prune left. Shared by the
/// clones of a runtime; empty in a new one (so a restart lists).
#[derive(Clone, Debug, Default)]
pub(crate) struct PrunedShapes {
    shapes: Arc<Mutex<HashMap<String, PruneShape>>>,
}

impl PrunedShapes {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, PruneShape>> {
        // The map holds plain data: a panic elsewhere leaves it usable.
        self.shapes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the last successful prune of `uid` was of `shape`.
    pub(crate) fn is_current(&self, uid: &str, shape: &PruneShape) -> bool {
        self.lock().get(uid) == Some(shape)
    }

    /// Forgets `uid` (its shape changes, or it is torn down).
    pub(crate) fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// Remembers that a prune of `uid` succeeded with `shape`.
    pub(crate) fn remember(&self, uid: &str, shape: PruneShape) {
        let mut shapes = self.lock();
        if shapes.len() >= MAX_REMEMBERED_OWNERS && !shapes.contains_key(uid) {
            shapes.clear();
        }
        shapes.insert(uid.to_owned(), shape);
    }

    /// How many owners are remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dependents::Dependent;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn owner() -> Owner {
        Owner {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "o".into(),
            namespace: Some("ns".into()),
            uid: "u1".into(),
        }
    }

    fn cm(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn set(names: &[&str], active: bool) -> DesiredSet {
        let mut builder = DesiredSet::builder();
        for name in names {
            builder = builder.dependent(Dependent::new(*name, &cm(name)).when(active));
        }
        builder.build().unwrap()
    }

    #[test]
    fn the_same_set_has_the_same_shape_and_any_change_another() {
        let o = owner();
        let base = PruneShape::of(&set(&["a", "b"], true), &o);
        assert_eq!(base, PruneShape::of(&set(&["b", "a"], true), &o));
        assert_ne!(base, PruneShape::of(&set(&["a"], true), &o));
        assert_ne!(base, PruneShape::of(&set(&["a", "b"], false), &o));
        assert_ne!(base, PruneShape::of(&set(&["a", "c"], true), &o));
    }

    #[test]
    fn a_shape_is_current_once_remembered_until_forgotten() {
        let o = owner();
        let shape = PruneShape::of(&set(&["a"], true), &o);
        let shapes = PrunedShapes::default();
        assert!(!shapes.is_current("u1", &shape));
        shapes.remember("u1", shape.clone());
        assert!(shapes.is_current("u1", &shape));
        assert!(!shapes.is_current("u2", &shape));
        shapes.forget("u1");
        assert!(!shapes.is_current("u1", &shape));
    }

    #[test]
    fn the_memory_is_bounded() {
        let shape = PruneShape::of(&set(&["a"], true), &owner());
        let shapes = PrunedShapes::default();
        for i in 0..=MAX_REMEMBERED_OWNERS {
            shapes.remember(&i.to_string(), shape.clone());
        }
        assert!(shapes.len() <= MAX_REMEMBERED_OWNERS);
        assert!(shapes.is_current(&MAX_REMEMBERED_OWNERS.to_string(), &shape));
    }
}
