//! Converges reading dependents from the watches `owns_dependents` starts
//! with the runtime (against the embedded server or the real
//! kube-apiserver named by `FSM_REAL_APISERVER_KUBECONFIG`): a converged
//! re-sync makes no request, a converge right after a write does not write
//! again though the cache has not caught up (read-your-writes), and a
//! kind's cache is not read before its watch has listed.
//!
//! Requests are counted on the client side (a client whose requests go
//! through a log), so the counts are the same on both servers.

use crate::common::*;
use crate::dependents::cm;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fsm_kube::dependents::{
    Dependent, DependentKind, DependentsReconciler, DependentsRuntime, DesiredSet, Owner, Reads,
    converge,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::Action;
use kube::runtime::reflector::store::Writer;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

/// The requests a counted client made: method and path with query.
#[derive(Clone, Default)]
struct RequestLog(Arc<Mutex<Vec<String>>>);

impl RequestLog {
    /// What was asked since the last `take`, watches left out (they are
    /// long-lived and belong to the caches).
    fn take(&self) -> Vec<String> {
        let mut log = self.0.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *log)
            .into_iter()
            .filter(|r| !r.contains("watch=true"))
            .collect()
    }
}

/// `client`, logging each request it sends.
fn counted(client: &Client) -> (Client, RequestLog) {
    let log = RequestLog::default();
    let inner = client.clone();
    let into = log.clone();
    let service = tower::service_fn(move |request: ::http::Request<kube::client::Body>| {
        into.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("{} {}", request.method(), request.uri()));
        let inner = inner.clone();
        async move { inner.send(request).await }
    });
    (Client::new(service, client.default_namespace()), log)
}

fn set_for(name: &str) -> DesiredSet {
    DesiredSet::builder()
        .dependent(Dependent::new(
            "a",
            &cm(&format!("{name}-a"), &[("v", "1")]),
        ))
        .dependent(Dependent::new("b", &cm(&format!("{name}-b"), &[("v", "1")])).depends_on(["a"]))
        .build()
        .unwrap()
}

/// A controller of the test's Widgets through `client`, converging them
/// with `reconciler` (on `runtime`), whose ConfigMap watch is also the
/// runtime's cache.
fn converging_widgets(
    env: &Env,
    client: &Client,
    runtime: &DependentsRuntime,
    reconciler: &DependentsReconciler<Widget, ()>,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    widgets_owning_configmaps(client, &env.ns, runtime)
        .run(
            reconciler.reconcile(),
            reconciler.error_policy(),
            Arc::new(()),
        )
        .for_each(|_| async {})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converged_resync_reads_the_watches_and_makes_no_request() {
    let env = env().await;
    let (client, log) = counted(&env.client);
    let runtime = DependentsRuntime::new(client.clone())
        .field_manager("cache-test")
        .pending_requeue(Duration::from_millis(200));
    let reconciler =
        DependentsReconciler::<Widget, ()>::with_runtime(runtime.clone(), |w: &Widget, _: &()| {
            Ok(set_for(&w.name_any()))
        });
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    let controller = tokio::spawn(converging_widgets(&env, &client, &runtime, &reconciler));
    create_widget(&env, "cached", WidgetSpec::colored("c")).await;
    eventually("DependentsReady", || {
        let widgets = widgets.clone();
        async move {
            let w = widgets.get("cached").await.ok()?;
            (condition(&w, "DependentsReady")?.status == "True").then_some(())
        }
    })
    .await;
    // The cache shows both objects once its watch has delivered them.
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let versions = |name: &'static str| {
        let configmaps = configmaps.clone();
        async move {
            configmaps
                .get(name)
                .await
                .ok()
                .and_then(|c| c.resource_version())
        }
    };
    assert!(versions("cached-a").await.is_some());
    assert!(versions("cached-b").await.is_some());

    let owner = Arc::new(widgets.get("cached").await.unwrap());
    // The watch may still be delivering the last write: a few tries.
    let mut requests = Vec::new();
    for _ in 0..50 {
        log.take();
        let (_, c) = reconciler
            .reconcile_object(owner.clone(), Arc::new(()))
            .await
            .unwrap();
        assert!(c.is_ready(), "{}", c.summary());
        assert!(c.applied.is_empty(), "{:?}", c.applied);
        requests = log.take();
        if requests.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Reads from the cache, pruning from the cache, no condition to write.
    assert_eq!(requests, Vec::<String>::new());
    controller.abort();
}

/// An operator restarted over a converged set: its watches list the
/// objects (a list's items carry no `apiVersion` or `kind`), and those
/// must still match the desired bodies, with no write and no request, and
/// read as typed objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_the_listed_dependents_are_not_written_again() {
    let env = env().await;
    let owner = create_widget(&env, "restart", WidgetSpec::colored("c")).await;
    // The first life, without caches.
    let first = DependentsRuntime::new(env.client.clone()).field_manager("cache-test");
    let c = converge(&first, &owner, &set_for("restart")).await.unwrap();
    assert_eq!(c.applied.len(), 2, "{:?}", c.applied);

    // The second life: its watches list what exists.
    let (client, log) = counted(&env.client);
    let runtime = DependentsRuntime::new(client.clone()).field_manager("cache-test");
    let reconciler =
        DependentsReconciler::<Widget, ()>::with_runtime(runtime.clone(), |w: &Widget, _: &()| {
            Ok(set_for(&w.name_any()))
        });
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    let controller = tokio::spawn(converging_widgets(&env, &client, &runtime, &reconciler));
    eventually("DependentsReady", || {
        let widgets = widgets.clone();
        async move {
            let w = widgets.get("restart").await.ok()?;
            (condition(&w, "DependentsReady")?.status == "True").then_some(())
        }
    })
    .await;
    log.take();
    let owner = Arc::new(widgets.get("restart").await.unwrap());
    let (_, c) = reconciler
        .reconcile_object(owner.clone(), Arc::new(()))
        .await
        .unwrap();
    assert!(c.is_ready(), "{}", c.summary());
    assert!(c.applied.is_empty(), "written again: {:?}", c.applied);
    assert_eq!(c.unchanged, 2);
    assert_eq!(log.take(), Vec::<String>::new());

    // Typed reads of listed objects come from the cache too.
    let reads = Reads::new(runtime.clone(), &Owner::of(owner.as_ref()).unwrap());
    let a: ConfigMap = reads.get("restart-a").await.unwrap();
    assert_eq!(a.name_any(), "restart-a");
    assert_eq!(log.take(), Vec::<String>::new(), "read from the cache");
    controller.abort();
}

