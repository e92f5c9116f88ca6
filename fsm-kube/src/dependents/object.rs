//! The object a dependent applies: the desired object with the owner's
//! reference and labels, in the right namespace. Pure.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use serde_json::{Map, Value, json};

use super::error::DependentsError;
use super::kind::DependentKind;
use super::set::{object_name, object_namespace};
use crate::store::{MANAGED_BY_LABEL, OWNER_UID_LABEL};

/// The label naming the dependent key an object was applied for (its
/// value is the key); with [`MANAGED_BY_LABEL`] and [`OWNER_UID_LABEL`],
/// what pruning selects on.
pub const DEPENDENT_LABEL: &str = "operator-fsm.io/dependent";

/// The object that owns the dependents.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace` (`None`: cluster-scoped).
    pub namespace: Option<String>,
    /// `metadata.uid`.
    pub uid: String,
}

impl Owner {
    /// The owner `object`, read from the API server.
    ///
    /// # Errors
    /// [`DependentsError::Owner`] when it has no name or UID.
    pub fn of<K: Resource<DynamicType = ()>>(object: &K) -> Result<Self, DependentsError> {
        let meta = object.meta();
        Ok(Owner {
            api_version: K::api_version(&()).into_owned(),
            kind: K::kind(&()).into_owned(),
            name: meta.name.clone().ok_or(DependentsError::Owner("name"))?,
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone().ok_or(DependentsError::Owner("uid"))?,
        })
    }

    /// The reference events are published on.
    pub fn object_ref(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.api_version.clone()),
            kind: Some(self.kind.clone()),
            name: Some(self.name.clone()),
            namespace: self.namespace.clone(),
            uid: Some(self.uid.clone()),
            ..ObjectReference::default()
        }
    }

    /// `Kind/name`, for messages.
    pub(crate) fn display(&self) -> String {
        format!("{}/{}", self.kind, self.name)
    }
}

/// Where one desired object lives: its kind, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Placement {
    pub group: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl Placement {
    /// `Kind namespace/name` or `Kind name`.
    pub fn display(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// Where `object` of `kind` goes for `owner`: its own namespace, else the
/// owner's (namespaced kinds only).
pub(crate) fn placement(object: &Value, kind: &DependentKind, owner: &Owner) -> Placement {
    let namespace = kind.namespaced.then(|| {
        object_namespace(object)
            .map(str::to_owned)
            .or_else(|| owner.namespace.clone())
            .unwrap_or_else(|| "default".to_owned())
    });
    Placement {
        group: kind.resource.group.clone(),
        kind: kind.resource.kind.clone(),
        namespace,
        name: object_name(object).to_owned(),
    }
}

/// The configuration to apply for `object` of dependent `key`: identity
/// (`apiVersion`, `kind`, name, namespace), the desired fields, the labels
/// and the owner reference (controller, blocking the owner's deletion).
/// Server-populated metadata and `status` are dropped: they are not
/// configuration.
///
/// # Errors
/// A message when the owner reference would be invalid: a namespaced
/// dependent in another namespace than its namespaced owner's.
#[cfg(test)]
pub(crate) fn applied(
    object: &Value,
    kind: &DependentKind,
    owner: &Owner,
    key: &str,
) -> Result<Value, String> {
    applied_at(object, &placement(object, kind, owner), kind, owner, key)
}

/// [`applied`] for `object` at `place`, its [`placement`] (computed once
/// by the caller, who needs it too).
pub(crate) fn applied_at(
    object: &Value,
    place: &Placement,
    kind: &DependentKind,
    owner: &Owner,
    key: &str,
) -> Result<Value, String> {
    if let (Some(ns), Some(owner_ns)) = (&place.namespace, &owner.namespace)
        && ns != owner_ns
    {
        return Err(format!(
            "{} is in namespace {ns}, but its owner {} is in {owner_ns}: owner references cannot cross namespaces",
            place.display(),
            owner.display()
        ));
    }
    let mut body = object.clone();
    let Some(map) = body.as_object_mut() else {
        return Err(format!(
            "the desired {} is not a JSON object",
            place.display()
        ));
    };
    map.remove("status");
    map.insert(
        "apiVersion".into(),
        kind.resource.api_version.clone().into(),
    );
    map.insert("kind".into(), kind.resource.kind.clone().into());
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return Err(format!(
            "the metadata of {} is not an object",
            place.display()
        ));
    };
    for server_owned in [
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    ] {
        metadata.remove(server_owned);
    }
    match &place.namespace {
        Some(ns) => {
            metadata.insert("namespace".into(), ns.clone().into());
        }
        None => {
            metadata.remove("namespace");
        }
    }
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(MANAGED_BY_LABEL.0.into(), MANAGED_BY_LABEL.1.into());
        labels.insert(OWNER_UID_LABEL.into(), owner.uid.clone().into());
        labels.insert(DEPENDENT_LABEL.into(), key.into());
    }
    // A cluster-scoped object cannot be owned by a namespaced one: the
    // garbage collector would not resolve the reference. It keeps its
    // labels, which pruning and teardown select on.
    if place.namespace.is_some() || owner.namespace.is_none() {
        metadata.insert(
            "ownerReferences".into(),
            json!([{
                "apiVersion": owner.api_version,
                "kind": owner.kind,
                "name": owner.name,
                "uid": owner.uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }]),
        );
    }
    Ok(body)
}

