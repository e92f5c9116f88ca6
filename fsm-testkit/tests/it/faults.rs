//! Fault injection observed through `kube::Client`, and a
//! `kube::runtime::watcher` recovering from dropped watches and `410 Gone`.

use crate::common;

use std::time::Duration;

use common::{status, within};
use fsm_testkit::ApiServer;
use fsm_testkit::faults::Fault;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher::{self, Event};
use tokio::sync::mpsc;

fn cm(name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm
}

#[tokio::test]
async fn errors_are_statuses_kube_reports_as_api_errors() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("a")).await.unwrap();

    let h = server.faults().add(
        Fault::error(500)
            .verb("get")
            .resource("configmaps")
            .name("a"),
    );
    let s = status(cms.get("a").await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (500, "InternalError"));
    assert!(s.message.contains("injected fault"), "{}", s.message);
    // Other verbs and names are served.
    assert!(cms.list(&ListParams::default()).await.is_ok());
    assert!(cms.get_opt("b").await.unwrap().is_none());
    assert_eq!(h.hits(), 1);
    assert!(h.remove());
    assert!(cms.get("a").await.is_ok());

    // By count: two failures, then service again.
    server.faults().add(
        Fault::error(503)
            .verb("list")
            .resource("configmaps")
            .times(2),
    );
    for _ in 0..2 {
        let s = status(cms.list(&ListParams::default()).await.unwrap_err());
        assert_eq!((s.code, s.reason.as_str()), (503, "ServiceUnavailable"));
    }
    assert!(cms.list(&ListParams::default()).await.is_ok());

    server.faults().add(
        Fault::error(409)
            .verb("create")
            .message("the object has been modified"),
    );
    let s = status(
        cms.create(&PostParams::default(), &cm("c"))
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(s.message, "the object has been modified");
    server.faults().clear();
    server
        .faults()
        .add(Fault::error(429).resource("configmaps"));
    let s = status(cms.get("a").await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (429, "TooManyRequests"));
    // The answer is logged with its code.
    assert!(
        server
            .request_log()
            .records()
            .iter()
            .any(|r| r.code == 429 && r.verb == "get")
    );
}

#[tokio::test]
async fn an_error_after_serving_loses_the_answer_not_the_write() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let h = server.faults().add(
        Fault::error(500)
            .verb("create")
            .resource("configmaps")
            .after_serving()
            .times(1),
    );
    let s = status(
        cms.create(&PostParams::default(), &cm("a"))
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (500, "InternalError"));
    // The create took effect all the same: a retry finds it.
    assert!(cms.get_opt("a").await.unwrap().is_some());
    let s = status(
        cms.create(&PostParams::default(), &cm("a"))
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(h.hits(), 1);
}

#[tokio::test]
async fn probability_is_seeded_and_counted() {
    let run = |seed| async move {
        let server = ApiServer::new();
        let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
        let h = server
            .faults()
            .add(Fault::error(500).verb("get").probability(0.3).seed(seed));
        let mut failed = Vec::new();
        for _ in 0..60 {
            failed.push(cms.get_opt("x").await.is_err());
        }
        (failed, h.hits())
    };
    let (a, hits) = run(11).await;
    let (b, _) = run(11).await;
    assert_eq!(a, b, "the same seed fails the same requests");
    let n = a.iter().filter(|f| **f).count();
    assert_eq!(n as u64, hits);
    assert!((6..=30).contains(&n), "{n} of 60 failed at p=0.3");
}

#[tokio::test]
async fn latency_delays_the_answer() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let delay = Duration::from_millis(300);
    let h = server
        .faults()
        .add(Fault::latency(delay).verb("list").resource("configmaps"));
    let started = std::time::Instant::now();
    cms.list(&ListParams::default()).await.unwrap();
    assert!(started.elapsed() >= delay);
    h.remove();
    let started = std::time::Instant::now();
    cms.list(&ListParams::default()).await.unwrap();
    assert!(started.elapsed() < delay);
}

