//! The API evolves with objects in flight: a build whose resource is
//! `v1alpha1` leaves objects half way through their workflow; the next
//! build serves `v1` as the storage version (and `v1alpha1` through its
//! conversion webhook) and takes them to the end, losing and repeating
//! nothing; either version reads the same object; the states' admission
//! rules refuse a shrinking size, a changed region, a deletion and a
//! forged `.status.fsm` with the webhook's message; `migrate-storage`
//! leaves no object at `v1alpha1`, and a build without it may then be
//! rolled out. Against the embedded server or the real kube-apiserver
//! named by `FSM_REAL_APISERVER_KUBECONFIG`; both call the webhooks this
//! test serves over TLS on 127.0.0.1.

use crate::common::*;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fsm_kube::cli::ApiVersions;
use fsm_kube::cli::migrate_storage::migrate_storage;
use fsm_kube::http::webhook::{self, WebhookCertificates, WebhookTls};
use fsm_kube::prelude::*;
use fsm_kube::{
    Admission, AdmissionClient, VersionOptions, Versions, WebhookTarget, admission_router,
    validating_webhook_configuration,
};
use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::{Controller, watcher};
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use serde_json::{Value, json};

const GROUP: &str = "evolving.test.operator-fsm.io";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BucketStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsm: Option<FsmStatus>,
}

pub mod v1alpha1 {
    use super::*;
    /// The first version: the size as text.
    #[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[kube(
        group = "evolving.test.operator-fsm.io",
        version = "v1alpha1",
        kind = "Bucket",
        namespaced,
        status = "BucketStatus"
    )]
    pub struct BucketSpec {
        pub size: String,
    }
}

pub mod v1 {
    use super::*;
    /// The hub: the size in Gi, and a region (defaulted for old objects).
    #[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[kube(
        group = "evolving.test.operator-fsm.io",
        version = "v1",
        kind = "Bucket",
        namespaced,
        status = "BucketStatus"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct BucketSpec {
        pub storage_gi: u32,
        #[serde(default = "default_region")]
        pub region: String,
    }

    fn default_region() -> String {
        "eu".to_owned()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("size {0:?} is not a whole number of Gi")]
pub struct NotGi(String);

impl TryFrom<v1alpha1::Bucket> for v1::Bucket {
    type Error = NotGi;
    fn try_from(old: v1alpha1::Bucket) -> Result<Self, NotGi> {
        let gi = old
            .spec
            .size
            .strip_suffix("Gi")
            .and_then(|n| n.parse().ok());
        let storage_gi = gi.ok_or_else(|| NotGi(old.spec.size.clone()))?;
        Ok(v1::Bucket::new(
            "",
            v1::BucketSpec {
                storage_gi,
                region: "eu".to_owned(),
            },
        ))
    }
}

impl From<v1::Bucket> for v1alpha1::Bucket {
    fn from(new: v1::Bucket) -> Self {
        let size = format!("{}Gi", new.spec.storage_gi);
        v1alpha1::Bucket::new("", v1alpha1::BucketSpec { size })
    }
}

/// What the handlers did, by object: each creation exactly once.
#[derive(Default)]
pub struct Backend {
    created: Mutex<BTreeMap<String, u32>>,
}

impl Backend {
    fn create(&self, name: &str) {
        let mut created = self.created.lock().unwrap_or_else(|e| e.into_inner());
        *created.entry(name.to_owned()).or_default() += 1;
    }

    fn creations(&self) -> BTreeMap<String, u32> {
        self.created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("never")]
pub struct Never;
impl Classify for Never {}

/// The annotation that lets a bucket finish filling.
const GO: &str = "test.operator-fsm.io/go";

fn go(annotations: &BTreeMap<String, String>) -> bool {
    annotations.get(GO).map(String::as_str) == Some("yes")
}

/// The build before: its resource is `v1alpha1`.
mod before {
    use super::*;

    #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[fsm(resource = v1alpha1::Bucket, context = Backend, error = Never)]
    pub enum BucketState {
        #[fsm(initial, handler = create, next(Filling))]
        Creating,
        #[fsm(handler = fill, next(Serving))]
        Filling,
        #[fsm(ready, final)]
        Serving,
        #[fsm(failed)]
        Failed,
    }