/// Whether `live` names `owner` among its owner references.
pub(crate) fn owned_by(live: &Value, owner: &Owner) -> bool {
    live.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("uid").and_then(Value::as_str) == Some(owner.uid.as_str()))
        })
}

/// Whether `live` carries `owner`'s dependent labels (pruning's test: an
/// object the owner made, even without an owner reference).
pub(crate) fn labelled_for(live: &Value, owner: &Owner) -> bool {
    let labels = live.pointer("/metadata/labels");
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    label(MANAGED_BY_LABEL.0) == Some(MANAGED_BY_LABEL.1)
        && label(OWNER_UID_LABEL) == Some(owner.uid.as_str())
        && label(DEPENDENT_LABEL).is_some()
}

/// Where a live object of `kind` (listed or cached) is, read from its
/// metadata.
pub(crate) fn live_placement(kind: &DependentKind, meta: &kube::api::ObjectMeta) -> Placement {
    Placement {
        group: kind.resource.group.clone(),
        kind: kind.resource.kind.clone(),
        namespace: meta.namespace.clone(),
        name: meta.name.clone().unwrap_or_default(),
    }
}

/// [`labelled_for`], read from typed metadata.
pub(crate) fn meta_labelled_for(meta: &kube::api::ObjectMeta, owner: &Owner) -> bool {
    let label = |k: &str| {
        meta.labels
            .as_ref()
            .and_then(|l| l.get(k))
            .map(String::as_str)
    };
    label(MANAGED_BY_LABEL.0) == Some(MANAGED_BY_LABEL.1)
        && label(OWNER_UID_LABEL) == Some(owner.uid.as_str())
        && label(DEPENDENT_LABEL).is_some()
}

/// The label selector of `owner`'s dependents.
pub(crate) fn selector(owner: &Owner) -> String {
    format!(
        "{}={},{}={},{}",
        MANAGED_BY_LABEL.0, MANAGED_BY_LABEL.1, OWNER_UID_LABEL, owner.uid, DEPENDENT_LABEL
    )
}

/// A placement for unit tests: ConfigMap `name` in namespace `ns`.
#[cfg(test)]
pub(crate) fn test_placement(name: &str) -> Placement {
    Placement {
        group: String::new(),
        kind: "ConfigMap".into(),
        namespace: Some("ns".into()),
        name: name.into(),
    }
}

/// An owner for unit tests: `App` `web` (UID `u-1`) in `namespace`.
#[cfg(test)]
pub(crate) fn test_owner(namespace: Option<&str>) -> Owner {
    Owner {
        api_version: "example.com/v1".into(),
        kind: "App".into(),
        name: "web".into(),
        namespace: namespace.map(Into::into),
        uid: "u-1".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

    fn owner(namespace: Option<&str>) -> Owner {
        test_owner(namespace)
    }

    #[test]
    fn the_applied_object_has_labels_owner_reference_and_namespace() {
        let desired = json!({"metadata": {"name": "c", "resourceVersion": "5"}, "data": {"a": "1"}, "status": {}});
        let body = applied(
            &desired,
            &DependentKind::of::<ConfigMap>(),
            &owner(Some("ns")),
            "config",
        )
        .unwrap();
        assert_eq!(body["apiVersion"], "v1");
        assert_eq!(body["kind"], "ConfigMap");
        assert_eq!(body["metadata"]["namespace"], "ns");
        assert_eq!(body["metadata"]["labels"][DEPENDENT_LABEL], "config");
        assert_eq!(body["metadata"]["labels"][OWNER_UID_LABEL], "u-1");
        assert_eq!(
            body["metadata"]["labels"][MANAGED_BY_LABEL.0],
            MANAGED_BY_LABEL.1
        );
        assert_eq!(body["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(
            body["metadata"]["ownerReferences"][0]["blockOwnerDeletion"],
            true
        );
        assert!(body["metadata"].get("resourceVersion").is_none());
        assert!(body.get("status").is_none());
        assert!(owned_by(&body, &owner(Some("ns"))));
        assert!(labelled_for(&body, &owner(Some("ns"))));
        let meta: kube::api::ObjectMeta =
            serde_json::from_value(body["metadata"].clone()).unwrap_or_default();
        assert!(meta_labelled_for(&meta, &owner(Some("ns"))));
        let mut other = owner(Some("ns"));
        other.uid = "u-2".into();
        assert!(!meta_labelled_for(&meta, &other));
    }

    #[test]
    fn owner_references_do_not_cross_namespaces_or_scopes() {
        let desired = json!({"metadata": {"name": "c", "namespace": "other"}});
        let err = applied(
            &desired,
            &DependentKind::of::<ConfigMap>(),
            &owner(Some("ns")),
            "k",
        )
        .unwrap_err();
        assert!(err.contains("cannot cross namespaces"), "{err}");
        let cluster = json!({"metadata": {"name": "n"}});
        let body = applied(
            &cluster,
            &DependentKind::of::<Namespace>(),
            &owner(Some("ns")),
            "k",
        )
        .unwrap();
        assert!(body["metadata"].get("ownerReferences").is_none());
        assert!(body["metadata"].get("namespace").is_none());
    }
}
