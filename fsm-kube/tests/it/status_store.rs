//! The status store through a real `Controller` against the embedded API
//! server, or the real kube-apiserver named by
//! `FSM_REAL_APISERVER_KUBECONFIG`: a workflow completes with exactly one
//! API write per committed transition and no conflicts; deletion, spec
//! changes and corrupt records behave as docs/semantics.md says.

use crate::common;

use common::*;
use fsm_kube::StatusStore;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};

fn status_patches(server: &fsm_testkit::ApiServer) -> usize {
    server
        .request_log()
        .records()
        .iter()
        .filter(|r| {
            r.verb == "patch"
                && r.resource == "widgets"
                && r.subresource.as_deref() == Some("status")
        })
        .count()
}

fn conflicts(server: &fsm_testkit::ApiServer) -> usize {
    server
        .request_log()
        .records()
        .iter()
        .filter(|r| r.code == 409)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_completes_with_one_write_per_transition() {
    let env = env().await;
    let client = env.client.clone();
    let ctx = ctx(&client);
    let controller = run_controller(&env, StatusStore::new(), ctx.clone());
    create_widget(&env, "w1", WidgetSpec::colored("blue")).await;

    let widget = wait_for_status_state(&env, "w1", "Ready").await;
    // Let the controller settle (any stray reconcile would write now).
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    controller.abort();

    let record = widget
        .status
        .as_ref()
        .unwrap()
        .fsm
        .as_ref()
        .unwrap()
        .record::<WidgetState>()
        .unwrap();
    let path: Vec<_> = record.history.iter().map(|h| h.to.as_str()).collect();
    assert_eq!(path, ["Pending", "Configuring", "Ready"]);
    // Writes are counted by the embedded server's request log; a real
    // kube-apiserver has none, so there the rest of the test still runs.
    if let Some(server) = env.embedded() {
        // Three states entered, two writes: the initial entry is
        // committed together with the first transition.
        assert_eq!(
            status_patches(server),
            2,
            "one status write per committed transition"
        );
        assert_eq!(
            conflicts(server),
            0,
            "a steady workflow makes no conflicting write"
        );
    }
    assert_eq!(condition(&widget, "Ready").unwrap().status, "True");
    assert_eq!(condition(&widget, "Degraded").unwrap().status, "False");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &env.ns);
    assert_eq!(
        cms.get("w1-config").await.unwrap().data.unwrap()["color"],
        "blue"
    );
    // One event per transition, each with its own note.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &env.ns);
    let mut notes: Vec<String> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Transitioned"))
        .filter_map(|e| e.note)
        .collect();
    notes.sort();
    assert_eq!(
        notes,
        [
            "Configuring → Ready",
            "Pending → Configuring",
            "started in Pending"
        ]
    );
    // The finalizer is there because the machine has a cleanup.
    assert!(
        widget
            .metadata
            .finalizers
            .unwrap()
            .contains(&"operator-fsm.io/finalizer".to_owned())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_compensates_and_rests_in_failed() {
    let env = env().await;
    let client = env.client.clone();
    let ctx = ctx(&client);
    let controller = run_controller(&env, StatusStore::new(), ctx.clone());
    create_widget(&env, "bad", WidgetSpec::failing("red")).await;
    let widget = wait_for_status_state(&env, "bad", "Failed").await;
    controller.abort();
    assert!(ctx.log().contains(&"unconfigure:bad-config".to_owned()));
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &env.ns);
    assert!(
        cms.get_opt("bad-config").await.unwrap().is_none(),
        "compensation deleted it"
    );
    let degraded = condition(&widget, "Degraded").unwrap();
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "Failed")
    );
    assert_eq!(degraded.message, "the widget asked to fail");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_runs_cleanup_and_removes_the_finalizer() {
    let env = env().await;
    let client = env.client.clone();
    let ctx = ctx(&client);
    let controller = run_controller(&env, StatusStore::new(), ctx.clone());
    create_widget(&env, "gone", WidgetSpec::colored("green")).await;
    wait_for_status_state(&env, "gone", "Ready").await;
    let api: Api<Widget> = Api::namespaced(client.clone(), &env.ns);
    api.delete("gone", &Default::default()).await.unwrap();
    eventually("the widget to disappear", || {
        let api = api.clone();
        async move { api.get_opt("gone").await.unwrap().is_none().then_some(()) }
    })
    .await;
    controller.abort();
    assert!(ctx.log().contains(&"cleanup:gone".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_change_restarts_the_workflow() {
    let env = env().await;
    let client = env.client.clone();
    let ctx = ctx(&client);
    let controller = run_controller(&env, StatusStore::new(), ctx.clone());
    create_widget(&env, "w", WidgetSpec::colored("blue")).await;
    wait_for_status_state(&env, "w", "Ready").await;
    let api: Api<Widget> = Api::namespaced(client.clone(), &env.ns);
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"color": "pink"}})),
    )
    .await
    .unwrap();
    let widget = eventually("the restart to complete", || {
        let api = api.clone();
        async move {
            let w = api.get("w").await.ok()?;
            let record = w
                .status
                .as_ref()?
                .fsm
                .as_ref()?
                .record::<WidgetState>()
                .ok()?;
            (record.observed_generation == Some(2) && record.state == "Ready").then_some(record)
        }
    })
    .await;
    controller.abort();
    let reasons: Vec<_> = widget
        .history
        .iter()
        .filter_map(|h| h.reason.clone())
        .collect();
    assert_eq!(reasons, ["spec changed (generation 2)"]);
    assert_eq!(ctx.log().iter().filter(|l| *l == "start:w").count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_record_is_reported_and_left_untouched() {
    let env = env().await;
    let client = env.client.clone();
    let api: Api<Widget> = Api::namespaced(client.clone(), &env.ns);
    create_widget(&env, "broken", WidgetSpec::colored("x")).await;
    let corrupt = serde_json::json!({"schemaVersion": 1, "state": "Vanished", "enteredAt": "2026-01-01T00:00:00Z"});
    api.patch_status(
        "broken",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": {"fsm": corrupt}})),
    )
    .await
    .unwrap();

    let ctx = ctx(&client);
    let controller = run_controller(&env, StatusStore::new(), ctx.clone());
    let widget = eventually("the Degraded condition", || {
        let api = api.clone();
        async move {
            let w = api.get("broken").await.ok()?;
            condition(&w, "Degraded")
                .filter(|c| c.reason == "CorruptRecord")
                .map(|_| w.clone())
        }
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    controller.abort();
    let stored = serde_json::to_value(widget.status.unwrap().fsm.unwrap()).unwrap();
    assert_eq!(
        stored, corrupt,
        "the record is byte-for-byte what was there"
    );
    assert!(
        condition(&api.get("broken").await.unwrap(), "Degraded")
            .unwrap()
            .message
            .contains("Vanished")
    );
    assert!(ctx.log().is_empty(), "no handler ran");
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &env.ns);
    let reported = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("CorruptRecord"))
        .count();
    assert_eq!(
        reported, 1,
        "one CorruptRecord event, not one per reconcile"
    );
    // The request log (embedded server only) shows it was created once, not
    // created again and again under the same name.
    if let Some(server) = env.embedded() {
        let creates = server
            .request_log()
            .records()
            .iter()
            .filter(|r| r.verb == "create" && r.resource == "events")
            .count();
        assert_eq!(creates, 1, "one CorruptRecord event, not one per reconcile");
    }
}

fn start_runs(ctx: &Ctx, name: &str) -> usize {
    ctx.log()
        .iter()
        .filter(|l| **l == format!("start:{name}"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_writes_its_own_status_runs_once_and_its_transition_commits() {
    // The kube-rs way of publishing an output: the handler patches its own
    // object's status. That write moves the object's resourceVersion under
    // the commit; the commit is rebased over it (same spec, same record)
    // instead of conflicting and running the handler again, forever.
    let env = env().await;
    let ctx = ctx(&env.client);
    let controller = run_controller(&env, StatusStore::new(), ctx.clone());
    create_annotated_widget(&env, "own", "write-own-status").await;

    let widget = wait_for_status_state(&env, "own", "Ready").await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    controller.abort();

    assert_eq!(start_runs(&ctx, "own"), 1, "{:?}", ctx.log());
    let status = widget.status.as_ref().unwrap();
    assert_eq!(status.output.as_deref(), Some("written by run 1"));
    let record = status
        .fsm
        .as_ref()
        .unwrap()
        .record::<WidgetState>()
        .unwrap();
    let path: Vec<_> = record.history.iter().map(|h| h.to.as_str()).collect();
    assert_eq!(path, ["Pending", "Configuring", "Ready"]);
    if let Some(server) = env.embedded() {
        // The handler's own write, one refused commit, the rebased commit,
        // and the next transition's commit.
        assert_eq!(conflicts(server), 1);
        assert_eq!(status_patches(server), 4);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_status_fields_are_written_with_the_commit() {
    let env = env().await;
    let ctx = ctx(&env.client);
    let controller = run_controller(&env, StatusStore::new(), ctx.clone());
    create_annotated_widget(&env, "pub", "publish-output").await;

    let widget = wait_for_status_state(&env, "pub", "Ready").await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    controller.abort();

    let status = widget.status.as_ref().unwrap();
    assert_eq!(status.output.as_deref(), Some("configured pub-config"));
    if let Some(server) = env.embedded() {
        // Still one write per committed transition: the output rode in the
        // commit of Configuring → Ready.
        assert_eq!(status_patches(server), 2);
        assert_eq!(conflicts(server), 0);
    }
}

/// A status store commit for widget `name` as the reconciler would make
/// it, decided from the object as it is now.
async fn target_of(env: &Env, name: &str) -> fsm_kube::Target<Widget> {
    use fsm_core::Fsm;
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    let widget = widgets.get(name).await.unwrap();
    let resource = kube::api::ApiResource::erase::<Widget>(&());
    let api = Api::namespaced_with(env.client.clone(), &env.ns, &resource);
    fsm_kube::Target::new(std::sync::Arc::new(widget), api, WidgetState::machine())
        .with_field_manager("test")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_is_rebased_over_a_label_but_not_over_a_changed_record_or_spec() {
    use fsm_kube::KubeStore;
    let env = env().await;
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    create_annotated_widget(&env, "r", "unused").await;
    let record = fsm_core::StateRecord::new(&WidgetState::Pending, jiff::Timestamp::now()).unwrap();
    let store = StatusStore::new();
    let label = |value: &str| {
        Patch::Merge(serde_json::json!({"metadata": {"labels": {"l": value.to_owned()}}}))
    };

    // A label written between the read and the commit: rebased.
    let target = target_of(&env, "r").await;
    let expected = fsm_core::Version(target.resource_version().to_owned());
    widgets
        .patch("r", &PatchParams::default(), &label("a"))
        .await
        .unwrap();
    let version = store
        .save(&target, fsm_core::Commit::new(&record, Some(&expected)))
        .await
        .expect("a label change is outside the record and the spec");
    let widget = widgets.get("r").await.unwrap();
    assert_eq!(
        widget.metadata.resource_version.as_deref(),
        Some(version.0.as_str())
    );
    assert_eq!(widget.labels().get("l").map(String::as_str), Some("a"));
    let stored = widget.status.unwrap().fsm.unwrap();
    assert_eq!(stored.state_name().as_deref(), Some("Pending"));

    // The next commit of this machine (a failed attempt, say).
    let mut record = record;
    record.attempt = 1;

    // Someone else committed a record in between: a conflict, nothing
    // written.
    let target = target_of(&env, "r").await;
    let expected = fsm_core::Version(target.resource_version().to_owned());
    let theirs = serde_json::json!({"status": {"fsm": {"state": "Failed"}}});
    widgets
        .patch_status("r", &PatchParams::default(), &Patch::Merge(theirs))
        .await
        .unwrap();
    let theirs = widgets.get("r").await.unwrap();
    assert_eq!(
        theirs.status.unwrap().fsm.unwrap().state_name().as_deref(),
        Some("Failed"),
        "their record is stored"
    );
    let error = store
        .save(&target, fsm_core::Commit::new(&record, Some(&expected)))
        .await
        .unwrap_err();
    assert!(matches!(error, fsm_core::StoreError::Conflict), "{error:?}");
    let widget = widgets.get("r").await.unwrap();
    assert_eq!(
        widget.status.unwrap().fsm.unwrap().state_name().as_deref(),
        Some("Failed")
    );

    // The spec changed in between: a conflict, so the next reconcile sees
    // the new spec.
    let target = target_of(&env, "r").await;
    let expected = fsm_core::Version(target.resource_version().to_owned());
    let spec = Patch::Merge(serde_json::json!({"spec": {"color": "red"}}));
    widgets
        .patch("r", &PatchParams::default(), &spec)
        .await
        .unwrap();
    let error = store
        .save(&target, fsm_core::Commit::new(&record, Some(&expected)))
        .await
        .unwrap_err();
    assert!(matches!(error, fsm_core::StoreError::Conflict), "{error:?}");
}

/// The store keeps its own commit decoded for the version it wrote until
/// the next load: that load needs no decoding, later ones read the status;
/// a version someone else wrote (here a corrupt record) is read from the
/// status, and a deleted object is forgotten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_of_the_stores_own_commit_is_answered_decoded() {
    use fsm_core::RawRecord;
    use fsm_kube::KubeStore;
    let env = env().await;
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    create_annotated_widget(&env, "d", "unused").await;
    let store = StatusStore::new();
    let record = fsm_core::StateRecord::new(&WidgetState::Pending, jiff::Timestamp::now()).unwrap();

    // Nothing committed yet: the status as it is.
    let target = target_of(&env, "d").await;
    let loaded = store.load(&target).await.unwrap();
    assert!(!matches!(loaded.record, Some(RawRecord::Decoded(_))));

    let expected = fsm_core::Version(target.resource_version().to_owned());
    let version = store
        .save(&target, fsm_core::Commit::new(&record, Some(&expected)))
        .await
        .unwrap();

    // The next load, while the watch still shows the old version: the
    // record committed, decoded, at the new version.
    let loaded = store.load(&target).await.unwrap();
    assert_eq!(loaded.version.as_ref(), Some(&version));
    let Some(RawRecord::Decoded(decoded)) = &loaded.record else {
        panic!("not kept decoded: {:?}", loaded.record);
    };
    assert_eq!(**decoded.record(), record);

    // The load after it (the watch caught up) reads the status, which
    // holds the same record.
    let fresh = target_of(&env, "d").await;
    let again = store.load(&fresh).await.unwrap();
    assert_eq!(again.version.as_ref(), Some(&version));
    let Some(raw @ RawRecord::Json(_)) = &again.record else {
        panic!("a second load is answered decoded: {:?}", again.record);
    };
    assert_eq!(raw.decode::<WidgetState>().unwrap(), record);

    // A commit over the caught-up view, loaded once the watch has it too.
    let mut next = record.clone();
    next.attempt += 1;
    let now = fsm_core::Version(fresh.resource_version().to_owned());
    let version = store
        .save(&fresh, fsm_core::Commit::new(&next, Some(&now)))
        .await
        .unwrap();
    let seen = target_of(&env, "d").await;
    let loaded = store.load(&seen).await.unwrap();
    assert_eq!(loaded.version.as_ref(), Some(&version));
    let Some(RawRecord::Decoded(decoded)) = &loaded.record else {
        panic!("not kept decoded: {:?}", loaded.record);
    };
    assert_eq!(**decoded.record(), next);

    // Someone else writes a corrupt record: that version is read from the
    // status (and reported corrupt by the engine), never the cached one.
    let corrupt = serde_json::json!({"status": {"fsm": {"state": "Nowhere"}}});
    widgets
        .patch_status("d", &PatchParams::default(), &Patch::Merge(corrupt))
        .await
        .unwrap();
    let target = target_of(&env, "d").await;
    let loaded = store.load(&target).await.unwrap();
    let Some(raw @ RawRecord::Json(_)) = &loaded.record else {
        panic!(
            "the corrupt record is not what was read: {:?}",
            loaded.record
        );
    };
    assert!(raw.decode::<WidgetState>().is_err());
    // Nor does the old version hit any more.
    let loaded = store.load(&target).await.unwrap();
    assert!(matches!(loaded.record, Some(RawRecord::Json(_))));

    // A new commit, then the object's deletion: forgotten.
    let expected = fsm_core::Version(target.resource_version().to_owned());
    store
        .save(&target, fsm_core::Commit::new(&record, Some(&expected)))
        .await
        .unwrap();
    let target = target_of(&env, "d").await;
    store.delete(&target, None).await.unwrap();
    assert!(matches!(
        store.load(&target).await.unwrap().record,
        Some(RawRecord::Json(_))
    ));
}

/// A record whose conditions would carry no error text (a failed state
/// entered by a plain transition, an error that displays as nothing)
/// commits. The kube-apiserver 1.20 CI builds refuses any empty string in
/// a custom resource ("must be of type string: null"), and with it the
/// whole status write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_without_error_text_commits_with_every_condition_worded() {
    use fsm_kube::KubeStore;
    let env = env().await;
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    create_annotated_widget(&env, "quiet", "unused").await;
    let store = StatusStore::new();
    let now = jiff::Timestamp::now();

    let mut retrying = fsm_core::StateRecord::new(&WidgetState::Pending, now).unwrap();
    retrying.attempt = 1;
    retrying.last_error = Some(String::new());
    let failed = fsm_core::StateRecord::new(&WidgetState::Failed, now).unwrap();
    for record in [retrying, failed] {
        let target = target_of(&env, "quiet").await;
        let expected = fsm_core::Version(target.resource_version().to_owned());
        store
            .save(&target, fsm_core::Commit::new(&record, Some(&expected)))
            .await
            .unwrap_or_else(|e| panic!("{} not committed: {e}", record.state));
        let status = widgets.get("quiet").await.unwrap().status.unwrap();
        let conditions = status.conditions.unwrap_or_default();
        // Ready, Progressing, Degraded, Reconciling, Stalled, Paused (no
        // LastCommand: no command was sent).
        assert_eq!(conditions.len(), 6, "{conditions:?}");
        assert!(
            conditions.iter().all(|c| !c.message.is_empty()),
            "{conditions:?}"
        );
    }
}
