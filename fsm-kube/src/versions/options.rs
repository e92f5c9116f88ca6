//! How a version is offered: served or not, the storage version or not,
//! deprecated (with the warning clients see) or not.

/// How one version of the resource is offered on the CRD.
///
/// The default is served, not the storage version, not deprecated. The
/// hub (the machine's resource) is the storage version unless a spoke
/// says [`storage`](VersionOptions::storage).
///
/// ```
/// use fsm_kube::VersionOptions;
/// let old = VersionOptions::default().deprecated("use example.io/v1 Database");
/// assert!(old.is_served());
/// assert_eq!(old.deprecation_warning(), Some("use example.io/v1 Database"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VersionOptions {
    not_served: bool,
    storage: bool,
    deprecated: bool,
    warning: Option<String>,
}

impl VersionOptions {
    /// Objects are stored in etcd at this version (one version only).
    #[must_use]
    pub fn storage(mut self) -> Self {
        self.storage = true;
        self
    }

    /// The API server does not serve this version (`served: false`):
    /// objects are no longer read or written at it, though etcd may still
    /// hold objects stored at it.
    #[must_use]
    pub fn not_served(mut self) -> Self {
        self.not_served = true;
        self
    }

    /// Deprecated, with `warning` as the `deprecationWarning` clients
    /// (kubectl) print on every request at this version.
    #[must_use]
    pub fn deprecated(mut self, warning: impl Into<String>) -> Self {
        self.deprecated = true;
        self.warning = Some(warning.into());
        self
    }

    /// Deprecated, with the API server's default warning.
    #[must_use]
    pub fn deprecated_without_warning(mut self) -> Self {
        self.deprecated = true;
        self.warning = None;
        self
    }

    /// Whether the API server serves this version.
    #[must_use]
    pub fn is_served(&self) -> bool {
        !self.not_served
    }

    /// Whether this is declared the storage version.
    #[must_use]
    pub fn is_storage(&self) -> bool {
        self.storage
    }

    /// Whether this version is deprecated.
    #[must_use]
    pub fn is_deprecated(&self) -> bool {
        self.deprecated
    }

    /// The deprecation warning, when one was given.
    #[must_use]
    pub fn deprecation_warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }
}
