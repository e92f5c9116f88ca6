//! [`ResourceInfo`]: a resource as the API and RBAC name it.

/// A resource as the API and RBAC name it: its group, version, kind,
/// plural and scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceInfo {
    /// The API group (`""` for the core group).
    pub group: String,
    /// The API version, e.g. `v1`.
    pub version: String,
    /// The kind, e.g. `Database`.
    pub kind: String,
    /// The plural resource name, e.g. `databases`.
    pub plural: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

impl ResourceInfo {
    /// The description of `K`, whose scope is taken from its CRD.
    pub fn of<K>() -> Self
    where
        K: kube::Resource<DynamicType = ()> + kube::CustomResourceExt,
    {
        ResourceInfo {
            group: K::group(&()).into_owned(),
            version: K::version(&()).into_owned(),
            kind: K::kind(&()).into_owned(),
            plural: K::plural(&()).into_owned(),
            namespaced: K::crd().spec.scope == "Namespaced",
        }
    }
}
