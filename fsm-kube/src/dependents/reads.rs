//! Reads for desired functions: typed reads of the owner's secondary
//! objects (a Secret, a ConfigMap someone else writes) through the
//! dependents runtime, so that a kind with a watch cache is read from it.

use std::sync::Arc;

use kube::Resource;
use serde::de::DeserializeOwned;

use super::error::ReadError;
use super::kind::DependentKind;
use super::object::{Owner, Placement};
use super::runtime::DependentsRuntime;

/// Typed reads of objects in the owner's namespace, for a desired
/// function: [`StepDependents::reads`](super::StepDependents::reads) in a
/// machine's state, [`DesiredContext`] in an async
/// [`DependentsReconciler`](super::DependentsReconciler). Reads go
/// through the [`DependentsRuntime`]: from the watch cache of the kind
/// when the runtime has one ([`DependentsRuntime::cache`]), else one GET.
/// Owned and cheap to clone, so an `async` desired function can hold it
/// across `.await`s.
///
/// ```no_run
/// # async fn demo(reads: fsm_kube::dependents::Reads) -> Result<(), fsm_kube::dependents::ReadError> {
/// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
///
/// let credentials: Secret = reads.get("db-credentials").await?;
/// let tuning: Option<ConfigMap> = reads.get_opt("db-tuning").await?;
/// # let _ = (credentials, tuning); Ok(()) }
/// ```
///
/// # Caveats
/// A read does not make the owner watch the object: a change of the
/// Secret wakes the owner only if the controller watches Secrets (or at
/// the next resync or requeue).
#[derive(Clone, Debug)]
pub struct Reads {
    runtime: DependentsRuntime,
    namespace: Option<String>,
}

impl Reads {
    /// Reads in `owner`'s namespace (`default` for a cluster-scoped
    /// owner, as for its dependents) through `runtime`.
    pub fn new(runtime: DependentsRuntime, owner: &Owner) -> Self {
        Reads {
            runtime,
            namespace: owner.namespace.clone(),
        }
    }

    /// The namespace namespaced objects are read in (`None`: the owner is
    /// cluster-scoped, and `default` is used).
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The object `name` of kind `T` (in the owner's namespace when `T`
    /// is namespaced).
    ///
    /// # Errors
    /// [`ReadError::Missing`] when it does not exist, [`ReadError::Api`]
    /// when the server could not be asked, [`ReadError::Decode`] when it
    /// does not read as `T`.
    pub async fn get<T>(&self, name: &str) -> Result<T, ReadError>
    where
        T: Resource<DynamicType = ()> + DeserializeOwned,
        T::Scope: 'static,
    {
        let place = self.place::<T>(name);
        self.get_opt(name).await?.ok_or(ReadError::Missing {
            object: place.display(),
        })
    }

    /// The object `name` of kind `T`, `None` when it does not exist.
    ///
    /// # Errors
    /// [`ReadError::Api`] when the server could not be asked,
    /// [`ReadError::Decode`] when it does not read as `T`.
    pub async fn get_opt<T>(&self, name: &str) -> Result<Option<T>, ReadError>
    where
        T: Resource<DynamicType = ()> + DeserializeOwned,
        T::Scope: 'static,
    {
        let kind = DependentKind::of::<T>();
        let place = self.place::<T>(name);
        let live = self
            .runtime
            .read(&kind, &place)
            .await
            .map_err(|source| ReadError::Api {
                object: place.display(),
                source,
            })?;
        live.map(|value| {
            serde_json::from_value(value).map_err(|e| ReadError::Decode {
                object: place.display(),
                message: e.to_string(),
            })
        })
        .transpose()
    }

    fn place<T>(&self, name: &str) -> Placement
    where
        T: Resource<DynamicType = ()>,
        T::Scope: 'static,
    {
        let kind = DependentKind::of::<T>();
        Placement {
            group: kind.resource.group.clone(),
            kind: kind.resource.kind.clone(),
            namespace: kind.namespaced.then(|| {
                self.namespace
                    .clone()
                    .unwrap_or_else(|| "default".to_owned())
            }),
            name: name.to_owned(),
        }
    }
}

/// What an async desired function of a
/// [`DependentsReconciler`](super::DependentsReconciler) gets besides the
/// owner: the controller's context and [`Reads`] in the owner's
/// namespace.
///
/// ```no_run
/// use std::sync::Arc;
/// use fsm_kube::dependents::{Dependent, DependentsReconciler, DesiredContext, DesiredSet};
/// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
/// # use kube::ResourceExt;
/// # fn demo<K: fsm_kube::KubeResource>(client: kube::Client) {
/// let reconciler = DependentsReconciler::<K, ()>::new_async(client, |owner: Arc<K>, cx: DesiredContext<()>| async move {
///     let secret: Secret = cx.reads().get(&format!("{}-credentials", owner.name_any())).await?;
///     let user = secret.data.and_then(|d| d.get("user").cloned()).map(|b| String::from_utf8_lossy(&b.0).into_owned());
///     let config = ConfigMap {
///         metadata: kube::api::ObjectMeta { name: Some(owner.name_any()), ..Default::default() },
///         data: Some([("user".to_owned(), user.unwrap_or_default())].into()),
///         ..Default::default()
///     };
///     Ok(DesiredSet::builder().dependent(Dependent::new("config", &config)).build()?)
/// });
/// # let _ = reconciler; }
/// ```
#[derive(Debug)]
pub struct DesiredContext<C> {
    context: Arc<C>,
    reads: Reads,
}

impl<C> Clone for DesiredContext<C> {
    fn clone(&self) -> Self {
        DesiredContext {
            context: self.context.clone(),
            reads: self.reads.clone(),
        }
    }
}

impl<C> DesiredContext<C> {
    /// A context of `context`, reading with `reads`.
    pub fn new(context: Arc<C>, reads: Reads) -> Self {
        DesiredContext { context, reads }
    }

    /// The controller's context.
    pub fn context(&self) -> &C {
        &self.context
    }

    /// Reads in the owner's namespace.
    pub fn reads(&self) -> &Reads {
        &self.reads
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsm_core::Classify;

    #[test]
    fn a_missing_object_names_itself_and_is_retried() {
        let missing = ReadError::Missing {
            object: "Secret ns/db".into(),
        };
        assert_eq!(missing.to_string(), "Secret ns/db does not exist");
        assert_eq!(missing.class(), fsm_core::ErrorClass::RETRYABLE);
        let desired: super::super::DesiredError = missing.into();
        assert_eq!(desired.to_string(), "Secret ns/db does not exist");
    }
}
