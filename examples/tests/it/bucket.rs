//! The bucket example's API evolves with objects in flight: its previous
//! build (resource `v1alpha1`) leaves buckets half way through their
//! workflow; in a rolling update (a replica of the current build starts
//! beside it, then it stops and hands its Lease over) the current build
//! serves `v1` as the storage version (and `v1alpha1` through its
//! conversion webhook) and takes them to the end, losing and repeating
//! nothing; either version reads the same bucket; the
//! ready state's admission rules refuse a shrinking size (at either
//! version), a changed region, a deletion and a forged `.status.fsm`
//! with the webhook's message; `migrate-storage` leaves nothing at
//! `v1alpha1`, and a build without it may then be rolled out. On the
//! embedded server or the real kube-apiserver named by
//! `FSM_REAL_APISERVER_KUBECONFIG`; both call the webhooks this test
//! serves over TLS on 127.0.0.1, as `run --webhook-addr` serves them.

use crate::common::{Env, eventually};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use examples::bucket::{self, Backend, GO_ANNOTATION, previous, v1, v1alpha1};
use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::{Controller, watcher};
use operator_fsm::cli::migrate_storage::migrate_storage;
use operator_fsm::cli::{
    ApiVersions, ConnectArgs, Operator, OutputFormat, PreflightArgs, StoreKind,
};
use operator_fsm::http::webhook::{self, WebhookCertificates, WebhookTls};
use operator_fsm::prelude::*;
use operator_fsm::testkit::simulation::SimulationConfig;
use operator_fsm::{
    Admission, AdmissionClient, WebhookTarget, admission_router, validating_webhook_configuration,
};
use serde_json::{Value, json};

const GROUP: &str = "storage.example.com";
const GO: &str = GO_ANNOTATION;

/// A replica of a build: a controller of machine `S` over `api`, run
/// while it holds the test's Lease (as `run --leader-elect` does), until
/// stopped.
struct Replica {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Replica {
    fn start<S>(env: &Env, identity: &str, api: Api<S::Resource>, backend: Arc<Backend>) -> Self
    where
        S: Fsm<Context = Backend>,
        S::Resource: operator_fsm::KubeResource,
    {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let client = env.client.clone();
        let ns = env.ns.clone();
        let identity = identity.to_owned();
        let task = tokio::spawn(async move {
            let controller_client = client.clone();
            let result = operator_fsm::leader::run_while_leader_until(
                client,
                &ns,
                "bucket-operator",
                &identity,
                Duration::from_secs(2),
                move |leadership| {
                    let fsm =
                        FsmReconciler::<S>::builder(controller_client.clone(), StatusStore::new())
                            .options(
                                ReconcilerOptions::default()
                                    .error_requeue(Duration::from_millis(100)),
                            )
                            .leadership(leadership)
                            .build();
                    let api = api.clone();
                    let backend = backend.clone();
                    async move {
                        Controller::new(api, watcher::Config::default())
                            .run(fsm.reconcile(), fsm.error_policy(), backend)
                            .for_each(|_| async {})
                            .await;
                    }
                },
                async {
                    let _ = stopped.await;
                },
            )
            .await;
            if let Err(error) = result {
                panic!("{identity}: leader election failed: {error}");
            }
        });
        Replica { stop, task }
    }

    /// Stops the replica: it gives the Lease up and returns.
    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// Waits until `identity` holds the test's Lease.
async fn holds_lease(env: &Env, identity: &str) {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(env.client.clone(), &env.ns);
    eventually(&format!("{identity} to hold the Lease"), || {
        let leases = leases.clone();
        async move {
            let holder = leases
                .get_opt("bucket-operator")
                .await
                .ok()??
                .spec?
                .holder_identity?;
            (holder == identity).then_some(())
        }
    })
    .await;
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
async fn buckets_in_flight_move_from_v1alpha1_to_v1_guarded_and_migrated() {
    let env = &Env::new(SimulationConfig::default()).await;
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
        Replica::start::<previous::BucketState>(env, "previous", old_api.clone(), backend.clone());
    holds_lease(env, "previous").await;
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
    let admission = Admission::<bucket::BucketState>::new(operator_fsm::store::StoreKind::Status)
        .operator_user(operator_user.clone());
    let routes =
        webhook::router(bucket::operator().versions(), None).merge(admission_router(admission));
    let server = tokio::spawn(async move { webhook::serve_router(listener, &tls, routes).await });
    let mut crd = bucket::operator().versions().crd().unwrap();
    WebhookTarget::Url(format!("https://127.0.0.1:{port}/convert"))
        .set_on(&mut crd, certs.ca_pem.as_bytes());
    env.cluster.install_crd(&crd).await.unwrap();
    let configuration = validating_webhook_configuration(
        &operator_fsm::records::ResourceInfo::of::<v1::Bucket>(),
        &AdmissionClient::Url(format!("https://127.0.0.1:{port}/validate")),
        certs.ca_pem.as_bytes(),
    );
    configurations
        .create(&PostParams::default(), &configuration)
        .await
        .unwrap();
    let new_api: Api<v1::Bucket> = Api::namespaced(env.client.clone(), &env.ns);
    // The rolling update: a replica of the current build starts beside
    // the previous one, which then stops and hands the Lease over.
    let after =
        Replica::start::<bucket::BucketState>(env, "current", new_api.clone(), backend.clone());
    before.stop().await;
    holds_lease(env, "current").await;

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

    // The next build drops v1alpha1: its preflight refuses while buckets
    // may be stored there; after migrate-storage it allows it.
    let next = Operator::<bucket::BucketState>::new("bucket-operator", StoreKind::Status);
    let preflight = PreflightArgs {
        namespace: Some(env.ns.clone()),
        output: OutputFormat::Text,
        connect: ConnectArgs::default(),
    };
    let before_migration = next.preflight(&env.client, &preflight).await.unwrap();
    let versions = before_migration.api_versions.clone().expect("checked");
    assert_eq!(versions.dropped_while_stored, ["v1alpha1"]);
    assert!(!before_migration.allows_upgrade());
    assert!(before_migration.render_text().contains("CANNOT UPGRADE"));
    let migration = migrate_storage(&env.client, crd_name, false).await.unwrap();
    assert_eq!(migration.stored_after, ["v1"]);
    let after_migration = next.preflight(&env.client, &preflight).await.unwrap();
    assert!(
        after_migration.allows_upgrade(),
        "{}",
        after_migration.render_text()
    );
    let cluster_crd = crds.get(crd_name).await.unwrap();
    assert!(ApiVersions::judge(&cluster_crd, &v1::Bucket::crd(), 2).allows_this_build());

    // Clean up: the admission first (Serving refuses deletion).
    configurations
        .delete(&hook_name, &DeleteParams::default())
        .await
        .unwrap();
    after.stop().await;
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
