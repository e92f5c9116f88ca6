//! `run`'s own readiness check: the operator's resource can be listed
//! (the API server answers, the CRD is installed, RBAC allows `list`),
//! whether this replica leads or follows.

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::{Client, CustomResourceExt};

use crate::KubeResource;
use crate::http::NotReady;
use crate::records::ResourceInfo;

/// The reason `/readyz` gives until the resource has been listed.
pub(super) const NOT_LISTED: &str = "the operator's resource has not been listed yet";

/// How long to wait between failed lists.
const RETRY: Duration = Duration::from_secs(5);

/// Lists `K` once (in `namespace` for a namespaced kind watched there),
/// retrying every few seconds, then releases `hold`.
pub(super) async fn hold_until_listed<K>(client: Client, namespace: Option<String>, hold: NotReady)
where
    K: KubeResource + CustomResourceExt,
{
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = match namespace {
        Some(ns) if ResourceInfo::of::<K>().namespaced => {
            Api::namespaced_with(client, &ns, &resource)
        }
        _ => Api::all_with(client, &resource),
    };
    loop {
        match api.list_metadata(&ListParams::default().limit(1)).await {
            Ok(_) => break,
            Err(error) => {
                tracing::warn!(kind = %resource.kind, %error, "cannot list the operator's resource; not ready");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
    tracing::debug!(kind = %resource.kind, "resource listed: ready");
    hold.release();
}
