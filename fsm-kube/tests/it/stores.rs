//! The ConfigMap, Secret and in-memory stores through a real `Controller`,
//! restarts mid-workflow, and conflicts injected by another writer; record
//! objects of two kinds or two machines sharing a name, a re-created object
//! meeting its predecessor's record, and the longest names; on the
//! embedded API server, or the real kube-apiserver named by
//! `FSM_REAL_APISERVER_KUBECONFIG`.

use crate::common;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use fsm_kube::fsm_core::{EphemeralStore, Fsm, StateRecord, Timestamp};
use fsm_kube::prelude::*;
use fsm_kube::store::{
    MANAGED_BY_LABEL, OWNER_KIND_LABEL, OWNER_LABEL, OWNER_UID_LABEL, legacy_record_object_name,
};
use fsm_kube::{
    ConfigMapStore, DerivingStore, KubeResource, KubeStore, SecretStore, StatusStore, Target,
};
use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{
    Api, ApiResource, DeleteParams, GroupVersionKind, ListParams, ObjectMeta, Patch, PatchParams,
    PostParams,
};
use kube::runtime::{Controller, watcher};
use kube::{CustomResourceExt, Resource, ResourceExt};

/// A kind named `Widget` too, in another group, with a machine of its own.
mod other {
    use fsm_kube::prelude::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use kube::CustomResource;

    #[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
    #[kube(
        group = "other.operator-fsm.io",
        version = "v1",
        kind = "Widget",
        namespaced
    )]
    #[kube(status = "OtherStatus")]
    pub struct OtherSpec {
        pub size: u32,
    }

    #[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
    pub struct OtherStatus {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub conditions: Option<Vec<Condition>>,
    }

    #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[fsm(resource = Widget)]
    pub enum OtherState {
        #[fsm(initial, handler = grow, next(Grown))]
        Growing,
        #[fsm(ready, final)]
        Grown { size: u32 },
        #[fsm(failed)]
        Failed,
    }

    async fn grow(
        cx: &mut Step<'_, OtherState>,
    ) -> Result<Transition<OtherState>, std::convert::Infallible> {
        Ok(Transition::next(OtherState::Grown {
            size: cx.resource().spec.size,
        }))
    }
}

/// A second machine on the tests' `Widget`: one step, then it rests.
#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Widget)]
enum AuditState {
    #[fsm(initial, handler = audit, next(Audited))]
    Auditing,
    #[fsm(ready, final)]
    Audited { color: String },
    #[fsm(failed)]
    Failed,
}

async fn audit(cx: &mut Step<'_, AuditState>) -> Result<Transition<AuditState>, Infallible> {
    Ok(Transition::next(AuditState::Audited {
        color: cx.resource().spec.color.clone(),
    }))
}

/// Runs machine `S` over the objects of the test's namespace with `store`,
/// without events, and with conditions when `conditions` (two machines on
/// one kind would overwrite each other's).
fn run_machine<S>(
    env: &Env,
    store: impl KubeStore<S::Resource>,
    context: S::Context,
    conditions: bool,
) -> tokio::task::JoinHandle<()>
where
    S: Fsm,
    S::Resource: KubeResource<Scope = NamespaceResourceScope>,
{
    let fsm = FsmReconciler::<S>::builder(env.client.clone(), store)
        .options(
            ReconcilerOptions::default()
                .poll_interval(Duration::from_secs(3600))
                .error_requeue(Duration::from_millis(100))
                .events(false)
                .conditions(conditions),
        )
        .build();
    let api: Api<S::Resource> = Api::namespaced(env.client.clone(), &env.ns);
    tokio::spawn(
        Controller::new(api, watcher::Config::default())
            .run(fsm.reconcile(), fsm.error_policy(), Arc::new(context))
            .for_each(|_| async {}),
    )
}

/// The record objects of kind `O` in the test's namespace.
async fn record_objects<O: RecordObject>(env: &Env) -> Vec<O> {
    let api: Api<O> = Api::namespaced(env.client.clone(), &env.ns);
    let selector = format!("{}={}", MANAGED_BY_LABEL.0, MANAGED_BY_LABEL.1);
    api.list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
}