    async fn create(cx: &mut Step<'_, BucketState>) -> Result<Transition<BucketState>, Never> {
        cx.context().create(&cx.resource().name_any());
        Ok(Transition::next(BucketState::Filling))
    }

    async fn fill(cx: &mut Step<'_, BucketState>) -> Result<Transition<BucketState>, Never> {
        Ok(if go(cx.resource().annotations()) {
            Transition::next(BucketState::Serving)
        } else {
            Transition::wait(Duration::from_millis(200))
        })
    }
}

/// The build after: its resource is `v1`, `v1alpha1` is served through
/// conversion, and its states declare admission rules.
mod after {
    use super::*;

    #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[fsm(resource = v1::Bucket, context = Backend, error = Never)]
    pub enum BucketState {
        #[fsm(initial, handler = create, next(Filling))]
        Creating,
        #[fsm(handler = fill, next(Serving))]
        Filling,
        #[fsm(
            ready,
            final,
            immutable("spec.region"),
            grow_only("spec.storageGi"),
            refuse_delete
        )]
        Serving,
        #[fsm(failed)]
        Failed,
    }

    async fn create(cx: &mut Step<'_, BucketState>) -> Result<Transition<BucketState>, Never> {
        cx.context().create(&cx.resource().name_any());
        Ok(Transition::next(BucketState::Filling))
    }

    async fn fill(cx: &mut Step<'_, BucketState>) -> Result<Transition<BucketState>, Never> {
        Ok(if go(cx.resource().annotations()) {
            Transition::next(BucketState::Serving)
        } else {
            Transition::wait(Duration::from_millis(200))
        })
    }

    pub fn versions() -> Versions<v1::Bucket> {
        Versions::new().spoke::<v1alpha1::Bucket>(
            VersionOptions::default().deprecated("use evolving.test.operator-fsm.io/v1"),
        )
    }
}

/// A controller of machine `S` over `api`, running until aborted.
fn controller<S>(
    client: kube::Client,
    api: Api<S::Resource>,
    backend: Arc<Backend>,
) -> tokio::task::JoinHandle<()>
where
    S: Fsm<Context = Backend>,
    S::Resource: fsm_kube::KubeResource,
{
    tokio::spawn(async move {
        let fsm = FsmReconciler::<S>::builder(client, StatusStore::new())
            .options(ReconcilerOptions::default().error_requeue(Duration::from_millis(100)))
            .build();
        Controller::new(api, watcher::Config::default())
            .run(fsm.reconcile(), fsm.error_policy(), backend)
            .for_each(|_| async {})
            .await;
    })
}

fn resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(GROUP, version, "Bucket"),
        "buckets",
    )
}

fn buckets(env: &Env, version: &str) -> Api<DynamicObject> {
    Api::namespaced_with(env.client.clone(), &env.ns, &resource(version))
}

/// Bucket `name`'s record, read at `version`.
async fn record(env: &Env, version: &str, name: &str) -> Option<Value> {
    let object = buckets(env, version).get_opt(name).await.ok()??;
    object.data.pointer("/status/fsm").cloned()
}

fn state(record: &Value) -> &str {
    record["state"].as_str().unwrap_or_default()
}

/// Waits until bucket `name` (read at `version`) is in `wanted`.
async fn settles(env: &Env, version: &str, name: &str, wanted: &str) -> Value {
    eventually(&format!("{name} in {wanted}"), || async move {
        let record = record(env, version, name).await?;
        (state(&record) == wanted).then_some(record)
    })
    .await
}

/// The message of a write the API server refused with `code`.
fn refused(result: Result<DynamicObject, kube::Error>, code: u16) -> String {
    match result {
        Err(kube::Error::Api(status)) if status.code == code => status.message,
        other => panic!("expected a {code}, got {other:?}"),
    }
}

