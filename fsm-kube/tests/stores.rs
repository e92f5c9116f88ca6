//! The ConfigMap, Secret and in-memory stores through a real `Controller`,
//! restarts mid-workflow, and conflicts injected by another writer; on the
//! embedded API server, or the real kube-apiserver named by
//! `FSM_REAL_APISERVER_KUBECONFIG`.

mod common;

use std::sync::Arc;

use common::*;
use fsm_kube::fsm_core::EphemeralStore;
use fsm_kube::store::{OWNER_LABEL, RecordObject};
use fsm_kube::{ConfigMapStore, DerivingStore, SecretStore, StatusStore};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};

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
    let widget = create_widget(
        &env,
        "cm",
        WidgetSpec {
            color: "blue".into(),
            fail: false,
            conflict_once: false,
        },
    )
    .await;
    wait_for_object_state::<ConfigMap>(&env, "cm", "Ready").await;
    let widget_now = ready_condition(&env, "cm").await;
    assert!(
        widget_now.status.unwrap().fsm.is_none(),
        "the record is not in the status"
    );

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &env.ns);
    let record = cms.get("cm-fsm").await.unwrap();
    assert_eq!(record.labels()[OWNER_LABEL], "cm");
    let owner = &record.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Widget", widget.uid().unwrap().as_str())
    );

    // Deletion runs the cleanup, then the record object goes too.
    let widgets: Api<Widget> = Api::namespaced(client.clone(), &env.ns);
    widgets.delete("cm", &Default::default()).await.unwrap();
    eventually("the record ConfigMap to go", || {
        let cms = cms.clone();
        async move { cms.get_opt("cm-fsm").await.unwrap().is_none().then_some(()) }
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
    create_widget(
        &env,
        "sec",
        WidgetSpec {
            color: "blue".into(),
            fail: false,
            conflict_once: false,
        },
    )
    .await;
    wait_for_object_state::<Secret>(&env, "sec", "Ready").await;
    ready_condition(&env, "sec").await;
    controller.abort();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &env.ns);
    assert_eq!(
        secrets.get("sec-fsm").await.unwrap().type_.as_deref(),
        Some("Opaque")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ephemeral_store_runs_the_workflow_in_memory() {
    let env = env().await;
    let client = env.client.clone();
    let controller = run_controller(&env, EphemeralStore::new(), ctx(&client));
    create_widget(
        &env,
        "mem",
        WidgetSpec {
            color: "blue".into(),
            fail: false,
            conflict_once: false,
        },
    )
    .await;
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
    create_widget(
        &env,
        "d",
        WidgetSpec {
            color: "blue".into(),
            fail: false,
            conflict_once: false,
        },
    )
    .await;
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
        color: "blue".into(),
        fail: false,
        conflict_once: true,
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