/// The state in a record object.
fn state_of<O: RecordObject>(object: &O) -> Option<String> {
    let text = object.record_text()?.ok()?;
    let record: serde_json::Value = serde_json::from_str(&text).ok()?;
    record.get("state")?.as_str().map(str::to_owned)
}

async fn wait_for_object_state<O: RecordObject>(env: &Env, name: &str, state: &str) {
    eventually(&format!("{name} in {state}"), || async {
        (object_store_state::<O>(env, name).await.as_deref() == Some(state)).then_some(())
    })
    .await;
}

async fn ready_condition(env: &Env, name: &str) -> Widget {
    let api: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    eventually("Ready=True", || {
        let api = api.clone();
        async move {
            let w = api.get(name).await.ok()?;
            condition(&w, "Ready")
                .filter(|c| c.status == "True")
                .map(|_| w.clone())
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configmap_store_keeps_an_owned_labelled_record() {
    let env = env().await;
    let client = env.client.clone();
    let controller = run_controller(&env, ConfigMapStore::new(client.clone()), ctx(&client));
    let widget = create_widget(&env, "cm", WidgetSpec::colored("blue")).await;
    wait_for_object_state::<ConfigMap>(&env, "cm", "Ready").await;
    let widget_now = ready_condition(&env, "cm").await;
    assert!(
        widget_now.status.unwrap().fsm.is_none(),
        "the record is not in the status"
    );

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &env.ns);
    let record_name = record_object_name_for::<WidgetState>("cm");
    assert!(
        record_name.starts_with("cm.widget.fsm-")
            && record_name.len() == "cm.widget.fsm-".len() + 10,
        "{record_name}"
    );
    let record = cms.get(&record_name).await.unwrap();
    assert_eq!(record.labels()[OWNER_LABEL], "cm");
    assert_eq!(record.labels()[OWNER_KIND_LABEL], "Widget");
    assert_eq!(record.labels()[OWNER_UID_LABEL], widget.uid().unwrap());
    let owner = &record.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Widget", widget.uid().unwrap().as_str())
    );
    // The owner's deletion in the foreground waits for the record object,
    // and the object has one controller.
    assert_eq!(owner.block_owner_deletion, Some(true), "{owner:?}");
    assert_eq!(owner.controller, Some(true), "{owner:?}");

    // Deletion runs the cleanup, then the record object goes too.
    let widgets: Api<Widget> = Api::namespaced(client.clone(), &env.ns);
    widgets.delete("cm", &Default::default()).await.unwrap();
    eventually("the record ConfigMap to go", || {
        let cms = cms.clone();
        let record_name = record_name.clone();
        async move {
            cms.get_opt(&record_name)
                .await
                .unwrap()
                .is_none()
                .then_some(())
        }
    })
    .await;
    controller.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secret_store_keeps_the_record_out_of_the_status() {
    let env = env().await;
    let client = env.client.clone();
    let controller = run_controller(
        &env,
        SecretStore::namespaced(client.clone(), &env.ns),
        ctx(&client),
    );
    create_widget(&env, "sec", WidgetSpec::colored("blue")).await;
    wait_for_object_state::<Secret>(&env, "sec", "Ready").await;
    ready_condition(&env, "sec").await;
    controller.abort();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &env.ns);
    assert_eq!(
        secrets
            .get(&record_object_name_for::<WidgetState>("sec"))
            .await
            .unwrap()
            .type_
            .as_deref(),
        Some("Opaque")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ephemeral_store_runs_the_workflow_in_memory() {
    let env = env().await;
    let client = env.client.clone();
    let controller = run_controller(&env, EphemeralStore::new(), ctx(&client));
    create_widget(&env, "mem", WidgetSpec::colored("blue")).await;
    let widget = ready_condition(&env, "mem").await;
    controller.abort();
    assert!(widget.status.unwrap().fsm.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_workflow_resumes_where_the_status_says() {
    let env = env().await;
    let client = env.client.clone();
    let first_ctx = ctx(&client);
    let first = run_controller(&env, StatusStore::new(), first_ctx.clone());
    create_held_widget(&env, "r").await;
    wait_for_status_state(&env, "r", "Configuring").await;
    first.abort();
    let _ = first.await;

    let second_ctx = ctx(&client);
    let second = run_controller(&env, StatusStore::new(), second_ctx.clone());
    release_hold(&env, "r").await;
    let widget = wait_for_status_state(&env, "r", "Ready").await;
    second.abort();
    let record = widget
        .status
        .unwrap()
        .fsm
        .unwrap()
        .record::<WidgetState>()
        .unwrap();
    let path: Vec<_> = record.history.iter().map(|h| h.to.as_str()).collect();
    assert_eq!(path, ["Pending", "Configuring", "Ready"]);
    assert_eq!(first_ctx.log(), ["start:r"]);
    assert_eq!(
        second_ctx.log(),
        ["configure:r"],
        "the new controller did not start over"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_the_deriving_store_recomputes_the_state() {
    let env = env().await;
    let client = env.client.clone();
    let first_ctx = ctx(&client);
    let first = run_controller(&env, EphemeralStore::new(), first_ctx.clone());
    create_widget(&env, "d", WidgetSpec::colored("blue")).await;
    ready_condition(&env, "d").await;
    first.abort();
    let _ = first.await;
    assert_eq!(first_ctx.log(), ["start:d", "configure:d"]);

    // The world says the ConfigMap exists: the widget is Ready.
    let derive_client = client.clone();
    let derive_ns = env.ns.clone();
    let store = DerivingStore::<WidgetState>::new(Arc::new(move |widget: Arc<Widget>| {
        let cms: Api<ConfigMap> = Api::namespaced(derive_client.clone(), &derive_ns);
        Box::pin(async move {
            let name = format!("{}-config", widget.name_any());
            cms.get_opt(&name)
                .await
                .ok()
                .flatten()
                .map(|_| WidgetState::Ready { config_map: name })
        })
    }));
    let second_ctx = ctx(&client);
    let second = run_controller(&env, store, second_ctx.clone());
    // Touch the widget so the new controller reconciles it now.
    let widgets: Api<Widget> = Api::namespaced(client.clone(), &env.ns);
    widgets
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    second.abort();
    assert!(
        second_ctx.log().is_empty(),
        "nothing re-ran: {:?}",
        second_ctx.log()
    );
    let widget = widgets.get("d").await.unwrap();
    assert_eq!(condition(&widget, "Ready").unwrap().status, "True");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_written_between_handler_and_commit_is_rebased_over_not_rerun() {
    let env = env().await;
    let client = env.client.clone();
    let ctx = ctx(&client);
    let controller = run_controller(&env, StatusStore::new(), ctx.clone());
    let spec = WidgetSpec {
        conflict_once: true,
        ..WidgetSpec::colored("blue")
    };
    create_widget(&env, "once", spec).await;
    let widget = wait_for_status_state(&env, "once", "Ready").await;
    controller.abort();
    let record = widget
        .status
        .unwrap()
        .fsm
        .unwrap()
        .record::<WidgetState>()
        .unwrap();
    let path: Vec<_> = record
        .history
        .iter()
        .map(|h| (h.seq, h.to.as_str()))
        .collect();
    assert_eq!(path, [(1, "Pending"), (2, "Configuring"), (3, "Ready")]);
    // The handler's label moved the object's version under the commit; a
    // change outside the record and the spec does not void the decision,
    // so the commit was rebased over it and the handler ran once. (A
    // change of the record or the spec is a conflict that commits nothing:
    // status_store.rs.)
    assert_eq!(ctx.log().iter().filter(|l| *l == "start:once").count(), 1);
    // The refused first write is counted by the embedded server's request
    // log; a real kube-apiserver has none.
    if let Some(server) = env.embedded() {
        let conflicts = server
            .request_log()
            .records()
            .iter()
            .filter(|r| r.code == 409 && r.subresource.as_deref() == Some("status"))
            .count();
        assert_eq!(conflicts, 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_from_another_writer_lose_and_duplicate_nothing() {
    let env = env().await;
    let client = env.client.clone();
    let ctx = ctx(&client);
    let controller = run_controller(&env, StatusStore::new(), ctx.clone());
    let names: Vec<String> = (0..5).map(|i| format!("c{i}")).collect();
    for name in &names {
        create_held_widget(&env, name).await;
    }
    // Another writer keeps changing the widgets while they work.
    let widgets: Api<Widget> = Api::namespaced(client.clone(), &env.ns);
    let writer = {
        let widgets = widgets.clone();
        let names = names.clone();
        tokio::spawn(async move {
            for round in 0..60 {
                for name in &names {
                    let patch =
                        serde_json::json!({"metadata": {"labels": {"round": round.to_string()}}});
                    let _ = widgets
                        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await;
                }
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    for name in &names {
        release_hold(&env, name).await;
    }
    for name in &names {
        let widget = wait_for_status_state(&env, name, "Ready").await;
        let record = widget
            .status
            .unwrap()
            .fsm
            .unwrap()
            .record::<WidgetState>()
            .unwrap();
        let seqs: Vec<u64> = record.history.iter().map(|h| h.seq).collect();
        assert_eq!(seqs, [1, 2, 3], "{name}: every transition exactly once");
    }
    writer.await.unwrap();
    controller.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_of_two_kinds_and_two_machines_with_one_name_do_not_collide() {
    let env = env().await;
    let client = env.client.clone();
    env.cluster
        .install_crd(&other::Widget::crd())
        .await
        .unwrap();
    let ctx = ctx(&client);
    let controllers = [
        run_controller(&env, ConfigMapStore::new(client.clone()), ctx.clone()),
        run_machine::<AuditState>(&env, ConfigMapStore::new(client.clone()), (), false),
        run_machine::<other::OtherState>(&env, ConfigMapStore::new(client.clone()), (), true),
    ];
    create_widget(&env, "same", WidgetSpec::colored("green")).await;
    let others: Api<other::Widget> = Api::namespaced(client.clone(), &env.ns);
    others
        .create(
            &Default::default(),
            &other::Widget::new("same", other::OtherSpec { size: 3 }),
        )
        .await
        .unwrap();

    // One record object per (kind, machine), each in its machine's state.
    let states = eventually("three records, each at rest", || async {
        let mut states: Vec<String> = record_objects::<ConfigMap>(&env)
            .await
            .iter()
            .filter_map(state_of)
            .collect();
        states.sort();
        (states == ["Audited", "Grown", "Ready"]).then_some(states)
    })
    .await;
    // The store writes the record object, then the conditions: the
    // controllers stop once the conditions are there too.
    let widget = ready_condition(&env, "same").await;
    let conditions = eventually("the other kind's Ready=True", || async {
        let other = others.get("same").await.ok()?;
        let conditions = other.status.and_then(|s| s.conditions).unwrap_or_default();
        conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
            .then_some(conditions)
    })
    .await;
    for controller in controllers {
        controller.abort();
    }
    assert_eq!(states.len(), 3);
    assert_eq!(ctx.log(), ["start:same", "configure:same"]);
    assert!(condition(&widget, "Degraded").is_none_or(|c| c.status == "False"));
    assert!(
        !conditions
            .iter()
            .any(|c| c.type_ == "Degraded" && c.status == "True"),
        "{conditions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_object_starts_over_instead_of_resuming_its_predecessors_record() {
    let env = env().await;
    let client = env.client.clone();
    let widgets: Api<Widget> = Api::namespaced(client.clone(), &env.ns);

    // The first "again" stops in Configuring, its record in a ConfigMap.
    let first_ctx = ctx(&client);
    let first = run_controller(&env, ConfigMapStore::new(client.clone()), first_ctx.clone());
    let old = create_held_widget(&env, "again").await;
    wait_for_object_state::<ConfigMap>(&env, "again", "Configuring").await;
    first.abort();
    let _ = first.await;

    // It is deleted, its dependents orphaned: the record object stays.
    widgets
        .patch(
            "again",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    widgets
        .delete("again", &DeleteParams::orphan())
        .await
        .unwrap();
    eventually("the first again to go", || {
        let widgets = widgets.clone();
        async move {
            widgets
                .get_opt("again")
                .await
                .unwrap()
                .is_none()
                .then_some(())
        }
    })
    .await;
    let stale_records = record_objects::<ConfigMap>(&env).await;
    assert_eq!(stale_records.len(), 1, "the orphaned record stays");
    assert_eq!(state_of(&stale_records[0]).as_deref(), Some("Configuring"));

    // A new "again": its workflow starts from the top.
    let new = create_widget(&env, "again", WidgetSpec::colored("red")).await;
    assert_ne!(new.uid(), old.uid());
    let second_ctx = ctx(&client);
    let second = run_controller(
        &env,
        ConfigMapStore::new(client.clone()),
        second_ctx.clone(),
    );
    wait_for_object_state::<ConfigMap>(&env, "again", "Ready").await;
    ready_condition(&env, "again").await;
    second.abort();
    assert_eq!(second_ctx.log(), ["start:again", "configure:again"]);
    let records = record_objects::<ConfigMap>(&env).await;
    assert_eq!(
        records.len(),
        1,
        "the stale record was replaced: {records:?}"
    );
    assert_eq!(
        records[0].name_any(),
        record_object_name_for::<WidgetState>("again")
    );
    assert_eq!(records[0].labels()[OWNER_UID_LABEL], new.uid().unwrap());
    let mine: Vec<&ConfigMap> = records
        .iter()
        .filter(|r| state_of(*r).as_deref() == Some("Ready"))
        .collect();
    assert_eq!(mine.len(), 1, "{records:?}");
    let text = mine[0].record_text().unwrap().unwrap();
    let record: serde_json::Value = serde_json::from_str(&text).unwrap();
    let path: Vec<&str> = record["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["to"].as_str().unwrap())
        .collect();
    assert_eq!(path, ["Pending", "Configuring", "Ready"]);
    assert_eq!(record["history"][0]["seq"], 1);
    assert_eq!(
        mine[0].owner_references()[0].uid,
        new.uid().unwrap(),
        "the record object belongs to the new widget"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_longest_object_names_get_valid_record_objects() {
    let env = env().await;
    let client = env.client.clone();
    // 253 characters, the most an object name may have (in parts of at
    // most 63, which the embedded server requires).
    let name = format!(
        "{}.{}.{}.{}",
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(61)
    );
    assert_eq!(name.len(), 253);
    let controller = run_machine::<AuditState>(&env, SecretStore::new(client.clone()), (), true);
    create_widget(&env, &name, WidgetSpec::colored("long")).await;
    let record = eventually("the record at rest", || async {
        record_objects::<Secret>(&env)
            .await
            .into_iter()
            .find(|r| state_of(r).as_deref() == Some("Audited"))
    })
    .await;
    controller.abort();
    let record_name = record.name_any();
    assert!(record_name.len() <= 253, "{record_name}");
    assert!(record_name.starts_with(&name[..100]), "{record_name}");
    let owner_label = &record.labels()[OWNER_LABEL];
    assert!(owner_label.len() <= 63, "{owner_label}");
    assert!(owner_label.starts_with("aaaa"), "{owner_label}");
}

/// Puts `text` in a legacy record object of `name` (`<name>-fsm`), owned by
/// `owner`, as the stores wrote it before record objects were named by
/// kind and machine.
async fn plant_legacy(env: &Env, name: &str, owner: &Widget, text: String) {
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let metadata = ObjectMeta {
        name: Some(legacy_record_object_name(name)),
        labels: Some(
            [
                (MANAGED_BY_LABEL.0.to_owned(), MANAGED_BY_LABEL.1.to_owned()),
                (OWNER_LABEL.to_owned(), name.to_owned()),
            ]
            .into(),
        ),
        owner_references: Some(vec![owner.controller_owner_ref(&()).unwrap()]),
        ..ObjectMeta::default()
    };
    cms.create(
        &PostParams::default(),
        &ConfigMap::with_record(metadata, text),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_under_the_legacy_name_is_read_once_and_moves_to_the_new_name() {
    let env = env().await;
    let client = env.client.clone();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &env.ns);

    // A workflow stopped in Configuring, its record as an older release
    // kept it: in `old-fsm`.
    let first = run_controller(&env, ConfigMapStore::new(client.clone()), ctx(&client));
    let widget = create_held_widget(&env, "old").await;
    wait_for_object_state::<ConfigMap>(&env, "old", "Configuring").await;
    first.abort();
    let _ = first.await;
    let new_name = record_object_name_for::<WidgetState>("old");
    let text = cms
        .get(&new_name)
        .await
        .unwrap()
        .record_text()
        .unwrap()
        .unwrap();
    cms.delete(&new_name, &Default::default()).await.unwrap();
    plant_legacy(&env, "old", &widget, text).await;
    // Another widget finds a legacy record object that is not its own.
    let foreign = create_widget(&env, "foreign", WidgetSpec::colored("grey")).await;
    assert_ne!(foreign.uid(), widget.uid());
    let mut not_mine: serde_json::Value = serde_json::from_str(
        &cms.get(&legacy_record_object_name("old"))
            .await
            .unwrap()
            .record_text()
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    not_mine["state"] = "Ready".into();
    plant_legacy(&env, "foreign", &widget, not_mine.to_string()).await;

    // The upgraded operator resumes the workflow where it stood.
    let ctx = ctx(&client);
    let second = run_controller(&env, ConfigMapStore::new(client.clone()), ctx.clone());
    release_hold(&env, "old").await;
    wait_for_object_state::<ConfigMap>(&env, "old", "Ready").await;
    wait_for_object_state::<ConfigMap>(&env, "foreign", "Ready").await;
    eventually("the legacy record object to go", || {
        let cms = cms.clone();
        async move {
            cms.get_opt(&legacy_record_object_name("old"))
                .await
                .unwrap()
                .is_none()
                .then_some(())
        }
    })
    .await;
    second.abort();
    let mut log = ctx.log();
    log.sort();
    assert_eq!(
        log,
        ["configure:foreign", "configure:old", "start:foreign"],
        "old resumed; foreign started from the top"
    );
    let moved = cms.get(&new_name).await.unwrap();
    assert_eq!(moved.labels()[OWNER_UID_LABEL], widget.uid().unwrap());
    let record: serde_json::Value =
        serde_json::from_str(&moved.record_text().unwrap().unwrap()).unwrap();
    let path: Vec<&str> = record["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["to"].as_str().unwrap())
        .collect();
    assert_eq!(path, ["Pending", "Configuring", "Ready"], "one history");
    // The foreign legacy object is left alone (its owner's garbage).
    assert!(
        cms.get_opt(&legacy_record_object_name("foreign"))
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configmap_store_publishes_status_fields_and_repeats_cost_no_write() {
    let env = env().await;
    let client = env.client.clone();
    let controller = run_controller(&env, ConfigMapStore::new(client.clone()), ctx(&client));
    // `Configuring` publishes its output on every poll while held (every
    // 30 ms), and stays.
    create_widget_annotated(&env, "pubcm", &["hold", "publish-output"]).await;
    let widgets: Api<Widget> = Api::namespaced(client.clone(), &env.ns);
    let widget = eventually("the published output", || {
        let widgets = widgets.clone();
        async move {
            let w = widgets.get("pubcm").await.ok()?;
            w.status.as_ref()?.output.is_some().then_some(w)
        }
    })
    .await;
    assert_eq!(
        widget.status.as_ref().unwrap().output.as_deref(),
        Some("configured pubcm-config")
    );
    wait_for_object_state::<ConfigMap>(&env, "pubcm", "Configuring").await;
    if let Some(server) = env.embedded() {
        let writes = || {
            server
                .request_log()
                .records()
                .iter()
                .filter(|r| {
                    matches!(r.verb.as_str(), "update" | "patch" | "create")
                        && matches!(r.resource.as_str(), "configmaps" | "widgets")
                })
                .count()
        };
        // The controller's watch catches up with the output it wrote (until
        // then a poll sees the object without it and writes it again).
        tokio::time::sleep(Duration::from_millis(200)).await;
        let before = writes();
        let seen = server.request_log().records().len();
        // About ten polls, each publishing what the object already shows.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let log: Vec<_> = server
            .request_log()
            .records()
            .iter()
            .skip(seen)
            .map(|r| format!("{} {} {:?}", r.verb, r.resource, r.subresource))
            .collect();
        assert_eq!(
            writes(),
            before,
            "a repeated publication writes nothing: {log:?}"
        );
    }
    controller.abort();
}

/// A target for calling a store directly, for widget `widget` (conditions
/// off: only the record object matters).
fn target_of(env: &Env, widget: Widget) -> Target<Widget> {
    let gvk = GroupVersionKind::gvk("test.operator-fsm.io", "v1", "Widget");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "widgets");
    let api = Api::namespaced_with(env.client.clone(), &env.ns, &resource);
    Target::new(Arc::new(widget), api, WidgetState::machine())
        .with_field_manager("stores-test")
        .with_conditions(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_over_a_collected_stale_record_creates_and_an_unlabelled_object_is_refused() {
    let env = env().await;
    let client = env.client.clone();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &env.ns);
    let spec = WidgetSpec::colored("x");
    let record = StateRecord::new(&WidgetState::Pending, Timestamp::now()).unwrap();

    // A predecessor's record object, which garbage collection removes
    // between the load and the commit.
    let gone = create_widget(&env, "gone", spec.clone()).await;
    let stale = ObjectMeta {
        name: Some(record_object_name_for::<WidgetState>("gone")),
        labels: Some(
            [
                (MANAGED_BY_LABEL.0.to_owned(), MANAGED_BY_LABEL.1.to_owned()),
                (
                    OWNER_UID_LABEL.to_owned(),
                    "0a1b2c3d-0000-0000-0000-000000000000".to_owned(),
                ),
            ]
            .into(),
        ),
        ..ObjectMeta::default()
    };
    cms.create(
        &PostParams::default(),
        &ConfigMap::with_record(stale, serde_json::to_string(&record).unwrap()),
    )
    .await
    .unwrap();
    let store = ConfigMapStore::namespaced(client.clone(), &env.ns);
    let target = target_of(&env, gone.clone());
    let loaded = KubeStore::load(&store, &target).await.unwrap();
    assert!(loaded.record.is_none(), "a stale record is no record");
    let token = loaded.version.expect("a token naming the stale object");
    cms.delete(
        &record_object_name_for::<WidgetState>("gone"),
        &Default::default(),
    )
    .await
    .unwrap();
    KubeStore::save(
        &store,
        &target,
        fsm_core::Commit::new(&record, Some(&token)),
    )
    .await
    .unwrap();
    let written = cms
        .get(&record_object_name_for::<WidgetState>("gone"))
        .await
        .unwrap();
    assert_eq!(written.labels()[OWNER_UID_LABEL], gone.uid().unwrap());

    // An object of the record object's name that is not a record object:
    // refused with an error saying so, and left as it was.
    let taken = create_widget(&env, "taken", spec).await;
    let foreign = ConfigMap {
        metadata: ObjectMeta {
            name: Some(record_object_name_for::<WidgetState>("taken")),
            ..ObjectMeta::default()
        },
        data: Some([("mine".to_owned(), "yes".to_owned())].into()),
        ..ConfigMap::default()
    };
    cms.create(&PostParams::default(), &foreign).await.unwrap();
    let target = target_of(&env, taken);
    let loaded = KubeStore::load(&store, &target).await.unwrap();
    assert!(loaded.record.is_none() && loaded.version.is_none());
    let error = KubeStore::save(&store, &target, fsm_core::Commit::new(&record, None))
        .await
        .unwrap_err();
    let message = std::error::Error::source(&error)
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(
        message.contains("exists but is not a record object"),
        "{error:?}"
    );
    let left = cms
        .get(&record_object_name_for::<WidgetState>("taken"))
        .await
        .unwrap();
    assert_eq!(left.data, foreign.data);
}
