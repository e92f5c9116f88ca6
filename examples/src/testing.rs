//! Fixtures for the handlers' unit tests: an embedded API server with the
//! examples' CRDs, and objects created in it (so they have a namespace and
//! a uid, as the handlers expect).

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt, Resource};
use operator_fsm::testkit::ApiServer;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::database::Database;
use crate::integration::Integration;
use crate::mutable_jar::Keycloak;
use crate::shop::Shop;
use crate::support::install_crd;

/// The namespace of test objects.
pub const NS: &str = "default";

/// A server with the examples' CRDs installed.
pub async fn server() -> (ApiServer, Client) {
    let server = ApiServer::new();
    let client = server.client();
    for crd in [
        Keycloak::crd(),
        Integration::crd(),
        Database::crd(),
        Shop::crd(),
    ] {
        install_crd(&client, &crd).await.unwrap();
    }
    (server, client)
}

/// Creates `object` in [`NS`] and returns it as stored.
pub async fn create<K>(client: &Client, object: K) -> K
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + Serialize
        + DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), NS);
    api.create(&PostParams::default(), &object).await.unwrap()
}

/// Writes a Job's status, as the Job controller would.
pub async fn set_job_status(client: &Client, job: &str, status: serde_json::Value) {
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    jobs.patch_status(
        job,
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({ "status": status })),
    )
    .await
    .unwrap();
}

/// Ends a Job as the Job controller would: succeeded, or failed past its
/// backoff limit, with the conditions readiness reads.
pub async fn finish_job(client: &Client, job: &str, succeeded: bool) {
    let now = jiff::Timestamp::now().to_string();
    let condition = |type_: &str, reason: &str| {
        serde_json::json!({"type": type_, "status": "True", "reason": reason, "message": reason,
            "lastTransitionTime": now, "lastProbeTime": now})
    };
    let status = if succeeded {
        serde_json::json!({"startTime": now, "completionTime": now, "succeeded": 1, "conditions": [
            condition("SuccessCriteriaMet", "CompletionsReached"),
            condition("Complete", "CompletionsReached")]})
    } else {
        serde_json::json!({"startTime": now, "failed": 1, "conditions": [
            condition("FailureTarget", "BackoffLimitExceeded"),
            condition("Failed", "BackoffLimitExceeded")]})
    };
    set_job_status(client, job, status).await;
}