/// Someone deletes a dependent right after our write, while the kind's
/// watch lags behind both: once the watch has delivered the deletion, the
/// cache is current (its watch has passed our write), and the next
/// converge creates the object again, instead of reading our remembered
/// write as the live object until the read-your-writes memory gives up.
///
/// The lag is made, not hoped for: the controller (whose stream drives the
/// runtime's watch) is polled only while a gate is open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_deleted_right_after_our_write_is_created_again_once_the_watch_shows_it() {
    let env = env().await;
    let warm_up = create_widget(&env, "warm", WidgetSpec::colored("c")).await;
    let owner = create_widget(&env, "gone", WidgetSpec::colored("c")).await;
    let runtime = DependentsRuntime::new(env.client.clone()).field_manager("cache-test");
    // The watches fill the caches; the controller itself does nothing.
    let mut controller = widgets_owning_configmaps(&env.client, &env.ns, &runtime)
        .run(
            |_, _| async { Ok::<_, kube::Error>(Action::await_change()) },
            |_, _, _| Action::await_change(),
            Arc::new(()),
        )
        .boxed();
    let (gate, mut open) = tokio::sync::watch::channel(true);
    let driver = tokio::spawn(async move {
        loop {
            if open.wait_for(|open| *open).await.is_err() {
                return;
            }
            tokio::select! {
                item = controller.next() => if item.is_none() { return },
                _ = open.changed() => {}
            }
        }
    });

    // The watch lists (a converge waits for that), then stops: the
    // runtime's cache no longer follows the server.
    converge(&runtime, &warm_up, &set_for("warm"))
        .await
        .unwrap();
    gate.send_replace(false);
    let first = converge(&runtime, &owner, &set_for("gone")).await.unwrap();
    assert_eq!(first.applied.len(), 2, "{:?}", first.applied);
    // A watch of our own tells when the server has sent the deletion (it
    // starts when polled: it lists first, so the deletion comes as an
    // event).
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let mut ours = watcher(
        configmaps.clone(),
        watcher::Config::default().fields("metadata.name=gone-a"),
    )
    .default_backoff()
    .boxed();
    let listed = async {
        while let Some(event) = ours.next().await {
            if let Ok(watcher::Event::InitDone) = event {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), listed)
        .await
        .expect("our watch listed");
    configmaps
        .delete("gone-a", &Default::default())
        .await
        .unwrap();
    let deleted = async {
        while let Some(event) = ours.next().await {
            if let Ok(watcher::Event::Delete(_)) = event {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), deleted)
        .await
        .expect("our watch saw the deletion");

    // The runtime's watch goes on: it delivers our creation and then the
    // deletion; a moment for it to store them.
    gate.send_replace(true);
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Far less than the 30 s a write is remembered when the cache cannot
    // tell how far its watch has come.
    let mut recreated = Vec::new();
    for _ in 0..100 {
        let c = converge(&runtime, &owner, &set_for("gone")).await.unwrap();
        if !c.applied.is_empty() {
            recreated = c.applied;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        recreated,
        vec![format!("ConfigMap {}/gone-a", env.ns)],
        "the deleted dependent was not created again within 10 s"
    );
    assert!(configmaps.get_opt("gone-a").await.unwrap().is_some());
    driver.abort();
}

/// A store that has listed (synced) and then never changes: a cache that
/// lags behind every write.
fn frozen_store(kind: &DependentKind) -> kube::runtime::reflector::Store<DynamicObject> {
    let mut writer = Writer::<DynamicObject>::new(kind.resource.clone());
    writer.apply_watcher_event(&watcher::Event::Init);
    writer.apply_watcher_event(&watcher::Event::InitDone);
    let store = writer.as_reader();
    // The store stays ready once the writer is gone.
    drop(writer);
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converge_right_after_a_write_reads_the_write_not_the_lagging_cache() {
    let env = env().await;
    let owner = create_widget(&env, "ryw", WidgetSpec::colored("c")).await;
    let (client, log) = counted(&env.client);
    let kind = DependentKind::of::<ConfigMap>();
    let runtime = DependentsRuntime::new(client)
        .field_manager("cache-test")
        .cache(kind.clone(), frozen_store(&kind));
    let first = converge(&runtime, &owner, &set_for("ryw")).await.unwrap();
    assert_eq!(first.applied.len(), 2, "{:?}", first.applied);
    log.take();

    // The cache still says both are absent; our writes say otherwise.
    let again = converge(&runtime, &owner, &set_for("ryw")).await.unwrap();
    assert!(again.is_ready(), "{}", again.summary());
    assert!(
        again.applied.is_empty(),
        "applied again: {:?}",
        again.applied
    );
    assert_eq!(again.unchanged, 2);
    assert_eq!(log.take(), Vec::<String>::new());

    // A change is applied once, and then read back from our write.
    let changed = DesiredSet::builder()
        .dependent(Dependent::new("a", &cm("ryw-a", &[("v", "2")])))
        .dependent(Dependent::new("b", &cm("ryw-b", &[("v", "1")])).depends_on(["a"]))
        .build()
        .unwrap();
    let c = converge(&runtime, &owner, &changed).await.unwrap();
    assert_eq!(c.applied.len(), 1, "{:?}", c.applied);
    let c = converge(&runtime, &owner, &changed).await.unwrap();
    assert!(c.applied.is_empty(), "{:?}", c.applied);
    let live: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let a = live.get("ryw-a").await.unwrap();
    assert_eq!(
        a.data.unwrap_or_default().get("v").map(String::as_str),
        Some("2")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_its_watch_has_listed_a_kind_is_read_with_get() {
    let env = env().await;
    let owner = create_widget(&env, "unsynced", WidgetSpec::colored("c")).await;
    let (client, log) = counted(&env.client);
    let kind = DependentKind::of::<ConfigMap>();
    // A writer that never lists: the store is never ready.
    let writer = Writer::<DynamicObject>::new(kind.resource.clone());
    let runtime = DependentsRuntime::new(client)
        .field_manager("cache-test")
        .sync_wait(Duration::from_millis(300))
        .cache(kind.clone(), writer.as_reader());
    let started = std::time::Instant::now();
    let first = converge(&runtime, &owner, &set_for("unsynced"))
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "the first converge waits for the watch's list"
    );
    assert_eq!(first.applied.len(), 2);
    log.take();
    let again = converge(&runtime, &owner, &set_for("unsynced"))
        .await
        .unwrap();
    assert_eq!(again.unchanged, 2);
    let requests = log.take();
    let gets: Vec<&String> = requests
        .iter()
        .filter(|r| r.starts_with("GET ") && r.contains("/configmaps/unsynced-"))
        .collect();
    assert_eq!(gets.len(), 2, "one GET per object: {requests:?}");
    assert!(
        requests.iter().all(|r| r.starts_with("GET ")),
        "reads only: {requests:?}"
    );
    drop(writer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converge_started_before_the_watch_has_listed_waits_for_it_instead_of_getting() {
    let env = env().await;
    let owner = create_widget(&env, "starting", WidgetSpec::colored("c")).await;
    // A first process converged the set: the objects exist.
    let first = DependentsRuntime::new(env.client.clone()).field_manager("cache-test");
    converge(&first, &owner, &set_for("starting"))
        .await
        .unwrap();

    // A restarted process: its watch lists a moment after the owners are
    // reconciled.
    let (client, log) = counted(&env.client);
    let kind = DependentKind::of::<ConfigMap>();
    let mut writer = Writer::<DynamicObject>::new(kind.resource.clone());
    let runtime = DependentsRuntime::new(client)
        .field_manager("cache-test")
        .cache(kind.clone(), writer.as_reader());
    // As the watch delivers them (a list's items carry no kind).
    let api = Api::<DynamicObject>::namespaced_with(env.client.clone(), &env.ns, &kind.resource);
    let mut listed = Vec::new();
    for name in ["starting-a", "starting-b"] {
        listed.push(api.get(name).await.unwrap());
    }
    let lister = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        writer.apply_watcher_event(&watcher::Event::Init);
        for object in listed {
            writer.apply_watcher_event(&watcher::Event::InitApply(object));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        writer
    });
    let again = converge(&runtime, &owner, &set_for("starting"))
        .await
        .unwrap();
    assert_eq!(again.unchanged, 2, "{again:?}");
    assert!(again.applied.is_empty(), "{:?}", again.applied);
    assert_eq!(
        log.take(),
        Vec::<String>::new(),
        "no GET: the converge waited for the watch's list"
    );
    drop(lister.await.unwrap());
}

/// The watch event of our own apply (the object the apply returned, at
/// its version) wakes no owner: the converge that wrote it saw it. A
/// change by anyone else still does. Reconciles are counted by a
/// controller that only counts, while converges run beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_echo_of_our_own_write_wakes_no_owner_but_another_change_does() {
    let env = env().await;
    let runtime = DependentsRuntime::new(env.client.clone()).field_manager("cache-test");
    let woken = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = woken.clone();
    let controller = widgets_owning_configmaps(&env.client, &env.ns, &runtime)
        .run(
            move |w: Arc<Widget>, _: Arc<()>| {
                let seen = seen.clone();
                async move {
                    seen.lock().unwrap().push(w.name_any());
                    Ok::<_, kube::Error>(Action::await_change())
                }
            },
            |_, _: &kube::Error, _| Action::await_change(),
            Arc::new(()),
        )
        .for_each(|_| async {});
    let controller = tokio::spawn(controller);
    let owner = create_widget(&env, "echo", WidgetSpec::colored("c")).await;
    let reconciles = || woken.lock().unwrap().len();
    eventually("the Widget's own reconcile", || async {
        (reconciles() == 1).then_some(())
    })
    .await;
    // Both ConfigMaps created, then one changed: three writes of ours.
    let c = converge(&runtime, &owner, &set_for("echo")).await.unwrap();
    assert_eq!(c.applied.len(), 2, "{:?}", c.applied);
    let changed = DesiredSet::builder()
        .dependent(Dependent::new("a", &cm("echo-a", &[("v", "2")])))
        .dependent(Dependent::new("b", &cm("echo-b", &[("v", "1")])).depends_on(["a"]))
        .build()
        .unwrap();
    let c = converge(&runtime, &owner, &changed).await.unwrap();
    assert_eq!(c.applied.len(), 1, "{:?}", c.applied);

    // Someone else's change, after ours on the same watch: once it has
    // woken the Widget, the echoes before it have been filtered.
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let label = serde_json::json!({"metadata": {"labels": {"touched": "yes"}}});
    configmaps
        .patch(
            "echo-b",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&label),
        )
        .await
        .unwrap();
    eventually("the other change's wake-up", || async {
        (reconciles() >= 2).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        *woken.lock().unwrap(),
        vec!["echo".to_owned(), "echo".to_owned()],
        "one reconcile for the Widget's creation, one for the other change, none for our writes"
    );
    controller.abort();
}
