//! kube-runtime against the server: raw watches, `watcher`, `reflector`,
//! and a `Controller` reconciling a custom resource end to end.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::{Widget, install, widget, within};
use fsm_testkit::{ApiServer, ServerConfig};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};
use kube::{Resource, ResourceExt};
use serde_json::json;

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c
}

#[tokio::test]
async fn raw_watch_from_a_version_with_bookmarks() {
    let server = ApiServer::with_config(ServerConfig {
        bookmark_interval: Duration::from_millis(50),
        ..ServerConfig::default()
    });
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let first = cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let from = first.resource_version().unwrap();

    let mut stream = cms
        .watch(
            &WatchParams {
                bookmarks: true,
                ..WatchParams::default()
            }
            .timeout(5),
            &from,
        )
        .await
        .unwrap()
        .boxed();
    cms.create(&PostParams::default(), &cm("b")).await.unwrap();
    cms.delete("a", &DeleteParams::default()).await.unwrap();

    let mut seen = Vec::new();
    let mut bookmarks = 0;
    while seen.len() < 2 || bookmarks == 0 {
        match within(5, stream.next()).await.unwrap().unwrap() {
            WatchEvent::Added(o) => seen.push(format!("ADDED {}", o.name_any())),
            WatchEvent::Deleted(o) => seen.push(format!("DELETED {}", o.name_any())),
            WatchEvent::Modified(o) => seen.push(format!("MODIFIED {}", o.name_any())),
            WatchEvent::Bookmark(b) => {
                bookmarks += 1;
                assert!(b.metadata.resource_version.parse::<u64>().unwrap() >= 1);
            }
            WatchEvent::Error(e) => panic!("unexpected error {e:?}"),
        }
    }
    assert_eq!(
        seen,
        ["ADDED b", "DELETED a"],
        "events after `from`, in order"
    );
    assert_eq!(server.request_log().count("watch", "configmaps"), 1);
}

#[tokio::test]
async fn watch_from_unset_version_starts_with_current_objects_and_times_out() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let started = std::time::Instant::now();
    let events: Vec<_> = within(
        10,
        cms.watch(&WatchParams::default().timeout(1), "0")
            .await
            .unwrap()
            .collect::<Vec<_>>(),
    )
    .await;
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(events.len(), 1);
    assert!(matches!(events[0].as_ref().unwrap(), WatchEvent::Added(o) if o.name_any() == "a"));
}

#[tokio::test]
async fn too_old_version_gets_410_expired() {
    let server = ApiServer::with_config(ServerConfig {
        history_limit: 3,
        ..ServerConfig::default()
    });
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let first = cms.create(&PostParams::default(), &cm("c0")).await.unwrap();
    for i in 1..6 {
        cms.create(&PostParams::default(), &cm(&format!("c{i}")))
            .await
            .unwrap();
    }
    let old = first.resource_version().unwrap();
    let mut stream = cms
        .watch(&WatchParams::default(), &old)
        .await
        .unwrap()
        .boxed();
    match within(5, stream.next()).await.unwrap().unwrap() {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
            assert!(
                e.message.contains("too old resource version"),
                "{}",
                e.message
            );
        }
        other => panic!("expected 410, got {other:?}"),
    }
    assert!(within(5, stream.next()).await.is_none(), "the watch ends");
}

#[tokio::test]
async fn watcher_and_reflector_follow_changes() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("before"))
        .await
        .unwrap();

    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector(writer, watcher(cms.clone(), watcher::Config::default()))
        .applied_objects()
        .boxed();
    let mut stream = stream;
    assert_eq!(
        within(5, stream.next()).await.unwrap().unwrap().name_any(),
        "before"
    );

    cms.create(&PostParams::default(), &cm("after"))
        .await
        .unwrap();
    assert_eq!(
        within(5, stream.next()).await.unwrap().unwrap().name_any(),
        "after"
    );
    cms.patch(
        "after",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .unwrap();
    let changed = within(5, stream.next()).await.unwrap().unwrap();
    assert_eq!(changed.data.unwrap()["k"], "v");

    let mut names: Vec<String> = reader.state().iter().map(|o| o.name_any()).collect();
    names.sort();
    assert_eq!(names, ["after", "before"]);

    // Deletions reach the store too (the stream must be polled to apply them).
    cms.delete("before", &DeleteParams::default())
        .await
        .unwrap();
    let drive = tokio::spawn(async move { while stream.next().await.is_some() {} });
    within(5, async {
        while reader
            .get(&reflector::ObjectRef::new("before").within("default"))
            .is_some()
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_eq!(reader.state().len(), 1);
    drive.abort();
}

#[tokio::test]
async fn watcher_with_streaming_lists() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("early"))
        .await
        .unwrap();
    let mut stream = watcher(cms.clone(), watcher::Config::default().streaming_lists())
        .applied_objects()
        .boxed();
    assert_eq!(
        within(5, stream.next()).await.unwrap().unwrap().name_any(),
        "early"
    );
    cms.create(&PostParams::default(), &cm("late"))
        .await
        .unwrap();
    assert_eq!(
        within(5, stream.next()).await.unwrap().unwrap().name_any(),
        "late"
    );
    // The initial state came from the watch itself: no list request.
    assert_eq!(server.request_log().count("list", "configmaps"), 0);
    assert!(server.request_log().count("watch", "configmaps") >= 1);
}

