//! Desired sets that depend on the world, against the embedded API server
//! (or the real kube-apiserver named by `FSM_REAL_APISERVER_KUBECONFIG`):
//! a dependent derived from another's live object (a Service's allocated
//! clusterIP), async desired functions reading a Secret (with and without
//! a machine), a converge state handing what it converged to its next
//! state, and `DependentsReconciler::teardown_on_delete`.

use crate::common;
use crate::dependents::{cm, configmaps, log_position, owner, writes_since};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use fsm_kube::dependents::{
    Convergence, Dependent, DependentsError, DependentsReconciler, DependentsRuntime,
    DesiredContext, DesiredError, DesiredSet, LiveDependents, LiveError, ReadError, SetError,
    TEARDOWN_FINALIZER, TeardownState, converge,
};
use fsm_kube::prelude::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use serde_json::json;

fn runtime(env: &Env) -> DependentsRuntime {
    DependentsRuntime::new(env.client.clone())
        .field_manager("reads-test")
        .pending_requeue(Duration::from_millis(200))
}

fn service(name: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "protocol": "TCP"}]},
    }))
    .unwrap()
}

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    }))
    .unwrap()
}

fn secret(name: &str, user: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        string_data: Some([("user".to_owned(), user.to_owned())].into()),
        ..Secret::default()
    }
}

fn cluster_ip(service: &Service) -> String {
    service
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.clone())
        .unwrap_or_default()
}

/// The `endpoint` ConfigMap, built from the live Service `svc`.
fn endpoint_of(name: &str) -> impl Fn(&LiveDependents) -> Result<ConfigMap, LiveError> + use<> {
    let name = format!("{name}-endpoint");
    move |live: &LiveDependents| {
        let service: Service = live.get("svc")?;
        Ok(cm(&name, &[("ip", &cluster_ip(&service))]))
    }
}

/// The user name a Secret holds, read back (the server turns `stringData`
/// into `data`).
fn user_of(secret: &Secret) -> String {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get("user"))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .unwrap_or_default()
}

/// How many lists the embedded server logged since `since` (0 on a real
/// server).
fn lists_since(env: &Env, since: usize) -> usize {
    env.embedded().map_or(0, |server| {
        let (_, records) = server.request_log().records_since(since);
        records.iter().filter(|r| r.verb == "list").count()
    })
}