/// Runs a watcher on configmaps, sending its events (errors as strings).
fn watch(cms: Api<ConfigMap>) -> mpsc::UnboundedReceiver<Result<Event<ConfigMap>, String>> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = watcher::watcher(cms, watcher::Config::default()).boxed();
        while let Some(e) = stream.next().await {
            if tx.send(e.map_err(|e| format!("{e:?}"))).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits for an applied object named `name`, returning what came before.
async fn until_applied(
    rx: &mut mpsc::UnboundedReceiver<Result<Event<ConfigMap>, String>>,
    name: &str,
) -> Vec<String> {
    let mut seen = Vec::new();
    within(10, async {
        loop {
            match rx.recv().await.expect("watcher ended") {
                Ok(Event::Apply(o) | Event::InitApply(o)) if o.name_any() == name => return,
                Ok(Event::Init) => seen.push("Init".to_string()),
                Ok(Event::InitDone) => seen.push("InitDone".to_string()),
                Ok(Event::Apply(o) | Event::InitApply(o)) => seen.push(o.name_any()),
                Ok(Event::Delete(o)) => seen.push(format!("-{}", o.name_any())),
                Err(e) => seen.push(e),
            }
        }
    })
    .await;
    seen
}

#[tokio::test]
async fn a_watcher_recovers_from_dropped_watches() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let mut rx = watch(cms.clone());
    until_applied(&mut rx, "a").await;
    let watches = server.request_log().count("watch", "configmaps");

    server.faults().drop_watches(Some("configmaps"));
    // The watcher reconnects from its last version and misses nothing.
    cms.create(&PostParams::default(), &cm("b")).await.unwrap();
    let between = until_applied(&mut rx, "b").await;
    assert!(!between.contains(&"Init".to_string()), "{between:?}");
    assert!(server.request_log().count("watch", "configmaps") > watches);

    // A rule that drops watches whenever a configmap is deleted.
    server
        .faults()
        .add(Fault::drop_watches().verb("delete").resource("configmaps"));
    cms.delete("a", &Default::default()).await.unwrap();
    cms.create(&PostParams::default(), &cm("c")).await.unwrap();
    until_applied(&mut rx, "c").await;
}

#[tokio::test]
async fn a_watcher_relists_after_410_gone() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let mut rx = watch(cms.clone());
    until_applied(&mut rx, "a").await;
    let lists = server.request_log().count("list", "configmaps");

    let gone = server
        .faults()
        .add(Fault::gone().resource("configmaps").times(1));
    server.faults().drop_watches(None);
    cms.create(&PostParams::default(), &cm("b")).await.unwrap();
    let between = until_applied(&mut rx, "b").await;
    assert_eq!(gone.hits(), 1);
    assert!(
        between.iter().any(|e| e.contains("410")),
        "the watcher saw the 410: {between:?}"
    );
    assert!(between.contains(&"Init".to_string()), "{between:?}");
    assert!(server.request_log().count("list", "configmaps") > lists);
    cms.create(&PostParams::default(), &cm("c")).await.unwrap();
    until_applied(&mut rx, "c").await;
}

#[tokio::test]
async fn faults_are_scriptable_over_http() {
    let server = ApiServer::new();
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let post = http::Request::post("/testkit/faults")
        .header("content-type", "application/json")
        .body(
            br#"{"kind": "error", "code": 503, "verb": "list", "resource": "configmaps", "times": 1}"#
                .to_vec(),
        )
        .unwrap();
    let created: serde_json::Value = client.request(post).await.unwrap();
    let id = created["id"].as_u64().unwrap();
    let s = status(cms.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(s.code, 503);
    assert!(cms.list(&ListParams::default()).await.is_ok());
    let listed: serde_json::Value = client
        .request(
            http::Request::get("/testkit/faults")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(listed["items"][0]["hits"], 1);
    assert_eq!(listed["items"][0]["resource"], "configmaps");
    let removed: serde_json::Value = client
        .request(
            http::Request::delete(format!("/testkit/faults/{id}"))
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(removed["id"], id);
    let bad = http::Request::post("/testkit/faults")
        .body(br#"{"kind": "explode"}"#.to_vec())
        .unwrap();
    let e = client.request::<serde_json::Value>(bad).await.unwrap_err();
    assert_eq!(status(e).code, 400);
    // The fault API itself is not logged.
    assert!(
        server
            .request_log()
            .records()
            .iter()
            .all(|r| !r.path.starts_with("/testkit"))
    );
}
