//! Dependents against the server's normal form, on the embedded API
//! server or the real kube-apiserver named by
//! `FSM_REAL_APISERVER_KUBECONFIG`: a quantity the server normalises, a
//! field it folds away and a list element another manager added converge
//! once and then cost no write; an ignored field someone else changed is
//! kept; a custom matcher decides; failures say their kind.
//!
//! Writes are counted three ways: the convergence's `applied` list (on
//! both servers), the object's `resourceVersion` (on both), and the
//! embedded server's request log.

use crate::common;
use crate::dependents::{fail_job, log_position, owner};

use common::*;
use fsm_kube::dependents::{
    Dependent, DependentFailure, DependentState, DependentsRuntime, DesiredSet, FailureKind,
    converge,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

fn runtime(env: &Env) -> DependentsRuntime {
    DependentsRuntime::new(env.client.clone()).field_manager("matching-test")
}

/// A Deployment `name` of one container `app` with `image`, CPU limit
/// `cpu`, memory limit `memory` and the environment `env` (name, value).
fn deployment(
    name: &str,
    image: &str,
    cpu: &str,
    memory: &str,
    env: &[(&str, &str)],
) -> Deployment {
    let env: Vec<Value> = env
        .iter()
        .map(|(n, v)| json!({"name": n, "value": v}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "app",
                    "image": image,
                    "env": env,
                    "resources": {"limits": {"cpu": cpu, "memory": memory}},
                }]},
            },
        },
    }))
    .unwrap()
}

fn deployments(env: &Env) -> Api<Deployment> {
    Api::namespaced(env.client.clone(), &env.ns)
}

async fn live_json<K>(api: &Api<K>, name: &str) -> Value
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    serde_json::to_value(api.get(name).await.unwrap()).unwrap()
}