async fn data_of(env: &Env, name: &str) -> Option<BTreeMap<String, String>> {
    let cm = configmaps(env).get_opt(name).await.unwrap()?;
    Some(cm.data.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_is_derived_from_the_live_cluster_ip_of_a_service() {
    let env = env().await;
    let owner = owner(&env, "derived").await;
    let rt = runtime(&env);
    let set = DesiredSet::builder()
        .dependent(Dependent::new("svc", &service("derived")))
        .dependent(Dependent::derived(
            "endpoint",
            ["svc"],
            endpoint_of("derived"),
        ))
        .build()
        .unwrap();

    let first = converge(&rt, &owner, &set).await.unwrap();
    assert!(first.is_ready(), "{}", first.summary());
    let services: Api<Service> = Api::namespaced(env.client.clone(), &env.ns);
    let ip = cluster_ip(&services.get("derived").await.unwrap());
    assert!(!ip.is_empty(), "the server allocates a clusterIP");
    assert_eq!(
        data_of(&env, "derived-endpoint").await.unwrap()["ip"],
        ip,
        "the ConfigMap holds the Service's live clusterIP"
    );
    assert_eq!(cluster_ip(&first.live::<Service>("svc").unwrap()), ip);

    // Converged: nothing written, nothing pruned, the derived object kept.
    let since = log_position(&env);
    let again = converge(&rt, &owner, &set).await.unwrap();
    assert_eq!(writes_since(&env, since), Vec::<String>::new());
    assert_eq!(lists_since(&env, since), 0, "the shape is remembered");
    assert!(again.is_ready());
    assert_eq!(again.applied, Vec::<String>::new());
    assert_eq!(again.pruned, Vec::<String>::new());
    assert_eq!(again.unchanged, 2);

    // A derive function that errors fails its dependent with the message;
    // the object it made before stays.
    let broken = DesiredSet::builder()
        .dependent(Dependent::new("svc", &service("derived")))
        .dependent(Dependent::derived(
            "endpoint",
            ["svc"],
            |_: &LiveDependents| Err::<ConfigMap, _>("no endpoint for you"),
        ))
        .build()
        .unwrap();
    let failed = converge(&rt, &owner, &broken).await.unwrap();
    assert_eq!(
        failed.state("endpoint").map(|s| s.describe()),
        Some("failed: no endpoint for you".to_owned())
    );
    assert!(failed.pruned.is_empty(), "{:?}", failed.pruned);
    assert!(data_of(&env, "derived-endpoint").await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_desired_function_reads_a_secret() {
    let env = env().await;
    let reconciler = DependentsReconciler::<Widget, ()>::with_runtime_async(
        runtime(&env),
        |widget: Arc<Widget>, cx: DesiredContext<()>| async move {
            let name = widget.name_any();
            let credentials: Secret = cx.reads().get(&format!("{name}-credentials")).await?;
            let config = cm(
                &format!("{name}-config"),
                &[("user", &user_of(&credentials))],
            );
            Ok(DesiredSet::builder()
                .dependent(Dependent::new("config", &config))
                .build()?)
        },
    );
    let widget = Arc::new(owner(&env, "reader").await);

    // No Secret yet: the reconcile fails, saying which object is missing.
    let missing = reconciler
        .reconcile_object(widget.clone(), Arc::new(()))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &missing,
            DependentsError::Desired(DesiredError::Read(ReadError::Missing { object }))
                if *object == format!("Secret {}/reader-credentials", env.ns)
        ),
        "{missing:?}"
    );
    assert_eq!(missing.class(), ErrorClass::RETRYABLE);

    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.ns);
    secrets
        .create(
            &PostParams::default(),
            &secret("reader-credentials", "alice"),
        )
        .await
        .unwrap();
    let (_, convergence) = reconciler
        .reconcile_object(widget, Arc::new(()))
        .await
        .unwrap();
    assert!(convergence.is_ready(), "{}", convergence.summary());
    assert_eq!(
        data_of(&env, "reader-config").await.unwrap()["user"],
        "alice"
    );
}

// ---- a converge state that hands on what it converged ----

#[derive(Debug, thiserror::Error)]
enum ExposeError {
    #[error(transparent)]
    Dependents(#[from] DependentsError),
    #[error(transparent)]
    Set(#[from] SetError),
    #[error(transparent)]
    Live(#[from] LiveError),
    #[error(transparent)]
    Read(#[from] ReadError),
}

impl Classify for ExposeError {
    fn class(&self) -> ErrorClass {
        match self {
            ExposeError::Dependents(e) => e.class(),
            ExposeError::Read(e) => e.class(),
            ExposeError::Set(_) | ExposeError::Live(_) => ErrorClass::Permanent,
        }
    }
}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Widget, error = ExposeError)]
enum Expose {
    #[fsm(initial, converge = exposed, next(Serving), timeout = "10m")]
    Exposing,
    #[fsm(ready, final)]
    Serving { ip: String, user: String },
    #[fsm(failed)]
    Failed,
}

/// Reads the widget's Secret (async), exposes a Service and a ConfigMap
/// derived from it, and enters `Serving` with the clusterIP and the user.
async fn exposed(cx: &mut Step<'_, Expose>) -> Result<impl Converge<Expose> + use<>, ExposeError> {
    let name = cx.resource().name_any();
    let credentials: Secret = cx.reads()?.get(&format!("{name}-credentials")).await?;
    let user = user_of(&credentials);
    let set = DesiredSet::builder()
        .dependent(Dependent::new("svc", &service(&name)))
        .dependent(Dependent::derived("endpoint", ["svc"], endpoint_of(&name)))
        .build()?;
    Ok(set.then(move |done: &Convergence| {
        let service: Service = done.live("svc")?;
        Ok::<_, LiveError>(Expose::Serving {
            ip: cluster_ip(&service),
            user: user.clone(),
        })
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converge_state_enters_its_next_state_with_what_it_converged() {
    let env = env().await;
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.ns);
    secrets
        .create(
            &PostParams::default(),
            &secret("handoff-credentials", "bob"),
        )
        .await
        .unwrap();
    let widget = owner(&env, "handoff").await;
    let harness = Harness::<Expose>::new(widget, ()).with_extension(Arc::new(runtime(&env)));
    let settled = harness.run_until_settled().await.unwrap();
    assert_eq!(settled.path(), ["Exposing", "Serving"]);
    let services: Api<Service> = Api::namespaced(env.client.clone(), &env.ns);
    let ip = cluster_ip(&services.get("handoff").await.unwrap());
    assert_eq!(
        settled.state,
        Expose::Serving {
            ip: ip.clone(),
            user: "bob".into()
        }
    );
    assert_eq!(data_of(&env, "handoff-endpoint").await.unwrap()["ip"], ip);
}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Widget, error = ExposeError)]
enum Mislabelled {
    #[fsm(initial, converge = builds_the_wrong_state, next(Serving))]
    Exposing,
    #[fsm(ready, final)]
    Serving,
    #[fsm(failed)]
    Failed,
}

fn builds_the_wrong_state(
    cx: &Step<'_, Mislabelled>,
) -> Result<impl Converge<Mislabelled> + use<>, ExposeError> {
    let set = DesiredSet::builder()
        .dependent(Dependent::new(
            "config",
            &cm(&format!("{}-wrong", cx.resource().name_any()), &[]),
        ))
        .build()?;
    Ok(set.then(|_: &Convergence| Ok::<_, LiveError>(Mislabelled::Exposing)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_next_state_of_another_variant_than_declared_fails_the_state() {
    let env = env().await;
    let widget = owner(&env, "mislabelled").await;
    let harness = Harness::<Mislabelled>::new(widget, ()).with_extension(Arc::new(runtime(&env)));
    let settled = harness.run_until_settled().await.unwrap();
    assert_eq!(settled.state, Mislabelled::Failed);
    assert_eq!(
        settled.record.last_error.as_deref(),
        Some("the converge state declares next(Serving) but its `then` built Exposing")
    );
}

// ---- teardown on delete ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_on_delete_deletes_in_reverse_order_and_a_postcondition_holds_the_owner() {
    let env = env().await;
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.ns);
    secrets
        .create(&PostParams::default(), &secret("ordered-input", "carol"))
        .await
        .unwrap();
    // Some cleanup the Service's deletion starts, done when it says.
    let cleaned_up = Arc::new(AtomicBool::new(false));
    let done = cleaned_up.clone();
    let reconciler = DependentsReconciler::<Widget, ()>::with_runtime_async(
        runtime(&env),
        move |widget: Arc<Widget>, cx: DesiredContext<()>| {
            let done = done.clone();
            async move {
                let name = widget.name_any();
                let input: Secret = cx.reads().get("ordered-input").await?;
                let config = cm(&format!("{name}-config"), &[("user", &user_of(&input))]);
                Ok(DesiredSet::builder()
                    .dependent(Dependent::new("config", &config))
                    .dependent(
                        Dependent::new("app", &deployment(&name))
                            .depends_on(["config"])
                            .ready_when_exists(),
                    )
                    .dependent(
                        Dependent::new("svc", &service(&name))
                            .depends_on(["app"])
                            .delete_postcondition(move |live| {
                                live.is_none() && done.load(Ordering::SeqCst)
                            }),
                    )
                    .build()?)
            }
        },
    )
    .teardown_on_delete();
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    let widget = owner(&env, "ordered").await;
    let (_, convergence) = reconciler
        .reconcile_object(Arc::new(widget), Arc::new(()))
        .await
        .unwrap();
    assert!(convergence.is_ready(), "{}", convergence.summary());
    let held = widgets.get("ordered").await.unwrap();
    assert!(held.finalizers().iter().any(|f| f == TEARDOWN_FINALIZER));

    // The Secret the set is computed from goes first (as in a namespace's
    // deletion): the last set computed is torn down.
    secrets
        .delete("ordered-input", &DeleteParams::default())
        .await
        .unwrap();
    widgets
        .delete("ordered", &DeleteParams::default())
        .await
        .unwrap();
    let deleting = Arc::new(widgets.get("ordered").await.unwrap());
    assert!(deleting.metadata.deletion_timestamp.is_some());

    // The Service goes first; its postcondition holds the rest, and the
    // owner.
    let (action, first) = reconciler
        .reconcile_deletion(deleting.clone(), Arc::new(()))
        .await
        .unwrap();
    assert_eq!(first.deleted, [format!("Service {}/ordered", env.ns)]);
    assert!(matches!(
        first.state("svc"),
        Some(TeardownState::Deleting(_))
    ));
    assert_eq!(
        first.state("app"),
        Some(&TeardownState::Waiting(vec!["svc".into()]))
    );
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(Duration::from_millis(200))
    );
    assert!(data_of(&env, "ordered-config").await.is_some());
    let still = widgets.get("ordered").await.unwrap();
    assert!(still.finalizers().iter().any(|f| f == TEARDOWN_FINALIZER));

    // Done: the Deployment, then the ConfigMap, then the owner goes.
    cleaned_up.store(true, Ordering::SeqCst);
    let (_, second) = reconciler
        .reconcile_deletion(Arc::new(still), Arc::new(()))
        .await
        .unwrap();
    assert!(second.is_done(), "{}", second.summary());
    assert_eq!(
        second.deleted,
        [
            format!("Deployment {}/ordered", env.ns),
            format!("ConfigMap {}/ordered-config", env.ns)
        ]
    );
    eventually("the owner gone", || {
        let widgets = widgets.clone();
        async move {
            widgets
                .get_opt("ordered")
                .await
                .unwrap()
                .is_none()
                .then_some(())
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_known_set_a_deleted_owner_is_let_go() {
    let env = env().await;
    let reconciler = DependentsReconciler::<Widget, ()>::with_runtime_async(
        runtime(&env),
        |_: Arc<Widget>, cx: DesiredContext<()>| async move {
            let _: Secret = cx.reads().get("never-created").await?;
            Ok(DesiredSet::default())
        },
    )
    .teardown_on_delete();
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    owner(&env, "unknown").await;
    // The finalizer is added before the set is computed (which fails).
    let widget = widgets.get("unknown").await.unwrap();
    assert!(
        reconciler
            .reconcile_object(Arc::new(widget), Arc::new(()))
            .await
            .is_err()
    );
    let held = widgets.get("unknown").await.unwrap();
    assert!(held.finalizers().iter().any(|f| f == TEARDOWN_FINALIZER));
    widgets
        .delete("unknown", &DeleteParams::default())
        .await
        .unwrap();
    let deleting = Arc::new(widgets.get("unknown").await.unwrap());
    let (_, teardown) = reconciler
        .reconcile_object(deleting, Arc::new(()))
        .await
        .unwrap();
    assert_eq!(teardown, Convergence::default());
    eventually("the owner gone", || {
        let widgets = widgets.clone();
        async move {
            widgets
                .get_opt("unknown")
                .await
                .unwrap()
                .is_none()
                .then_some(())
        }
    })
    .await;
}
