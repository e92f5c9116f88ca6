//! Lean watch caches: objects kept without their `metadata.managedFields`
//! (described in the [module](super)).

use std::fmt::Debug;

use kube::Resource;
use kube::api::Api;
use kube::runtime::{Controller, watcher};
use serde::de::DeserializeOwned;

use super::decoding::DecodeReporter;

/// Drops an object's `metadata.managedFields` (a no-op when it has none).
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
///
/// let mut map = ConfigMap::default();
/// map.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
/// fsm_kube::watch::strip_managed_fields(&mut map);
/// assert!(map.metadata.managed_fields.is_none());
/// ```
pub fn strip_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// A `Controller` for the objects `api` and `config` select, like
/// `Controller::new(api, config)`, whose cache keeps each object without
/// its `managedFields` ([`strip_managed_fields`]).
///
/// Everything else is `Controller::new`'s: add `.owns(…)`, `.watches(…)`
/// and the options as usual; `controller.store()` is the lean cache.
///
/// Unlike `Controller::new`, an object that does not decode as `K` does
/// not stop the watch: it is left out and reported with
/// [`DecodeReporter::new`](super::DecodeReporter::new)'s
/// defaults (field manager and event reporter `operator-fsm`, values
/// withheld). To report as the reconciler writes, use
/// [`DecodeReporter::lean_controller`](super::DecodeReporter::lean_controller) with
/// [`FsmReconciler::decode_reporter`](crate::FsmReconciler::decode_reporter).
///
/// ```no_run
/// use std::sync::Arc;
/// use futures::StreamExt;
/// use fsm_kube::{FsmReconciler, StatusStore};
/// use kube::runtime::watcher;
///
/// # async fn run<F>(client: kube::Client, ctx: F::Context)
/// # where F: fsm_core::Fsm, F::Resource: fsm_kube::KubeResource {
/// let fsm = FsmReconciler::<F>::new(client.clone(), StatusStore::new());
/// let api = kube::Api::<F::Resource>::all(client);
/// fsm_kube::watch::lean_controller(api, watcher::Config::default())
///     .run(fsm.reconcile(), fsm.error_policy(), Arc::new(ctx))
///     .for_each(|_| async {})
///     .await;
/// # }
/// ```
pub fn lean_controller<K>(api: Api<K>, config: watcher::Config) -> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    DecodeReporter::new(api.clone().into_client()).lean_controller(api, config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    #[test]
    fn stripping_drops_managed_fields_and_keeps_the_rest() {
        let mut map = ConfigMap::default();
        map.metadata.name = Some("a".into());
        map.metadata.resource_version = Some("7".into());
        map.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("kubectl".into()),
            ..ManagedFieldsEntry::default()
        }]);
        map.data = Some([("k".to_owned(), "v".to_owned())].into());
        let mut expected = map.clone();
        expected.metadata.managed_fields = None;

        strip_managed_fields(&mut map);
        assert_eq!(map, expected);
        // Twice is once.
        strip_managed_fields(&mut map);
        assert_eq!(map, expected);
    }
}