fn resource_version(live: &Value) -> String {
    live["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The requests of each verb the embedded server logged since `since`
/// (`None` on a real server): patches are applies and dry runs.
fn requests_since(env: &Env, since: usize) -> Option<Vec<String>> {
    let server = env.embedded()?;
    let (_, records) = server.request_log().records_since(since);
    Some(
        records
            .into_iter()
            .filter(|r| r.verb != "watch")
            .map(|r| format!("{} {}", r.verb, r.resource))
            .collect(),
    )
}

/// Converges `set` twice more after its first converge, and checks that
/// the second costs at most a dry run and the third only a read, and
/// that neither writes.
async fn converges_once_then_costs_no_write(
    env: &Env,
    rt: &DependentsRuntime,
    owner: &impl kube::Resource<DynamicType = ()>,
    set: &DesiredSet,
    live: impl AsyncFn() -> Value,
) {
    let first = converge(rt, owner, set).await.unwrap();
    assert_eq!(first.applied.len(), 1, "{first:?}");
    let before = live().await;

    let at = log_position(env);
    let second = converge(rt, owner, set).await.unwrap();
    assert!(
        second.applied.is_empty(),
        "second converge wrote: {second:?}"
    );
    assert_eq!(second.unchanged, 1);
    if let Some(requests) = requests_since(env, at) {
        // A read, and at most one dry-run apply (a PATCH with dryRun=All).
        let patches = requests.iter().filter(|r| r.starts_with("patch")).count();
        assert!(patches <= 1, "{requests:?}");
        assert!(
            requests
                .iter()
                .all(|r| r.starts_with("get") || r.starts_with("patch")),
            "{requests:?}"
        );
    }

    let at = log_position(env);
    let third = converge(rt, owner, set).await.unwrap();
    assert!(third.applied.is_empty(), "third converge wrote: {third:?}");
    if let Some(requests) = requests_since(env, at) {
        assert!(
            requests.iter().all(|r| r.starts_with("get")),
            "the third converge sent more than reads: {requests:?}"
        );
    }
    let after = live().await;
    assert_eq!(resource_version(&before), resource_version(&after));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quantity_the_server_normalises_converges_once_and_then_costs_no_write() {
    let env = env().await;
    let owner = owner(&env, "quantity").await;
    let rt = runtime(&env);
    let set = DesiredSet::builder()
        .dependent(Dependent::new(
            "web",
            &deployment("web", "nginx:1", "1000m", "1024Mi", &[]),
        ))
        .build()
        .unwrap();
    let api = deployments(&env);
    converges_once_then_costs_no_write(&env, &rt, &owner, &set, async || {
        live_json(&api, "web").await
    })
    .await;
    let live = live_json(&api, "web").await;
    assert_eq!(
        live.pointer("/spec/template/spec/containers/0/resources/limits"),
        Some(&json!({"cpu": "1", "memory": "1Gi"})),
        "the server keeps quantities in canonical form"
    );

    // A changed desired value is applied, and learned anew.
    let changed = DesiredSet::builder()
        .dependent(Dependent::new(
            "web",
            &deployment("web", "nginx:1", "2000m", "1024Mi", &[]),
        ))
        .build()
        .unwrap();
    let c = converge(&rt, &owner, &changed).await.unwrap();
    assert_eq!(c.applied.len(), 1, "{c:?}");
    let live = live_json(&api, "web").await;
    assert_eq!(
        live.pointer("/spec/template/spec/containers/0/resources/limits/cpu"),
        Some(&json!("2"))
    );
    let again = converge(&rt, &owner, &changed).await.unwrap();
    assert!(again.applied.is_empty(), "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_dry_run_a_normalised_quantity_is_applied_on_every_converge() {
    let env = env().await;
    let owner = owner(&env, "no-dry-run").await;
    let rt = runtime(&env);
    let set = DesiredSet::builder()
        .dependent(
            Dependent::new("web", &deployment("web", "nginx:1", "0.5", "1Gi", &[]))
                .dry_run_compare(false),
        )
        .build()
        .unwrap();
    for _ in 0..2 {
        let c = converge(&rt, &owner, &set).await.unwrap();
        assert_eq!(c.applied.len(), 1, "{c:?}");
    }
    let live = live_json(&deployments(&env), "web").await;
    assert_eq!(
        live.pointer("/spec/template/spec/containers/0/resources/limits/cpu"),
        Some(&json!("500m"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_the_server_folds_away_converges_once_and_then_costs_no_write() {
    let env = env().await;
    let owner = owner(&env, "folded").await;
    let rt = runtime(&env);
    // The server folds stringData into data: the live Secret never has it.
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "credentials"},
        "stringData": {"password": "s3cret"},
    }))
    .unwrap();
    let set = DesiredSet::builder()
        .dependent(Dependent::new("credentials", &secret))
        .build()
        .unwrap();
    let api: Api<Secret> = Api::namespaced(env.client.clone(), &env.ns);
    converges_once_then_costs_no_write(&env, &rt, &owner, &set, async || {
        live_json(&api, "credentials").await
    })
    .await;
    let live = live_json(&api, "credentials").await;
    assert_eq!(live.pointer("/data/password"), Some(&json!("czNjcmV0")));
    assert_eq!(live.get("stringData"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_element_another_manager_added_costs_no_reapply() {
    let env = env().await;
    let owner = owner(&env, "appended").await;
    let rt = runtime(&env);
    let set = DesiredSet::builder()
        .dependent(Dependent::new(
            "web",
            &deployment("web", "nginx:1", "100m", "64Mi", &[("MODE", "fast")]),
        ))
        .build()
        .unwrap();
    let api = deployments(&env);
    let first = converge(&rt, &owner, &set).await.unwrap();
    assert_eq!(first.applied.len(), 1);

    // An injector (another field manager) adds an environment variable
    // to our container.
    let injected = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [
            {"name": "app", "env": [{"name": "TRACING", "value": "on"}]}
        ]}}},
    });
    api.patch(
        "web",
        &PatchParams::apply("injector"),
        &Patch::Apply(&injected),
    )
    .await
    .unwrap();
    let before = live_json(&api, "web").await;
    let names = |live: &Value| -> Vec<String> {
        live.pointer("/spec/template/spec/containers/0/env")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| e["name"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(names(&before), ["MODE", "TRACING"]);

    for round in ["second", "third"] {
        let at = log_position(&env);
        let c = converge(&rt, &owner, &set).await.unwrap();
        assert!(c.applied.is_empty(), "{round} converge re-applied: {c:?}");
        if round == "third"
            && let Some(requests) = requests_since(&env, at)
        {
            assert!(
                requests.iter().all(|r| r.starts_with("get")),
                "{requests:?}"
            );
        }
    }
    let after = live_json(&api, "web").await;
    assert_eq!(names(&after), ["MODE", "TRACING"]);
    assert_eq!(resource_version(&before), resource_version(&after));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignored_field_someone_else_changed_is_not_taken_back() {
    let env = env().await;
    let owner = owner(&env, "ignored").await;
    let rt = runtime(&env);
    let set = |image: &str| {
        DesiredSet::builder()
            .dependent(
                Dependent::new("web", &deployment("web", image, "100m", "64Mi", &[]))
                    .ignore("/spec/replicas"),
            )
            .build()
            .unwrap()
    };
    let api = deployments(&env);
    converge(&rt, &owner, &set("nginx:1")).await.unwrap();
    let replicas = async || {
        live_json(&api, "web")
            .await
            .pointer("/spec/replicas")
            .cloned()
    };
    assert_eq!(
        replicas().await,
        Some(json!(1)),
        "created with the desired value"
    );

    // An autoscaler scales it.
    api.patch(
        "web",
        &PatchParams {
            field_manager: Some("autoscaler".into()),
            ..PatchParams::default()
        },
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();
    let c = converge(&rt, &owner, &set("nginx:1")).await.unwrap();
    assert!(c.applied.is_empty(), "{c:?}");
    assert_eq!(replicas().await, Some(json!(3)));

    // Another change is applied, and the replica count still kept.
    let c = converge(&rt, &owner, &set("nginx:2")).await.unwrap();
    assert_eq!(c.applied.len(), 1, "{c:?}");
    let live = live_json(&api, "web").await;
    assert_eq!(
        live.pointer("/spec/template/spec/containers/0/image"),
        Some(&json!("nginx:2"))
    );
    assert_eq!(live.pointer("/spec/replicas"), Some(&json!(3)));

    // Without the ignore path the replica count is taken back.
    let owned = DesiredSet::builder()
        .dependent(Dependent::new(
            "web",
            &deployment("web", "nginx:2", "100m", "64Mi", &[]),
        ))
        .build()
        .unwrap();
    let c = converge(&rt, &owner, &owned).await.unwrap();
    assert_eq!(c.applied.len(), 1, "{c:?}");
    assert_eq!(replicas().await, Some(json!(1)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_matcher_decides_whether_to_apply() {
    let env = env().await;
    let owner = owner(&env, "matcher").await;
    let rt = runtime(&env);
    let set = |image: &str| {
        DesiredSet::builder()
            .dependent(
                Dependent::new("web", &deployment("web", image, "100m", "64Mi", &[]))
                    // Only the major version of the image matters.
                    .matcher(|desired: &Value, live: &Value| {
                        let major = |v: &Value| {
                            v.pointer("/spec/template/spec/containers/0/image")
                                .and_then(Value::as_str)
                                .and_then(|i| i.split(['.', ':']).nth(1))
                                .map(str::to_owned)
                        };
                        major(desired) == major(live)
                    }),
            )
            .build()
            .unwrap()
    };
    let api = deployments(&env);
    converge(&rt, &owner, &set("nginx:1.1")).await.unwrap();
    let c = converge(&rt, &owner, &set("nginx:1.2")).await.unwrap();
    assert!(c.applied.is_empty(), "the matcher said it matches: {c:?}");
    let image = async || {
        live_json(&api, "web")
            .await
            .pointer("/spec/template/spec/containers/0/image")
            .cloned()
    };
    assert_eq!(image().await, Some(json!("nginx:1.1")));
    let c = converge(&rt, &owner, &set("nginx:2.0")).await.unwrap();
    assert_eq!(c.applied.len(), 1, "{c:?}");
    assert_eq!(image().await, Some(json!("nginx:2.0")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_apply_and_a_failed_job_are_told_apart() {
    let env = env().await;
    let owner = owner(&env, "kinds").await;
    let rt = runtime(&env);
    let job = |image: &str| -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": "migrate"},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "m", "image": image}]}}}
        }))
        .unwrap()
    };
    let set = |image: &str| {
        DesiredSet::builder()
            .dependent(Dependent::new("migration", &job(image)))
            .build()
            .unwrap()
    };
    let running = converge(&rt, &owner, &set("busybox:1")).await.unwrap();
    assert!(
        matches!(
            running.state("migration"),
            Some(DependentState::NotReady(_))
        ),
        "{}",
        running.summary()
    );

    fail_job(&env, "migrate").await;
    let c = converge(&rt, &owner, &set("busybox:1")).await.unwrap();
    let failures: Vec<(&str, &DependentFailure)> = c.failures().collect();
    assert_eq!(failures.len(), 1, "{}", c.summary());
    assert_eq!(failures[0].0, "migration");
    assert_eq!(failures[0].1.kind(), &FailureKind::ReadinessFailed);
    assert!(failures[0].1.is_readiness_failed());

    // A Job's template is immutable: the server refuses the change.
    let c = converge(&rt, &owner, &set("busybox:2")).await.unwrap();
    let failure = c
        .state("migration")
        .and_then(DependentState::failure)
        .unwrap_or_else(|| panic!("{}", c.summary()));
    assert_eq!(failure.kind(), &FailureKind::Refused { code: 422 });
    assert!(failure.is_refused());
    assert!(
        failure.message().contains("immutable") && failure.message().contains("422"),
        "{failure}"
    );
    assert!(c.applied.is_empty());
}
