//! Dependent resources against the embedded API server, or the real
//! kube-apiserver named by `FSM_REAL_APISERVER_KUBECONFIG`: dependency
//! order, concurrent branches, preconditions and activation, families,
//! drift, failures, teardown order, adoption, and no write for a set that
//! is already converged.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use fsm_kube::dependents::{
    Dependent, DependentFailure, DependentKind, DependentState, DependentsError,
    DependentsReconciler, DependentsRuntime, DesiredSet, FailureKind, SetError, TeardownState,
    converge, converge_state, teardown,
};
use fsm_kube::prelude::*;
use fsm_kube::{FsmReconciler, StatusStore};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

pub(crate) fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..ConfigMap::default()
    }
}

/// Ready when the ConfigMap's `ready` entry says `yes`.
fn ready_flag(live: &Value) -> bool {
    live.pointer("/data/ready").and_then(Value::as_str) == Some("yes")
}

pub(crate) async fn owner(env: &Env, name: &str) -> Widget {
    create_widget(
        env,
        name,
        WidgetSpec {
            color: "owner".into(),
            fail: false,
            conflict_once: false,
        },
    )
    .await
}

pub(crate) fn configmaps(env: &Env) -> Api<ConfigMap> {
    Api::namespaced(env.client.clone(), &env.ns)
}

async fn data_of(env: &Env, name: &str) -> Option<BTreeMap<String, String>> {
    let cm = configmaps(env).get_opt(name).await.unwrap()?;
    Some(cm.data.unwrap_or_default())
}

/// Waits until `plain-config` holds the color its owner wants.
async fn plain_config_holds_the_owners_color(env: &Env, what: &str) {
    eventually(what, || async move {
        data_of(env, "plain-config")
            .await
            .filter(|d| d["color"] == "owner")
            .map(|_| ())
    })
    .await;
}

fn runtime(env: &Env) -> DependentsRuntime {
    DependentsRuntime::new(env.client.clone()).field_manager("dependents-test")
}

/// The write requests (create, update, patch, delete) the embedded server
/// logged since `since`.
pub(crate) fn writes_since(env: &Env, since: usize) -> Vec<String> {
    let Some(server) = env.embedded() else {
        return Vec::new();
    };
    let (_, records) = server.request_log().records_since(since);
    records
        .into_iter()
        .filter(|r| {
            matches!(
                r.verb.as_str(),
                "create" | "update" | "patch" | "delete" | "deletecollection"
            )
        })
        .map(|r| format!("{} {} {}", r.verb, r.resource, r.name.unwrap_or_default()))
        .collect()
}

/// How many reads (get, list) the embedded server logged since `since`
/// (0 on a real server).
fn reads_since(env: &Env, since: usize) -> usize {
    env.embedded().map_or(0, |server| {
        let (_, records) = server.request_log().records_since(since);
        records
            .iter()
            .filter(|r| matches!(r.verb.as_str(), "get" | "list"))
            .count()
    })
}

/// Job `name` failed, as the Job controller reports it (backoff limit
/// reached).
pub(crate) async fn fail_job(env: &Env, name: &str) {
    let now = jiff::Timestamp::now().to_string();
    let failed = json!({"status": {
        "startTime": now,
        "failed": 1,
        "conditions": [
            {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit", "lastTransitionTime": now, "lastProbeTime": now},
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit", "lastTransitionTime": now, "lastProbeTime": now},
        ]
    }});
    Api::<Job>::namespaced(env.client.clone(), &env.ns)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&failed))
        .await
        .unwrap();
}

