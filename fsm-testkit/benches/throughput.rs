//! Requests per second of the embedded API server, through `kube::Client`:
//! get, merge patch, and watch fan-out (many watchers, every change sent to
//! each). Prints figures; run with `cargo bench -p fsm-testkit`.
//!
//! `FSM_BENCH_QUICK=1` runs a tenth of the work (for a smoke run).

use std::time::{Duration, Instant};

use fsm_testkit::ApiServer;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

struct Scale {
    gets: usize,
    patches: usize,
    watchers: usize,
    changes: usize,
    concurrency: usize,
}

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c
}

fn report(what: &str, n: usize, took: Duration) {
    let rate = n as f64 / took.as_secs_f64();
    println!(
        "{what:<44} {n:>8} in {:>8.1} ms  = {rate:>10.0} /s",
        took.as_secs_f64() * 1000.0
    );
}

/// `n` calls of `op`, `concurrency` at a time.
async fn run_concurrent<F, Fut>(n: usize, concurrency: usize, op: F) -> Duration
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let start = Instant::now();
    futures::stream::iter(0..n)
        .map(op)
        .buffer_unordered(concurrency)
        .collect::<Vec<()>>()
        .await;
    start.elapsed()
}

async fn bench(client: kube::Client, label: &str, s: &Scale) {
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    cms.create(&PostParams::default(), &cm("target"))
        .await
        .expect("create");

    let took = run_concurrent(s.gets, 1, |_| {
        let cms = cms.clone();
        async move {
            cms.get("target").await.expect("get");
        }
    })
    .await;
    report(&format!("get ({label}, sequential)"), s.gets, took);
    let took = run_concurrent(s.gets, s.concurrency, |_| {
        let cms = cms.clone();
        async move {
            cms.get("target").await.expect("get");
        }
    })
    .await;
    report(
        &format!("get ({label}, {} in flight)", s.concurrency),
        s.gets,
        took,
    );

    let took = run_concurrent(s.patches, 1, |i| {
        let cms = cms.clone();
        async move {
            cms.patch(
                "target",
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"n": i.to_string()}})),
            )
            .await
            .expect("patch");
        }
    })
    .await;
    report(
        &format!("merge patch ({label}, sequential)"),
        s.patches,
        took,
    );
    cms.delete("target", &Default::default())
        .await
        .expect("delete");
}

async fn fan_out(server: &ApiServer, s: &Scale) {
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let from = server.revision().to_string();
    let mut watchers = Vec::new();
    for _ in 0..s.watchers {
        let stream = cms
            .watch(&WatchParams::default().timeout(290), &from)
            .await
            .expect("watch");
        let changes = s.changes;
        watchers.push(tokio::spawn(async move {
            let mut stream = stream.boxed();
            let mut seen = 0;
            while seen < changes {
                match stream.next().await {
                    Some(Ok(WatchEvent::Added(_) | WatchEvent::Modified(_))) => seen += 1,
                    Some(Ok(_)) => {}
                    Some(Err(e)) => panic!("watch error {e}"),
                    None => panic!("watch ended after {seen} events"),
                }
            }
        }));
    }
    let start = Instant::now();
    cms.create(&PostParams::default(), &cm("fan"))
        .await
        .expect("create");
    for i in 1..s.changes {
        cms.patch(
            "fan",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"n": i.to_string()}})),
        )
        .await
        .expect("patch");
    }
    let writes = start.elapsed();
    for w in watchers {
        w.await.expect("watcher");
    }
    let took = start.elapsed();
    report(
        &format!("watch fan-out: writes with {} watchers", s.watchers),
        s.changes,
        writes,
    );
    report(
        &format!(
            "watch fan-out: events delivered ({}x{})",
            s.watchers, s.changes
        ),
        s.watchers * s.changes,
        took,
    );
}

fn main() {
    let quick = std::env::var_os("FSM_BENCH_QUICK").is_some();
    let div = if quick { 10 } else { 1 };
    let scale = Scale {
        gets: 20_000 / div,
        patches: 10_000 / div,
        watchers: 200 / div,
        changes: 1_000 / div,
        concurrency: 16,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let server = ApiServer::new();
        bench(server.client(), "in-process", &scale).await;
        let http = server.serve_http().await.expect("serve");
        let client = http.kube_client().await.expect("client");
        bench(client, "HTTP", &scale).await;
        fan_out(&server, &scale).await;
        println!("requests served: {}", server.request_log().total());
    });
}
