//! Small helpers the example operators share: idempotent creation,
//! CRD installation, owner references and content digests.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Creates `object`, or returns the one already there under its name.
///
/// Handlers run at least once per attempt, so every object a handler creates
/// must tolerate having been created by an earlier run.
///
/// # Errors
/// The API's error, other than `AlreadyExists`.
pub async fn create_or_get<K>(api: &Api<K>, object: &K) -> Result<K, kube::Error>
where
    K: Resource + Clone + std::fmt::Debug + Serialize + DeserializeOwned,
{
    match api.create(&PostParams::default(), object).await {
        Ok(created) => Ok(created),
        Err(kube::Error::Api(status)) if status.is_already_exists() => {
            api.get(&object.name_any()).await
        }
        Err(e) => Err(e),
    }
}

/// An `Api` over the objects of `namespace`, or of every namespace when
/// `None`: operators scoped to one namespace leave others' objects alone
/// on a shared cluster.
pub fn scoped_api<K>(client: Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    }
}

/// Runs machine `F` with a [`StatusStore`](operator_fsm::StatusStore) in a
/// `Controller` that also watches the Jobs and Deployments its objects own,
/// for `namespace` (every namespace when `None`), until the future is
/// dropped: the shape of the `integration` and `mutable_jar` operators.
pub async fn run_owning_workloads<F>(
    client: Client,
    namespace: Option<&str>,
    ctx: F::Context,
    options: operator_fsm::ReconcilerOptions,
) where
    F: operator_fsm::core::Fsm,
    F::Resource: operator_fsm::KubeResource + Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    use futures::StreamExt;
    use kube::runtime::watcher;

    let fsm =
        operator_fsm::FsmReconciler::<F>::builder(client.clone(), operator_fsm::StatusStore::new())
            .options(options)
            .build();
    // The cache keeps the objects without their managedFields, and an
    // object that does not decode is reported as the reconciler writes.
    fsm.decode_reporter()
        .lean_controller(
            scoped_api::<F::Resource>(client.clone(), namespace),
            watcher::Config::default(),
        )
        .owns(
            scoped_api::<Job>(client.clone(), namespace),
            watcher::Config::default(),
        )
        .owns(
            scoped_api::<Deployment>(client, namespace),
            watcher::Config::default(),
        )
        .run(
            fsm.reconcile(),
            fsm.error_policy(),
            std::sync::Arc::new(ctx),
        )
        .for_each(|_| async {})
        .await;
}

/// How often [`install_crd`] reads a definition again after losing a race
/// to replace it.
const CRD_REPLACE_ATTEMPTS: u32 = 10;

/// Installs `crd`, replacing an older definition of the same name (its
/// spec, and the annotations `crd` sets, such as the published machine
/// `kubectl fsm` reads; other annotations stay).
///
/// Another process may install the same definition at the same moment, and
/// the server's own controllers update its status: a replace refused with a
/// conflict reads the definition again and retries, a few times.
///
/// # Errors
/// The API's error.
pub async fn install_crd(
    client: &Client,
    crd: &CustomResourceDefinition,
) -> Result<(), kube::Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut attempt = 1;
    loop {
        let installed = match api.create(&PostParams::default(), crd).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.is_already_exists() => {
                let mut current = api.get(&crd.name_any()).await?;
                current.spec = crd.spec.clone();
                if let Some(annotations) = &crd.metadata.annotations {
                    current
                        .metadata
                        .annotations
                        .get_or_insert_with(Default::default)
                        .extend(annotations.clone());
                }
                api.replace(&crd.name_any(), &PostParams::default(), &current)
                    .await
                    .map(drop)
            }
            Err(e) => Err(e),
        };
        match installed {
            Err(kube::Error::Api(status))
                if status.is_conflict() && attempt < CRD_REPLACE_ATTEMPTS =>
            {
                attempt += 1;
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            other => return other,
        }
    }
}

/// Where a Job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobPhase {
    /// Not finished yet.
    Running,
    /// At least one pod succeeded.
    Succeeded,
    /// The Job gave up.
    Failed,
}

/// The phase of `job`, from its status.
pub fn job_phase(job: &Job) -> JobPhase {
    let status = job.status.as_ref();
    if status.and_then(|s| s.succeeded).unwrap_or(0) > 0 {
        JobPhase::Succeeded
    } else if status.and_then(|s| s.failed).unwrap_or(0) > 0 {
        JobPhase::Failed
    } else {
        JobPhase::Running
    }
}

/// A short, stable digest of `value`'s JSON (FNV-1a, 64 bits, hex).
///
/// Stable across processes and Rust versions, unlike `DefaultHasher`, so a
/// digest recorded in a state still matches after an operator restart.
pub fn digest(value: &impl Serialize) -> String {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Parses durations such as `500ms`, `30s`, `2m` (command-line flags).
///
/// # Errors
/// A message naming what is wrong.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` does not start with a number"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" | "" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        other => Err(format!(
            "unknown unit `{other}` in `{text}` (use ms, s, m or h)"
        )),
    }
}

/// Formats a duration for people: `850ms`, `4.2s`, `3m05s`.
pub use operator_fsm::core::text::human_duration as human;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_stable_and_content_addressed() {
        assert_eq!(digest(&"a"), digest(&"a"));
        assert_ne!(digest(&"a"), digest(&"b"));
        // A fixed value: the digest must not change between releases.
        assert_eq!(digest(&""), "07cc7607b4949e25");
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("120s"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("3d").is_err());
    }
}