pub(crate) fn log_position(env: &Env) -> usize {
    env.embedded()
        .map_or(0, |s| s.request_log().records_since(0).0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_is_applied_only_once_what_it_depends_on_is_ready() {
    let env = env().await;
    let owner = owner(&env, "order").await;
    let rt = runtime(&env);
    let set = |flag: &str| {
        DesiredSet::builder()
            .dependent(Dependent::new("a", &cm("a", &[("ready", flag)])).ready(ready_flag))
            .dependent(Dependent::new("b", &cm("b", &[("x", "1")])).depends_on(["a"]))
            .build()
            .unwrap()
    };

    let first = converge(&rt, &owner, &set("no")).await.unwrap();
    assert_eq!(
        first.state("a"),
        Some(&DependentState::NotReady("not ready yet".into()))
    );
    assert_eq!(
        first.state("b"),
        Some(&DependentState::Waiting(vec!["a".into()]))
    );
    assert!(!first.is_ready());
    assert!(data_of(&env, "a").await.is_some());
    assert_eq!(data_of(&env, "b").await, None, "b must wait for a");

    let second = converge(&rt, &owner, &set("yes")).await.unwrap();
    assert!(second.is_ready(), "{}", second.summary());
    assert_eq!(data_of(&env, "b").await.unwrap()["x"], "1");
    let b = configmaps(&env).get("b").await.unwrap();
    let reference = &b.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(reference.uid, owner.uid().unwrap());
    assert_eq!(reference.controller, Some(true));
    assert_eq!(reference.block_owner_deletion, Some(true));
    assert_eq!(b.labels()["operator-fsm.io/dependent"], "b");
    assert_eq!(b.labels()["app.kubernetes.io/managed-by"], "operator-fsm");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn independent_branches_and_what_joins_them_are_created_in_one_converge() {
    let env = env().await;
    let owner = owner(&env, "branches").await;
    let set = DesiredSet::builder()
        .dependent(Dependent::new("left", &cm("left", &[("x", "1")])))
        .dependent(Dependent::new("right", &cm("right", &[("x", "2")])))
        .dependent(Dependent::new("join", &cm("join", &[("x", "3")])).depends_on(["left", "right"]))
        .build()
        .unwrap();
    let c = converge(&runtime(&env), &owner, &set).await.unwrap();
    assert!(c.is_ready(), "{}", c.summary());
    assert_eq!(c.applied.len(), 3);
    for name in ["left", "right", "join"] {
        assert!(data_of(&env, name).await.is_some(), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_precondition_holds_a_dependent_as_it_is_and_its_dependents_wait() {
    let env = env().await;
    let owner = owner(&env, "precondition").await;
    let rt = runtime(&env);
    let set = |holds: bool, value: &str| {
        DesiredSet::builder()
            .dependent(Dependent::new("gated", &cm("gated", &[("v", value)])).precondition(holds))
            .dependent(Dependent::new("after", &cm("after", &[])).depends_on(["gated"]))
            .build()
            .unwrap()
    };
    let held = converge(&rt, &owner, &set(false, "1")).await.unwrap();
    assert_eq!(
        held.state("gated"),
        Some(&DependentState::PreconditionUnmet)
    );
    assert_eq!(
        held.state("after"),
        Some(&DependentState::Waiting(vec!["gated".into()]))
    );
    assert_eq!(data_of(&env, "gated").await, None);

    let released = converge(&rt, &owner, &set(true, "1")).await.unwrap();
    assert!(released.is_ready(), "{}", released.summary());
    assert_eq!(data_of(&env, "gated").await.unwrap()["v"], "1");

    // Held again with another value: left as it is, not deleted.
    let held = converge(&rt, &owner, &set(false, "2")).await.unwrap();
    assert_eq!(
        held.state("gated"),
        Some(&DependentState::PreconditionUnmet)
    );
    assert_eq!(data_of(&env, "gated").await.unwrap()["v"], "1");
    assert!(held.pruned.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inactive_dependent_is_not_created_and_deleted_when_it_exists() {
    let env = env().await;
    let owner = owner(&env, "activation").await;
    let rt = runtime(&env);
    let set = |active: bool| {
        DesiredSet::builder()
            .dependent(Dependent::new("optional", &cm("optional", &[])).when(active))
            .dependent(Dependent::new("main", &cm("main", &[])).depends_on(["optional"]))
            .build()
            .unwrap()
    };
    let off = converge(&rt, &owner, &set(false)).await.unwrap();
    assert_eq!(off.state("optional"), Some(&DependentState::Inactive));
    assert!(
        off.is_ready(),
        "an inactive dependent holds nothing up: {}",
        off.summary()
    );
    assert_eq!(data_of(&env, "optional").await, None);
    assert!(data_of(&env, "main").await.is_some());

    converge(&rt, &owner, &set(true)).await.unwrap();
    assert!(data_of(&env, "optional").await.is_some());

    let off = converge(&rt, &owner, &set(false)).await.unwrap();
    assert_eq!(off.pruned, [format!("ConfigMap {}/optional", env.ns)]);
    assert_eq!(data_of(&env, "optional").await, None);
    assert!(data_of(&env, "main").await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_family_scales_up_and_down_and_what_it_no_longer_names_is_pruned() {
    let env = env().await;
    let owner = owner(&env, "family").await;
    let rt = runtime(&env);
    let family = |n: usize| {
        DesiredSet::builder()
            .dependent(Dependent::family(
                "shards",
                (0..n).map(|i| cm(&format!("shard-{i}"), &[("index", &i.to_string())])),
            ))
            .build()
            .unwrap()
    };
    let up = converge(&rt, &owner, &family(3)).await.unwrap();
    assert!(up.is_ready());
    assert_eq!(up.applied.len(), 3);
    let down = converge(&rt, &owner, &family(1)).await.unwrap();
    let mut pruned = down.pruned.clone();
    pruned.sort();
    assert_eq!(
        pruned,
        [
            format!("ConfigMap {}/shard-1", env.ns),
            format!("ConfigMap {}/shard-2", env.ns)
        ]
    );
    assert!(data_of(&env, "shard-0").await.is_some());
    assert_eq!(data_of(&env, "shard-1").await, None);

    // A key a newer set no longer has is pruned too.
    let renamed = DesiredSet::builder()
        .dependent(Dependent::new("other", &cm("other", &[])))
        .build()
        .unwrap();
    let c = converge(&rt, &owner, &renamed).await.unwrap();
    assert_eq!(c.pruned, [format!("ConfigMap {}/shard-0", env.ns)]);
}

/// How many list requests for ConfigMaps the embedded server logged since
/// `since` (`None` on a real server, whose requests are not logged).
fn configmap_lists_since(env: &Env, since: usize) -> Option<usize> {
    env.embedded().map(|server| {
        let (_, records) = server.request_log().records_since(since);
        records
            .iter()
            .filter(|r| r.verb == "list" && r.resource == "configmaps")
            .count()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_lists_again_only_when_the_shape_of_the_set_changed() {
    let env = env().await;
    let owner = owner(&env, "shape").await;
    let rt = runtime(&env);
    let family = |n: usize, value: &str| {
        DesiredSet::builder()
            .dependent(Dependent::family(
                "shards",
                (0..n).map(|i| cm(&format!("shard-{i}"), &[("v", value)])),
            ))
            .build()
            .unwrap()
    };
    let at = log_position(&env);
    converge(&rt, &owner, &family(2, "1")).await.unwrap();
    if let Some(lists) = configmap_lists_since(&env, at) {
        assert_eq!(lists, 1, "the first converge of an owner lists");
    }

    // Same shape, same content: no list.
    let at = log_position(&env);
    let again = converge(&rt, &owner, &family(2, "1")).await.unwrap();
    assert_eq!(again.unchanged, 2);
    if let Some(lists) = configmap_lists_since(&env, at) {
        assert_eq!(lists, 0, "an unchanged shape is not listed again");
    }

    // Same shape, new content: applied, still no list; a clone of the
    // runtime shares what it remembers.
    let at = log_position(&env);
    let changed = converge(&rt.clone(), &owner, &family(2, "2"))
        .await
        .unwrap();
    assert_eq!(changed.applied.len(), 2);
    if let Some(lists) = configmap_lists_since(&env, at) {
        assert_eq!(lists, 0, "new content in the same shape is not listed");
    }

    // A new shape lists, and prunes what it no longer names.
    let at = log_position(&env);
    let down = converge(&rt, &owner, &family(1, "2")).await.unwrap();
    assert_eq!(down.pruned, [format!("ConfigMap {}/shard-1", env.ns)]);
    if let Some(lists) = configmap_lists_since(&env, at) {
        assert_eq!(lists, 1, "a changed shape lists again");
    }
    assert_eq!(data_of(&env, "shard-1").await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_runtime_prunes_what_an_earlier_one_left_even_for_an_unchanged_shape() {
    let env = env().await;
    let owner = owner(&env, "restart").await;
    let two = DesiredSet::builder()
        .dependent(Dependent::new("kept", &cm("kept", &[])))
        .dependent(Dependent::new("dropped", &cm("dropped", &[])))
        .build()
        .unwrap();
    let one = DesiredSet::builder()
        .dependent(Dependent::new("kept", &cm("kept", &[])))
        .build()
        .unwrap();
    // This process remembers the smaller set as pruned; then another
    // (an older version still running) converges the larger one.
    converge(&runtime(&env), &owner, &one).await.unwrap();
    converge(&runtime(&env), &owner, &two).await.unwrap();
    assert!(data_of(&env, "dropped").await.is_some());

    // The next process (a fresh runtime) knows nothing: it lists.
    let restarted = runtime(&env);
    let c = converge(&restarted, &owner, &one).await.unwrap();
    assert_eq!(c.pruned, [format!("ConfigMap {}/dropped", env.ns)]);
    assert_eq!(data_of(&env, "dropped").await, None);
    assert!(data_of(&env, "kept").await.is_some());

    // A teardown forgets the owner: converging again lists.
    let torn = teardown(&restarted, &owner, &one).await.unwrap();
    assert!(torn.is_done(), "{torn:?}");
    let at = log_position(&env);
    converge(&restarted, &owner, &one).await.unwrap();
    if let Some(lists) = configmap_lists_since(&env, at) {
        assert_eq!(lists, 1, "a converge after a teardown lists");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_of_a_managed_field_is_restored_and_a_foreign_field_kept() {
    let env = env().await;
    let owner = owner(&env, "drift").await;
    let rt = runtime(&env);
    let set = DesiredSet::builder()
        .dependent(Dependent::new("config", &cm("config", &[("mine", "1")])))
        .build()
        .unwrap();
    converge(&rt, &owner, &set).await.unwrap();
    // Someone edits our field and adds one of their own.
    let patch = json!({"data": {"mine": "changed", "theirs": "kept"}});
    configmaps(&env)
        .patch("config", &as_manager("someone"), &Patch::Merge(&patch))
        .await
        .unwrap();

    let c = converge(&rt, &owner, &set).await.unwrap();
    assert!(c.is_ready(), "{}", c.summary());
    let data = data_of(&env, "config").await.unwrap();
    assert_eq!(data["mine"], "1");
    assert_eq!(data["theirs"], "kept");
}

/// Patch parameters of field manager `manager` (an ordinary update).
fn as_manager(manager: &str) -> PatchParams {
    PatchParams {
        field_manager: Some(manager.to_owned()),
        ..PatchParams::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_with_another_applier_fails_the_dependent_naming_it_unless_forced() {
    let env = env().await;
    let owner = owner(&env, "conflict").await;
    let rt = runtime(&env);
    let set = |force: bool| {
        let d = Dependent::new("config", &cm("config", &[("shared", "ours")]));
        DesiredSet::builder()
            .dependent(if force { d.force() } else { d })
            .build()
            .unwrap()
    };
    converge(&rt, &owner, &set(false)).await.unwrap();
    let theirs = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "config"}, "data": {"shared": "theirs"}});
    configmaps(&env)
        .patch(
            "config",
            &PatchParams::apply("other-operator").force(),
            &Patch::Apply(&theirs),
        )
        .await
        .unwrap();

    let c = converge(&rt, &owner, &set(false)).await.unwrap();
    let Some(DependentState::Failed(failure)) = c.state("config") else {
        panic!("{}", c.summary())
    };
    assert_eq!(
        failure.kind(),
        &FailureKind::Conflict {
            managers: vec!["other-operator".into()]
        }
    );
    assert!(failure.message().contains("other-operator"), "{failure}");
    assert_eq!(data_of(&env, "config").await.unwrap()["shared"], "theirs");

    let forced = converge(&rt, &owner, &set(true)).await.unwrap();
    assert!(forced.is_ready(), "{}", forced.summary());
    assert_eq!(data_of(&env, "config").await.unwrap()["shared"], "ours");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_job_is_a_failed_dependent() {
    let env = env().await;
    let owner = owner(&env, "job").await;
    let rt = runtime(&env);
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "migrate"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "busybox"}]}}}
    }))
    .unwrap();
    let set = DesiredSet::builder()
        .dependent(Dependent::new("migration", &job))
        .dependent(Dependent::new("app", &cm("app", &[])).depends_on(["migration"]))
        .build()
        .unwrap();
    let running = converge(&rt, &owner, &set).await.unwrap();
    assert!(
        matches!(
            running.state("migration"),
            Some(DependentState::NotReady(_))
        ),
        "{}",
        running.summary()
    );

    fail_job(&env, "migrate").await;
    let c = converge(&rt, &owner, &set).await.unwrap();
    assert!(c.is_failed());
    assert_eq!(
        c.state("migration"),
        Some(&DependentState::Failed(DependentFailure::new(
            FailureKind::ReadinessFailed,
            "the Job failed: Job has reached the specified backoff limit"
        )))
    );
    assert_eq!(
        c.state("app"),
        Some(&DependentState::Waiting(vec!["migration".into()]))
    );
    assert!(
        c.summary().starts_with("failed: migration"),
        "{}",
        c.summary()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_change_updates_in_place_and_a_converged_set_costs_no_write() {
    let env = env().await;
    let owner = owner(&env, "resync").await;
    let rt = runtime(&env);
    let set = |value: &str| {
        DesiredSet::builder()
            .dependent(Dependent::new(
                "a",
                &cm("a", &[("v", value), ("dropped", "soon")]),
            ))
            .dependent(Dependent::new("b", &cm("b", &[("v", value)])).depends_on(["a"]))
            .dependent(Dependent::family("f", [cm("f-0", &[]), cm("f-1", &[])]))
            .build()
            .unwrap()
    };
    converge(&rt, &owner, &set("1")).await.unwrap();
    let uid = configmaps(&env).get("a").await.unwrap().uid();

    let at = log_position(&env);
    let again = converge(&rt, &owner, &set("1")).await.unwrap();
    assert!(again.is_ready());
    assert!(again.applied.is_empty(), "{:?}", again.applied);
    assert_eq!(again.unchanged, 4);
    assert_eq!(writes_since(&env, at), Vec::<String>::new());
    if env.embedded().is_some() {
        // Four objects read; no list: the set has the shape the first
        // converge pruned.
        assert_eq!(reads_since(&env, at), 4);
    }

    let changed = converge(&rt, &owner, &set("2")).await.unwrap();
    assert_eq!(changed.applied.len(), 2, "{:?}", changed.applied);
    let a = configmaps(&env).get("a").await.unwrap();
    assert_eq!(a.uid(), uid, "updated in place");
    assert_eq!(a.data.unwrap()["v"], "2");

    // A field we stop applying is removed (our managed fields say so).
    let without = DesiredSet::builder()
        .dependent(Dependent::new("a", &cm("a", &[("v", "2")])))
        .dependent(Dependent::new("b", &cm("b", &[("v", "2")])).depends_on(["a"]))
        .dependent(Dependent::family("f", [cm("f-0", &[]), cm("f-1", &[])]))
        .build()
        .unwrap();
    let c = converge(&rt, &owner, &without).await.unwrap();
    assert_eq!(c.applied, [format!("ConfigMap {}/a", env.ns)]);
    assert!(!data_of(&env, "a").await.unwrap().contains_key("dropped"));
    let at = log_position(&env);
    converge(&rt, &owner, &without).await.unwrap();
    assert_eq!(writes_since(&env, at), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_the_server_refuses_is_a_failed_dependent_with_its_message() {
    let env = env().await;
    let owner = owner(&env, "invalid").await;
    let rt = runtime(&env);
    let set = DesiredSet::builder()
        .dependent(Dependent::new("bad", &cm("Not_A_Valid_Name", &[])))
        .dependent(Dependent::new("good", &cm("good", &[])))
        .build()
        .unwrap();
    for _ in 0..2 {
        let c = converge(&rt, &owner, &set).await.unwrap();
        let Some(DependentState::Failed(failure)) = c.state("bad") else {
            panic!("{}", c.summary())
        };
        assert_eq!(failure.kind(), &FailureKind::Refused { code: 422 });
        let message = failure.message();
        assert!(
            message.contains("Not_A_Valid_Name") && message.contains("422"),
            "{message}"
        );
        assert!(c.state("good").unwrap().is_ready());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_the_owner_does_not_own_is_taken_over_only_when_adopted() {
    let env = env().await;
    let owner = owner(&env, "adopt").await;
    let rt = runtime(&env);
    configmaps(&env)
        .create(
            &PostParams::default(),
            &cm("existing", &[("by", "someone")]),
        )
        .await
        .unwrap();
    let set = |adopt: bool| {
        let d = Dependent::new("existing", &cm("existing", &[("by", "operator")]));
        DesiredSet::builder()
            .dependent(if adopt { d.adopt() } else { d })
            .build()
            .unwrap()
    };
    let c = converge(&rt, &owner, &set(false)).await.unwrap();
    let Some(DependentState::Failed(failure)) = c.state("existing") else {
        panic!("{}", c.summary())
    };
    assert_eq!(failure.kind(), &FailureKind::NotOwned);
    let message = failure.message();
    assert!(
        message.contains("not owned") && message.contains("adopt()"),
        "{message}"
    );
    assert_eq!(data_of(&env, "existing").await.unwrap()["by"], "someone");

    let c = converge(&rt, &owner, &set(true)).await.unwrap();
    assert!(c.is_ready(), "{}", c.summary());
    let existing = configmaps(&env).get("existing").await.unwrap();
    assert_eq!(existing.data.unwrap()["by"], "operator");
    assert_eq!(
        existing.metadata.owner_references.unwrap()[0].uid,
        owner.uid().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_deletes_in_reverse_order_waiting_on_delete_postconditions() {
    let env = env().await;
    let owner = owner(&env, "teardown").await;
    let rt = runtime(&env);
    let set = DesiredSet::builder()
        .dependent(Dependent::new("base", &cm("base", &[])))
        .dependent(Dependent::new("middle", &cm("middle", &[])).depends_on(["base"]))
        .dependent(Dependent::new("top", &cm("top", &[])).depends_on(["middle"]))
        .build()
        .unwrap();
    assert!(converge(&rt, &owner, &set).await.unwrap().is_ready());
    // A finalizer keeps `middle` around after its deletion.
    let hold = json!({"metadata": {"finalizers": ["test.operator-fsm.io/hold"]}});
    configmaps(&env)
        .patch("middle", &PatchParams::default(), &Patch::Merge(&hold))
        .await
        .unwrap();

    let first = teardown(&rt, &owner, &set).await.unwrap();
    assert!(!first.is_done());
    assert_eq!(first.state("top"), Some(&TeardownState::Gone));
    assert!(matches!(
        first.state("middle"),
        Some(TeardownState::Deleting(_))
    ));
    assert_eq!(
        first.state("base"),
        Some(&TeardownState::Waiting(vec!["middle".into()]))
    );
    assert!(
        data_of(&env, "base").await.is_some(),
        "base waits for middle"
    );

    let release = json!({"metadata": {"finalizers": null}});
    configmaps(&env)
        .patch("middle", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    let second = teardown(&rt, &owner, &set).await.unwrap();
    assert!(second.is_done(), "{}", second.summary());
    assert_eq!(second.deleted, [format!("ConfigMap {}/base", env.ns)]);
    for name in ["base", "middle", "top"] {
        assert_eq!(data_of(&env, name).await, None, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_delete_postcondition_holds_teardown_until_it_is_met() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let env = env().await;
    let owner = owner(&env, "postcondition").await;
    let rt = runtime(&env);
    configmaps(&env)
        .create(&PostParams::default(), &cm("unowned", &[]))
        .await
        .unwrap();
    // Some external cleanup the leaf's deletion starts, done when it says.
    let cleaned_up = Arc::new(AtomicBool::new(false));
    let done = cleaned_up.clone();
    let set = DesiredSet::builder()
        .dependent(Dependent::new("base", &cm("base", &[])))
        .dependent(
            Dependent::new("leaf", &cm("leaf", &[]))
                .depends_on(["base"])
                .delete_postcondition(move |live| live.is_none() && done.load(Ordering::SeqCst)),
        )
        .dependent(Dependent::new("unowned", &cm("unowned", &[])))
        .build()
        .unwrap();
    converge(&rt, &owner, &set).await.unwrap();

    let held = teardown(&rt, &owner, &set).await.unwrap();
    assert!(matches!(
        held.state("leaf"),
        Some(TeardownState::Deleting(_))
    ));
    assert_eq!(
        held.state("base"),
        Some(&TeardownState::Waiting(vec!["leaf".into()]))
    );
    assert_eq!(data_of(&env, "leaf").await, None);
    assert!(data_of(&env, "base").await.is_some());

    cleaned_up.store(true, Ordering::SeqCst);
    let done = teardown(&rt, &owner, &set).await.unwrap();
    assert!(done.is_done(), "{}", done.summary());
    assert_eq!(data_of(&env, "base").await, None);
    // The object of the same name the owner does not own is not touched.
    assert_eq!(done.state("unowned"), Some(&TeardownState::Gone));
    assert!(data_of(&env, "unowned").await.is_some());
}

#[test]
fn set_errors_name_the_keys() {
    let err = DesiredSet::builder()
        .dependent(Dependent::new("a", &cm("a", &[])).depends_on(["ghost"]))
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "dependent `a` depends on `ghost`, which is not in the set"
    );
    assert!(matches!(
        DesiredSet::builder()
            .dependent(Dependent::new("a", &cm("a", &[])).depends_on(["a"]))
            .build(),
        Err(SetError::Cycle(_))
    ));
}

// ---- in a machine, through the reconciler ----

#[derive(Debug, thiserror::Error)]
enum DeployError {
    #[error(transparent)]
    Dependents(#[from] DependentsError),
    #[error(transparent)]
    Set(#[from] SetError),
    #[error("dependents are still being deleted: {0}")]
    TearingDown(String),
}

impl Classify for DeployError {
    fn class(&self) -> fsm_core::ErrorClass {
        match self {
            DeployError::Dependents(e) => e.class(),
            DeployError::Set(_) => fsm_core::ErrorClass::Permanent,
            DeployError::TearingDown(_) => fsm_core::ErrorClass::RETRY_WITHOUT_ATTEMPT,
        }
    }
}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Widget, context = Ctx, error = DeployError, cleanup = remove)]
enum Deploy {
    #[fsm(initial, handler = deploy, next(Running))]
    Deploying,
    #[fsm(ready, handler = running)]
    Running,
    #[fsm(failed)]
    Failed,
}

fn desired(widget: &Widget) -> Result<DesiredSet, SetError> {
    let name = widget.name_any();
    DesiredSet::builder()
        .dependent(Dependent::new(
            "config",
            &cm(&format!("{name}-config"), &[("color", &widget.spec.color)]),
        ))
        .dependent(
            Dependent::new("gate", &cm(&format!("{name}-gate"), &[]))
                .depends_on(["config"])
                .ready_as(|live: &ConfigMap| {
                    live.data.as_ref().is_some_and(|d| d.contains_key("open"))
                }),
        )
        .build()
}

async fn deploy(cx: &mut Step<'_, Deploy>) -> Result<Transition<Deploy>, DeployError> {
    let set = desired(cx.resource())?;
    Ok(converge_state(cx, &set, Deploy::Running).await?)
}

async fn running(cx: &mut Step<'_, Deploy>) -> Result<Transition<Deploy>, DeployError> {
    cx.converge(&desired(cx.resource())?).await?;
    Ok(Transition::stay())
}

async fn remove(cx: &mut Step<'_, Deploy>, _: &Deploy) -> Result<(), DeployError> {
    let t = cx.teardown(&desired(cx.resource())?).await?;
    if t.is_done() {
        Ok(())
    } else {
        Err(DeployError::TearingDown(t.summary()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_converges_in_a_state_and_reports_dependents_ready() {
    let env = env().await;
    let client = env.client.clone();
    let fsm = FsmReconciler::<Deploy>::builder(client.clone(), StatusStore::new())
        .options(
            ReconcilerOptions::default()
                .poll_interval(Duration::from_secs(3600))
                .error_requeue(Duration::from_millis(100)),
        )
        .dependents(
            DependentsRuntime::new(client.clone()).pending_requeue(Duration::from_millis(200)),
        )
        .build();
    let widgets: Api<Widget> = Api::namespaced(client.clone(), &env.ns);
    let controller = widgets_owning_configmaps(&client, &env.ns, &client)
        .run(fsm.reconcile(), fsm.error_policy(), ctx(&client))
        .for_each(|_| async {});
    let controller = tokio::spawn(controller);
    owner(&env, "machine").await;

    let pending = eventually("DependentsReady pending", || {
        let widgets = widgets.clone();
        async move {
            let w = widgets.get("machine").await.ok()?;
            let c = condition(&w, "DependentsReady")?.clone();
            (c.status == "False").then_some(c)
        }
    })
    .await;
    assert_eq!(pending.reason, "Pending");
    assert!(
        pending.message.contains("gate (not ready"),
        "{}",
        pending.message
    );
    assert!(data_of(&env, "machine-config").await.is_some());

    // Open the gate: the ConfigMap's change wakes the owner, which moves on.
    let open = json!({"data": {"open": "yes"}});
    configmaps(&env)
        .patch("machine-gate", &as_manager("opener"), &Patch::Merge(&open))
        .await
        .unwrap();
    let widget = wait_for_status_state(&env, "machine", "Running").await;
    let ready = eventually("DependentsReady true", || {
        let widgets = widgets.clone();
        async move {
            let w = widgets.get("machine").await.ok()?;
            let c = condition(&w, "DependentsReady")?.clone();
            (c.status == "True").then_some(c)
        }
    })
    .await;
    assert_eq!(ready.reason, "Ready");
    let _ = widget;

    // Deletion tears the dependents down through the machine's cleanup.
    widgets
        .delete("machine", &Default::default())
        .await
        .unwrap();
    eventually("dependents gone", || {
        let env = &env;
        async move { data_of(env, "machine-config").await.is_none().then_some(()) }
    })
    .await;
    controller.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_runtime_converge_says_so() {
    let widget = Widget::new("w", WidgetSpec::default());
    let client =
        Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    let harness = fsm_core::Harness::<Deploy>::new(
        widget,
        Ctx {
            client,
            log: Default::default(),
        },
    );
    let err = harness.run_handler().await.unwrap_err();
    assert!(err.to_string().contains("no dependents runtime"), "{err}");
}

// ---- without a machine ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependents_reconciler_converges_reports_and_repairs_on_a_dependent_change() {
    let env = env().await;
    let client = env.client.clone();
    let reconciler = DependentsReconciler::<Widget, ()>::with_runtime(
        DependentsRuntime::new(client.clone()).pending_requeue(Duration::from_millis(200)),
        |w: &Widget, _: &()| {
            DesiredSet::builder()
                .dependent(Dependent::new(
                    "config",
                    &cm(
                        &format!("{}-config", w.name_any()),
                        &[("color", &w.spec.color)],
                    ),
                ))
                .build()
        },
    );
    let widgets: Api<Widget> = Api::namespaced(client.clone(), &env.ns);
    let controller = widgets_owning_configmaps(&client, &env.ns, &client)
        .run(
            reconciler.reconcile(),
            reconciler.error_policy(),
            Arc::new(()),
        )
        .for_each(|_| async {});
    let controller = tokio::spawn(controller);
    owner(&env, "plain").await;

    let ready = eventually("DependentsReady", || {
        let widgets = widgets.clone();
        async move {
            let w = widgets.get("plain").await.ok()?;
            let c = condition(&w, "DependentsReady")?.clone();
            (c.status == "True").then_some(c)
        }
    })
    .await;
    assert_eq!(ready.message, "all 1 active dependent(s) ready");
    assert!(
        condition(&widgets.get("plain").await.unwrap(), "Ready").is_none(),
        "no machine, no record conditions"
    );
    // Converged: looked at again after the resync interval even without
    // an event.
    let (action, _) = reconciler
        .reconcile_object(Arc::new(widgets.get("plain").await.unwrap()), Arc::new(()))
        .await
        .unwrap();
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(fsm_kube::dependents::DEFAULT_RESYNC)
    );

    // Someone edits the dependent: repaired. The controller's watch of
    // ConfigMaps may have listed only now (it starts with the owners'),
    // and the edit is repaired either way: through that list or an event.
    // Once repaired, that watch is up, so the deletion below is an event.
    configmaps(&env)
        .patch(
            "plain-config",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"color": "edited"}})),
        )
        .await
        .unwrap();
    plain_config_holds_the_owners_color(&env, "the edited dependent repaired").await;

    // Someone deletes the dependent: its watch wakes the owner, which
    // recreates it.
    configmaps(&env)
        .delete("plain-config", &Default::default())
        .await
        .unwrap();
    plain_config_holds_the_owners_color(&env, "the dependent recreated").await;
    controller.abort();
}

// ---- observability and reads ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applies_skips_and_prunes_are_counted_and_published_as_events() {
    let env = env().await;
    let owner = owner(&env, "observed").await;
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = fsm_kube::FsmMetrics::new(&mut registry);
    let recorder = kube::runtime::events::Recorder::new(
        env.client.clone(),
        kube::runtime::events::Reporter::from("dependents-test".to_owned()),
    );
    let rt = runtime(&env).metrics(metrics).recorder(recorder);
    let set = |n: usize| {
        DesiredSet::builder()
            .dependent(Dependent::family(
                "items",
                (0..n).map(|i| cm(&format!("item-{i}"), &[])),
            ))
            .build()
            .unwrap()
    };
    converge(&rt, &owner, &set(2)).await.unwrap();
    converge(&rt, &owner, &set(2)).await.unwrap();
    converge(&rt, &owner, &set(1)).await.unwrap();

    let text = encode_metrics(&registry).unwrap();
    for line in [
        r#"operator_fsm_dependent_operations_total{kind="ConfigMap",outcome="applied"} 2"#,
        r#"operator_fsm_dependent_operations_total{kind="ConfigMap",outcome="unchanged"} 3"#,
        r#"operator_fsm_dependent_operations_total{kind="ConfigMap",outcome="pruned"} 1"#,
    ] {
        assert!(text.contains(line), "{line} not in\n{text}");
    }
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(env.client.clone(), &env.ns);
    let mut seen: Vec<(String, String)> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("observed"))
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect();
    seen.sort();
    let ns = &env.ns;
    assert_eq!(
        seen,
        [
            (
                "Created".to_owned(),
                format!("created ConfigMap {ns}/item-0 (dependent items)")
            ),
            (
                "Created".to_owned(),
                format!("created ConfigMap {ns}/item-1 (dependent items)")
            ),
            (
                "Pruned".to_owned(),
                format!("deleted ConfigMap {ns}/item-1: no longer desired")
            ),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_watch_cache_a_converged_set_costs_no_request() {
    use kube::runtime::{WatchStreamExt, reflector};
    let env = env().await;
    let owner = owner(&env, "cached").await;
    let kind = DependentKind::of::<ConfigMap>();
    let writer = reflector::store::Writer::<kube::api::DynamicObject>::new(kind.resource.clone());
    let reader = writer.as_reader();
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.ns, &kind.resource);
    let watch = reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .applied_objects()
        .for_each(|event| async move {
            if let Err(error) = event {
                tracing::warn!(%error, "cache watch");
            }
        });
    let watch = tokio::spawn(watch);
    tokio::time::timeout(Duration::from_secs(30), reader.wait_until_ready())
        .await
        .expect("the cache fills within 30 s")
        .unwrap();
    let rt = runtime(&env).cache(kind, reader.clone());
    let set = DesiredSet::builder()
        .dependent(Dependent::new("a", &cm("a", &[("v", "1")])))
        .dependent(Dependent::new("b", &cm("b", &[("v", "1")])).depends_on(["a"]))
        .build()
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(30), converge(&rt, &owner, &set))
        .await
        .expect("the first converge ends within 30 s");
    assert!(first.unwrap().is_ready());
    eventually("the cache sees both", || {
        let reader = reader.clone();
        async move { (reader.state().len() == 2).then_some(()) }
    })
    .await;

    let at = log_position(&env);
    let c = converge(&rt, &owner, &set).await.unwrap();
    assert_eq!(c.unchanged, 2);
    assert!(c.applied.is_empty());
    if let Some(server) = env.embedded() {
        let (_, records) = server.request_log().records_since(at);
        let requests: Vec<(String, Option<String>)> = records
            .into_iter()
            .filter(|r| r.resource == "configmaps" && r.verb != "watch")
            .map(|r| (r.verb, r.name))
            .collect();
        // Objects and the pruning list read from the cache: no request.
        assert_eq!(requests, []);
    }
    // Pruning finds what the cache holds.
    let smaller = DesiredSet::builder()
        .dependent(Dependent::new("a", &cm("a", &[("v", "1")])))
        .build()
        .unwrap();
    let c = converge(&rt, &owner, &smaller).await.unwrap();
    assert_eq!(c.pruned, [format!("ConfigMap {}/b", env.ns)]);
    watch.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_harness_lends_the_runtime_to_a_handler() {
    let env = env().await;
    let widget = owner(&env, "harnessed").await;
    let harness = fsm_core::Harness::<Deploy>::new(
        widget,
        Ctx {
            client: env.client.clone(),
            log: Default::default(),
        },
    )
    .with_extension(Arc::new(
        runtime(&env).pending_requeue(Duration::from_secs(7)),
    ));
    let transition = harness.run_handler().await.unwrap();
    // The gate is not open: the state waits the runtime's requeue.
    assert_eq!(transition, Transition::wait(Duration::from_secs(7)));
    assert!(data_of(&env, "harnessed-config").await.is_some());
}

/// The registry's metrics in the Prometheus text format.
fn encode_metrics(
    registry: &prometheus_client::registry::Registry,
) -> Result<String, std::fmt::Error> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)?;
    Ok(text)
}