#[tokio::test]
async fn dropping_the_listener_ends_its_watches() {
    let server = ApiServer::new();
    let http = server.serve_http().await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(http.kube_client().await.unwrap());
    let mut stream = cms
        .watch(&WatchParams::default().timeout(290), "0")
        .await
        .unwrap()
        .boxed();
    cms.create(&PostParams::default(), &cm("seen"))
        .await
        .unwrap();
    assert!(matches!(
        within(5, stream.next()).await,
        Some(Ok(WatchEvent::Added(_)))
    ));
    drop(http);
    if let Some(Ok(e)) = within(5, stream.next()).await {
        panic!("no event after the listener is gone: {e:?}");
    }
    assert!(
        within(5, cms.get("seen")).await.is_err(),
        "nothing listens any more"
    );
    // The server itself lives on.
    let local: Api<ConfigMap> = Api::default_namespaced(server.client());
    assert!(local.get("seen").await.is_ok());
}

#[tokio::test]
async fn watcher_over_http() {
    let server = ApiServer::new();
    let http = server.serve_http().await.unwrap();
    let client = http.kube_client().await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let mut stream = watcher(cms.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    cms.create(&PostParams::default(), &cm("net"))
        .await
        .unwrap();
    let got = within(10, stream.next()).await.unwrap().unwrap();
    assert_eq!(got.name_any(), "net");
}

struct Ctx {
    client: kube::Client,
}

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct ReconcileError(#[from] kube::Error);

/// Mirrors a Widget's size into a ConfigMap it owns, then reports ready.
async fn reconcile(w: Arc<Widget>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let ns = w.namespace().unwrap_or_default();
    let name = w.name_any();
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    let mut desired = cm(&format!("{name}-config"));
    desired.metadata.owner_references = w.controller_owner_ref(&()).map(|o| vec![o]);
    desired.data = Some(BTreeMap::from([(
        "size".to_string(),
        w.spec.size.to_string(),
    )]));
    match cms.get_opt(&format!("{name}-config")).await? {
        Some(mut existing) => {
            existing.data = desired.data;
            cms.replace(&format!("{name}-config"), &PostParams::default(), &existing)
                .await?;
        }
        None => {
            cms.create(&PostParams::default(), &desired).await?;
        }
    }
    let widgets: Api<Widget> = Api::namespaced(ctx.client.clone(), &ns);
    widgets
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"ready": true, "observed_generation": w.metadata.generation}}),
            ),
        )
        .await?;
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Widget>, _: &ReconcileError, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

#[tokio::test]
async fn controller_reconciles_a_custom_resource_end_to_end() {
    let server = ApiServer::new();
    let client = server.client();
    install::<Widget>(&client).await;
    let widgets: Api<Widget> = Api::default_namespaced(client.clone());
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());

    let controller = Controller::new(widgets.clone(), watcher::Config::default())
        .owns(cms.clone(), watcher::Config::default())
        .run(
            reconcile,
            error_policy,
            Arc::new(Ctx {
                client: client.clone(),
            }),
        )
        .for_each(|_| async {});
    let running = tokio::spawn(controller);

    widgets
        .create(&PostParams::default(), &widget("w1", 3))
        .await
        .unwrap();
    let wait_for = |generation: i64, size: &'static str| {
        let widgets = widgets.clone();
        let cms = cms.clone();
        async move {
            loop {
                let w = widgets.get("w1").await.unwrap();
                let cm = cms.get_opt("w1-config").await.unwrap();
                let done = w
                    .status
                    .as_ref()
                    .is_some_and(|s| s.ready && s.observed_generation == Some(generation))
                    && cm.and_then(|c| c.data).is_some_and(|d| d["size"] == size);
                if done {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    within(10, wait_for(1, "3")).await;

    // A spec change is reconciled again: new generation, new size.
    widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 7}})),
        )
        .await
        .unwrap();
    within(10, wait_for(2, "7")).await;

    let owned = cms.get("w1-config").await.unwrap();
    let owner = &owned.metadata.owner_references.unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Widget", "w1"));
    assert!(server.request_log().count("watch", "widgets") >= 1);
    assert!(server.request_log().count("patch", "widgets") >= 2);
    running.abort();
}
