//! The kind of a dependent: its API resource and whether it is namespaced.

use std::any::TypeId;

use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use kube::api::ApiResource;

/// A kind of object a desired set creates or prunes: its API resource
/// (group, version, kind, plural) and whether its objects live in a
/// namespace.
///
/// ```
/// use fsm_kube::dependents::DependentKind;
/// use k8s_openapi::api::apps::v1::Deployment;
///
/// let kind = DependentKind::of::<Deployment>();
/// assert_eq!((kind.resource.group.as_str(), kind.resource.kind.as_str()), ("apps", "Deployment"));
/// assert!(kind.namespaced);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DependentKind {
    /// Group, version, kind and plural.
    pub resource: ApiResource,
    /// Whether objects of this kind live in a namespace (then in the
    /// owner's, unless the desired object names its own).
    pub namespaced: bool,
}

impl DependentKind {
    /// The kind of a typed resource (a k8s-openapi type, a `CustomResource`).
    pub fn of<T>() -> Self
    where
        T: Resource<DynamicType = ()>,
        T::Scope: 'static,
    {
        DependentKind {
            resource: ApiResource::erase::<T>(&()),
            namespaced: TypeId::of::<T::Scope>() == TypeId::of::<NamespaceResourceScope>(),
        }
    }

    /// A kind known at run time only.
    pub fn new(resource: ApiResource, namespaced: bool) -> Self {
        DependentKind {
            resource,
            namespaced,
        }
    }

    /// Whether `self` and `other` are the same kind (same group and kind,
    /// whatever the version).
    pub fn same_kind(&self, other: &DependentKind) -> bool {
        self.resource.group == other.resource.group && self.resource.kind == other.resource.kind
    }

    /// `Kind` or `Kind.group`, for messages.
    pub fn display(&self) -> String {
        if self.resource.group.is_empty() {
            self.resource.kind.clone()
        } else {
            format!("{}.{}", self.resource.kind, self.resource.group)
        }
    }
}
