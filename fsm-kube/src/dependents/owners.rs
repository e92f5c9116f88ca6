//! Which owners a dependent's owner references name, matched on group and
//! kind whatever the version.
//!
//! kube's `Controller::owns` matches an owner reference on its exact
//! `apiVersion` (`ObjectRef::from_owner_ref`): once the owner's type moves
//! from `v1alpha1` to `v1`, dependents still carrying `v1alpha1` references
//! (every one written before the upgrade, until its next apply) stop
//! waking their owner. The API server keeps one object whatever the
//! version it is read at, so the version of a reference says nothing about
//! which object it names.

use kube::Resource;
use kube::api::ObjectMeta;
use kube::runtime::reflector::ObjectRef;

/// The objects of type `K` that `meta`'s owner references name, matched
/// on group and kind (not on `apiVersion`), in `meta`'s namespace.
///
/// For a watch of your own of owned objects, where kube's
/// `Controller::owns` would miss references written at an older version
/// of `K`:
///
/// ```
/// use fsm_kube::dependents::owners_any_version;
/// use k8s_openapi::api::apps::v1::Deployment;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
/// use kube::api::ObjectMeta;
///
/// // A Deployment owned by a Deployment, referenced at a version long gone.
/// let meta = ObjectMeta {
///     namespace: Some("shop".into()),
///     owner_references: Some(vec![OwnerReference {
///         api_version: "apps/v1beta2".into(),
///         kind: "Deployment".into(),
///         name: "web".into(),
///         uid: "u-1".into(),
///         ..Default::default()
///     }]),
///     ..Default::default()
/// };
/// let owners = owners_any_version::<Deployment>(&meta, &());
/// assert_eq!(owners.len(), 1);
/// assert_eq!(owners[0].name, "web");
/// assert_eq!(owners[0].namespace.as_deref(), Some("shop"));
/// ```
pub fn owners_any_version<K>(meta: &ObjectMeta, owner_type: &K::DynamicType) -> Vec<ObjectRef<K>>
where
    K: Resource,
    K::DynamicType: Clone,
{
    let group = K::group(owner_type);
    let kind = K::kind(owner_type);
    let api_version = K::api_version(owner_type);
    meta.owner_references
        .iter()
        .flatten()
        .filter(|reference| reference.kind == kind && group_of(&reference.api_version) == group)
        .filter_map(|reference| {
            let mut reference = reference.clone();
            reference.api_version = api_version.to_string();
            ObjectRef::from_owner_ref(meta.namespace.as_deref(), &reference, owner_type.clone())
        })
        .collect()
}

/// The group of an `apiVersion`: `""` for the core group (`v1`).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

    use super::*;

    fn reference(api_version: &str, kind: &str, name: &str) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            ..Default::default()
        }
    }

    fn meta(references: Vec<OwnerReference>) -> ObjectMeta {
        ObjectMeta {
            namespace: Some("ns".into()),
            owner_references: Some(references),
            ..Default::default()
        }
    }

    fn database(version: &str) -> ApiResource {
        ApiResource::from_gvk(&GroupVersionKind::gvk("example.io", version, "Database"))
    }

    #[test]
    fn a_reference_at_an_older_version_names_the_owner() {
        let owners = owners_any_version::<DynamicObject>(
            &meta(vec![reference("example.io/v1alpha1", "Database", "db")]),
            &database("v1"),
        );
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].name, "db");
        assert_eq!(owners[0].namespace.as_deref(), Some("ns"));
        assert_eq!(owners[0].extra.uid.as_deref(), Some("uid-db"));
    }

    #[test]
    fn other_groups_and_kinds_are_not_owners() {
        let owners = owners_any_version::<DynamicObject>(
            &meta(vec![
                reference("other.io/v1", "Database", "elsewhere"),
                reference("example.io/v1", "Backup", "backup"),
                reference("v1", "Database", "core"),
                reference("example.io/v1", "Database", "mine"),
            ]),
            &database("v1"),
        );
        let names: Vec<&str> = owners.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["mine"]);
    }

    #[test]
    fn the_core_group_matches_on_a_bare_version() {
        let owners =
            owners_any_version::<ConfigMap>(&meta(vec![reference("v1", "ConfigMap", "cm")]), &());
        assert_eq!(owners.len(), 1);
        let none = owners_any_version::<ConfigMap>(
            &meta(vec![reference("example.io/v1", "ConfigMap", "cm")]),
            &(),
        );
        assert!(none.is_empty());
    }

    #[test]
    fn an_object_without_references_has_no_owners() {
        let owners = owners_any_version::<ConfigMap>(&ObjectMeta::default(), &());
        assert!(owners.is_empty());
    }
}
