//! Waking an owner when one of its dependents changes.

use std::fmt::Debug;
use std::hash::Hash;

use kube::api::{Api, DynamicObject};
use kube::runtime::{Controller, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use super::kind::DependentKind;
use super::object::DEPENDENT_LABEL;
use crate::store::MANAGED_BY_LABEL;

/// `controller`, also watching every kind in `kinds` (typically
/// [`DesiredSet::kinds`](super::DesiredSet::kinds) of a representative
/// set), so that a change of a dependent reconciles its owner (found
/// through the dependent's controller owner reference).
///
/// Namespaced kinds are watched in `namespace`, or in all namespaces with
/// `None`; cluster-scoped kinds everywhere. Each watch selects only
/// objects carrying the dependents' labels, and watches metadata only.
///
/// ```no_run
/// # use fsm_kube::dependents::{DependentKind, owns_dependents};
/// # use k8s_openapi::api::{apps::v1::Deployment, core::v1::Service};
/// # fn demo<K: fsm_kube::KubeResource>(client: kube::Client) {
/// let controller = kube::runtime::Controller::new(kube::Api::<K>::all(client.clone()), Default::default());
/// let controller = owns_dependents(
///     controller,
///     &client,
///     None,
///     [DependentKind::of::<Deployment>(), DependentKind::of::<Service>()],
/// );
/// # }
/// ```
///
/// # Caveats
/// These watches wake owners; they are not read by
/// [`converge`](super::converge), which reads each dependent with a GET
/// unless a reflector store is given with
/// [`DependentsRuntime::cache`](super::DependentsRuntime::cache) (kube's
/// stable `Controller` API does not share its watches' stores).
pub fn owns_dependents<K>(
    controller: Controller<K>,
    client: &Client,
    namespace: Option<&str>,
    kinds: impl IntoIterator<Item = DependentKind>,
) -> Controller<K>
where
    K: Clone + Resource + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    let selector = format!(
        "{}={},{}",
        MANAGED_BY_LABEL.0, MANAGED_BY_LABEL.1, DEPENDENT_LABEL
    );
    let mut controller = controller;
    for kind in kinds {
        let api: Api<DynamicObject> = match namespace {
            Some(ns) if kind.namespaced => Api::namespaced_with(client.clone(), ns, &kind.resource),
            _ => Api::all_with(client.clone(), &kind.resource),
        };
        controller = controller.owns_with(
            api,
            kind.resource.clone(),
            watcher::Config::default().labels(&selector),
        );
    }
    controller
}