/// Deletes what a run on a real server leaves between runs.
async fn remove_crd(crds: &Api<CustomResourceDefinition>, name: &str) {
    let _ = crds.delete(name, &DeleteParams::default()).await;
    eventually(&format!("the CRD {name} gone"), || async move {
        match crds.get_opt(name).await {
            Ok(None) => Some(()),
            _ => None,
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_in_flight_move_from_v1alpha1_to_v1_guarded_and_migrated() {
    let env = &env().await;
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(env.client.clone());
    let crd_name = v1::Bucket::crd_name();
    let hook_name = format!("buckets.{GROUP}.operator-fsm.io");
    let _ = configurations
        .delete(&hook_name, &DeleteParams::default())
        .await;
    remove_crd(&crds, crd_name).await;
    let backend = Arc::new(Backend::default());

    // The build before: v1alpha1 alone. Both buckets stop half way.
    env.cluster
        .install_crd(&v1alpha1::Bucket::crd())
        .await
        .unwrap();
    let old_api: Api<v1alpha1::Bucket> = Api::namespaced(env.client.clone(), &env.ns);
    let before =
        controller::<before::BucketState>(env.client.clone(), old_api.clone(), backend.clone());
    for name in ["a", "b"] {
        let bucket = v1alpha1::Bucket::new(
            name,
            v1alpha1::BucketSpec {
                size: "10Gi".into(),
            },
        );
        old_api
            .create(&PostParams::default(), &bucket)
            .await
            .unwrap();
    }
    let mut in_flight = BTreeMap::new();
    for name in ["a", "b"] {
        in_flight.insert(name, settles(env, "v1alpha1", name, "Filling").await);
    }
    before.abort();
    let _ = before.await;

    // The build after: its webhooks, then its CRD (v1 stored, v1alpha1
    // converted by the webhook) and the admission configuration.
    let certs = WebhookCertificates::generate(&["127.0.0.1".to_owned()]).unwrap();
    let tls = WebhookTls::from_pem(certs.cert_pem.as_bytes(), certs.key_pem.as_bytes()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    // The test's user on both servers (the real one's kubeconfig user,
    // the embedded one's requests without credentials): here also the
    // operator's.
    let operator_user = "admin".to_owned();
    let admission = Admission::<after::BucketState>::new(fsm_kube::store::StoreKind::Status)
        .operator_user(operator_user.clone());
    let routes = webhook::router(after::versions(), None).merge(admission_router(admission));
    let server = tokio::spawn(async move { webhook::serve_router(listener, &tls, routes).await });
    let mut crd = after::versions().crd().unwrap();
    WebhookTarget::Url(format!("https://127.0.0.1:{port}/convert"))
        .set_on(&mut crd, certs.ca_pem.as_bytes());
    env.cluster.install_crd(&crd).await.unwrap();
    let configuration = validating_webhook_configuration(
        &fsm_kube::records::ResourceInfo::of::<v1::Bucket>(),
        &AdmissionClient::Url(format!("https://127.0.0.1:{port}/validate")),
        certs.ca_pem.as_bytes(),
    );
    configurations
        .create(&PostParams::default(), &configuration)
        .await
        .unwrap();
    let new_api: Api<v1::Bucket> = Api::namespaced(env.client.clone(), &env.ns);
    let after =
        controller::<after::BucketState>(env.client.clone(), new_api.clone(), backend.clone());

    // The objects read at v1 carry the same records, converted specs.
    for name in ["a", "b"] {
        let bucket = new_api.get(name).await.unwrap();
        assert_eq!(bucket.spec.storage_gi, 10);
        assert_eq!(bucket.spec.region, "eu");
        let record = serde_json::to_value(&bucket.status.unwrap().fsm).unwrap();
        assert_eq!(
            &record, &in_flight[name],
            "{name}: the record carried through"
        );
    }
    // One goes on through the old version (a write converted), one
    // through the new.
    let go_patch = Patch::Merge(json!({"metadata": {"annotations": {GO: "yes"}}}));
    buckets(env, "v1alpha1")
        .patch("a", &PatchParams::default(), &go_patch)
        .await
        .unwrap();
    buckets(env, "v1")
        .patch("b", &PatchParams::default(), &go_patch)
        .await
        .unwrap();
    for name in ["a", "b"] {
        let serving = settles(env, "v1", name, "Serving").await;
        let history = serving["history"].as_array().cloned().unwrap_or_default();
        let entered: Vec<&str> = history.iter().filter_map(|h| h["to"].as_str()).collect();
        assert_eq!(
            entered,
            ["Creating", "Filling", "Serving"],
            "{name}: {serving}"
        );
        let seqs: Vec<u64> = history.iter().filter_map(|h| h["seq"].as_u64()).collect();
        assert_eq!(seqs, [1, 2, 3], "{name}: each transition committed once");
        let old = record(env, "v1alpha1", name).await.unwrap();
        assert_eq!(old, serving, "{name}: either version reads the same record");
    }
    assert_eq!(
        backend.creations(),
        BTreeMap::from([("a".to_owned(), 1), ("b".to_owned(), 1)]),
        "each bucket created once across both builds"
    );
    let old_a = buckets(env, "v1alpha1").get("a").await.unwrap();
    assert_eq!(old_a.data["spec"], json!({"size": "10Gi"}));

    // Admission: what Serving forbids is refused with the webhook's
    // message, at either version; what it allows goes through.
    let write = |version: &'static str, patch: Value| async move {
        buckets(env, version)
            .patch("a", &PatchParams::default(), &Patch::Merge(patch))
            .await
    };
    let shrink = refused(write("v1", json!({"spec": {"storageGi": 5}})).await, 422);
    assert!(
        shrink.contains("spec.storageGi may not shrink while Bucket"),
        "{shrink}"
    );
    assert!(shrink.contains("denied the request"), "{shrink}");
    let old_shrink = refused(
        write("v1alpha1", json!({"spec": {"size": "5Gi"}})).await,
        422,
    );
    assert!(
        old_shrink.contains("spec.storageGi may not shrink"),
        "{old_shrink}"
    );
    let moved = refused(write("v1", json!({"spec": {"region": "us"}})).await, 422);
    assert!(moved.contains("spec.region may not change"), "{moved}");
    let deletion = match buckets(env, "v1")
        .delete("a", &DeleteParams::default())
        .await
    {
        Err(kube::Error::Api(status)) if status.code == 403 => status.message,
        other => panic!("expected a 403, got {other:?}"),
    };
    assert!(
        deletion.contains("a state in which it may not be deleted"),
        "{deletion}"
    );

    // A forged record, written by someone who is not the operator.
    let forger = impersonating(&env.client, "forger");
    allow_status_writes(env, "forger").await;
    let forged = Api::<DynamicObject>::namespaced_with(forger, &env.ns, &resource("v1"))
        .patch_status(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"fsm": {"state": "Failed"}}})),
        )
        .await;
    let forgery = refused(forged, 403);
    assert!(
        forgery.contains(".status.fsm of status of Bucket a is written by its operator only"),
        "{forgery}"
    );

    // Growing is allowed (and, a spec change, starts b's workflow again).
    buckets(env, "v1")
        .patch(
            "b",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"storageGi": 20}})),
        )
        .await
        .unwrap();

    // migrate-storage: every object at v1, then a build without v1alpha1
    // may be rolled out.
    let migration = migrate_storage(&env.client, crd_name, false).await.unwrap();
    assert_eq!(migration.stored_after, ["v1"]);
    let cluster_crd = crds.get(crd_name).await.unwrap();
    let v1_only = v1::Bucket::crd();
    assert!(ApiVersions::judge(&cluster_crd, &v1_only, 2).allows_this_build());

    // Clean up: the admission first (Serving refuses deletion).
    configurations
        .delete(&hook_name, &DeleteParams::default())
        .await
        .unwrap();
    after.abort();
    server.abort();
    remove_crd(&crds, crd_name).await;
}

/// `client`, acting as `user` (`Impersonate-User`, which the test's
/// admin may send on both servers).
fn impersonating(client: &kube::Client, user: &'static str) -> kube::Client {
    let inner = client.clone();
    let service = tower::service_fn(move |mut request: ::http::Request<kube::client::Body>| {
        request
            .headers_mut()
            .insert("Impersonate-User", ::http::HeaderValue::from_static(user));
        let inner = inner.clone();
        async move { inner.send(request).await }
    });
    kube::Client::new(service, client.default_namespace())
}

/// Lets `user` read and write buckets and their status in the test's
/// namespace: what it writes reaches admission.
async fn allow_status_writes(env: &Env, user: &str) {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "bucket-writer"},
        "rules": [{"apiGroups": [GROUP], "resources": ["buckets", "buckets/status"],
                   "verbs": ["get", "patch", "update"]}],
    }))
    .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "bucket-writer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "bucket-writer"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }))
    .unwrap();
    Api::<Role>::namespaced(env.client.clone(), &env.ns)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(env.client.clone(), &env.ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}
