//! [`Watched`]: a resource whose objects are looked at from outside the
//! operator, and the machine it publishes.

use fsm_core::Fsm;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Api, Client, CustomResourceExt};

use super::published::PublishedMachine;
use super::resource::ResourceInfo;
use crate::KubeResource;
use crate::store::StoreKind;

/// A resource whose objects are looked at, and its machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watched {
    /// The resource.
    pub resource: ResourceInfo,
    /// Its machine and the store of its records.
    pub machine: PublishedMachine,
}

impl Watched {
    /// The resource of machine `F`, whose records are in `store`.
    pub fn of<F>(store: StoreKind) -> Self
    where
        F: Fsm,
        F::Resource: KubeResource + CustomResourceExt,
    {
        Watched {
            resource: ResourceInfo::of::<F::Resource>(),
            machine: PublishedMachine {
                store,
                graph: F::machine().graph(),
            },
        }
    }

    /// An API for the objects in `namespace` (`None`: every namespace, or
    /// a cluster-scoped resource). The namespace goes into the URL as a
    /// path segment ([`super::names::path_segment`]).
    pub fn api(&self, client: &Client, namespace: Option<&str>) -> Api<DynamicObject> {
        let info = &self.resource;
        let gvk = GroupVersionKind::gvk(&info.group, &info.version, &info.kind);
        let api_resource = ApiResource::from_gvk_with_plural(&gvk, &info.plural);
        match namespace {
            Some(ns) if info.namespaced => Api::namespaced_with(
                client.clone(),
                &super::names::path_segment(ns),
                &api_resource,
            ),
            _ => Api::all_with(client.clone(), &api_resource),
        }
    }
}
