//! `run --http-addr`: `/healthz` answers while the process serves;
//! `/readyz` answers 503 with its reasons until the resource has been
//! listed and the controller's watch has synced, then 200; a follower under
//! leader election is ready without running the controller. Against the
//! embedded API server, or the real kube-apiserver named by
//! `FSM_REAL_APISERVER_KUBECONFIG`.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use common::*;
use fsm_kube::cli::{Cli, Command, Operator, RunContext, StoreKind};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::{Controller, watcher};

fn parse(args: &[&str]) -> Command {
    Cli::try_parse_from(std::iter::once("widget-operator").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
        .command
}

fn operator() -> Operator<WidgetState> {
    Operator::new("widget-operator", StoreKind::Status)
}

/// A kubeconfig for `env`'s server (the embedded one served over loopback
/// HTTP while the returned server lives).
async fn kubeconfig_of(env: &Env) -> (Option<fsm_testkit::HttpServer>, String) {
    match (env.embedded(), env.cluster.kubeconfig()) {
        (Some(server), _) => {
            let http = server.serve_http().await.unwrap();
            let path = http.kubeconfig().to_str().unwrap().to_owned();
            (Some(http), path)
        }
        (None, Some(path)) => (None, path.to_str().unwrap().to_owned()),
        (None, None) => panic!("a real cluster without a kubeconfig"),
    }
}

fn free_local_addr() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

/// A bare HTTP/1.0 GET: the status code and the body.
async fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let (addr, path) = (addr.to_owned(), path.to_owned());
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&addr).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        let (head, body) = response.split_once("\r\n\r\n")?;
        let code = head.split(' ').nth(1)?.parse().ok()?;
        Some((code, body.to_owned()))
    })
    .await
    .ok()?
}

/// Waits until `path` answers `code`, and returns the body.
async fn eventually_answers(addr: &str, path: &str, code: u16) -> String {
    eventually(&format!("{path} to answer {code}"), || async move {
        http_get(addr, path)
            .await
            .filter(|(got, _)| *got == code)
            .map(|(_, body)| body)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_the_main_functions_holds_and_healthz_does_not() {
    let env = env().await;
    let (_http, kubeconfig) = kubeconfig_of(&env).await;
    let addr = free_local_addr();
    let command = parse(&[
        "run",
        "--kubeconfig",
        &kubeconfig,
        "-n",
        &env.ns,
        "--http-addr",
        &addr,
    ]);
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let release_rx = Arc::new(tokio::sync::Mutex::new(Some(release_rx)));
    let run = move |run: RunContext<WidgetState>| {
        let release_rx = release_rx.clone();
        async move {
            let hold = run.health().hold("warming the cache");
            if let Some(release) = release_rx.lock().await.take() {
                let _ = release.await;
            }
            drop(hold);
            std::future::pending::<()>().await;
        }
    };
    let operator_task =
        tokio::spawn(async move { operator().execute(command, run, &mut Vec::new()).await });

    assert_eq!(eventually_answers(&addr, "/healthz", 200).await, "ok\n");
    // The resource gets listed, but the main function still holds.
    let body = eventually_answers(&addr, "/readyz", 503).await;
    eventually("only the main function's hold", || {
        let addr = addr.clone();
        async move {
            let (code, body) = http_get(&addr, "/readyz").await?;
            (code == 503 && body == "not ready:\n- warming the cache\n").then_some(())
        }
    })
    .await;
    assert!(body.starts_with("not ready:\n"), "{body}");
    release_tx.send(()).unwrap();
    assert_eq!(eventually_answers(&addr, "/readyz", 200).await, "ok\n");
    assert!(!operator_task.is_finished());
    operator_task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_answers_200_once_the_controllers_watch_has_synced() {
    let env = env().await;
    let (_http, kubeconfig) = kubeconfig_of(&env).await;
    create_widget(&env, "w1", WidgetSpec::colored("blue")).await;
    let addr = free_local_addr();
    let command = parse(&[
        "run",
        "--kubeconfig",
        &kubeconfig,
        "-n",
        &env.ns,
        "--metrics-addr", // the old name of --http-addr
        &addr,
    ]);
    let (store_tx, mut store_rx) = tokio::sync::mpsc::unbounded_channel();
    let run = move |run: RunContext<WidgetState>| {
        let store_tx = store_tx.clone();
        async move {
            let fsm = run.reconciler();
            let controller = Controller::new(run.api::<Widget>(), watcher::Config::default());
            run.ready_when_synced(controller.store());
            let _ = store_tx.send(controller.store());
            controller
                .run(fsm.reconcile(), fsm.error_policy(), ctx(&run.client))
                .for_each(|_| async {})
                .await;
        }
    };
    let operator_task =
        tokio::spawn(async move { operator().execute(command, run, &mut Vec::new()).await });
    let store = tokio::time::timeout(Duration::from_secs(30), store_rx.recv())
        .await
        .expect("the main function starts")
        .expect("it hands over its store");
    // From here on readiness waits for the watch: once ready, the
    // controller's cache holds the widget.
    assert_eq!(eventually_answers(&addr, "/readyz", 200).await, "ok\n");
    let cached: Vec<_> = store
        .state()
        .iter()
        .map(|w| w.metadata.name.clone())
        .collect();
    assert_eq!(cached, [Some("w1".to_owned())]);
    assert_eq!(eventually_answers(&addr, "/healthz", 200).await, "ok\n");
    operator_task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_is_ready_without_running_the_controller() {
    let env = env().await;
    let (_http, kubeconfig) = kubeconfig_of(&env).await;
    // Another replica holds the Lease, and renewed it just now.
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.ns);
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some("widgets".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("replica-0".into()),
            lease_duration_seconds: Some(3600),
            renew_time: Some(MicroTime(jiff::Timestamp::now())),
            ..LeaseSpec::default()
        }),
    };
    leases.create(&PostParams::default(), &lease).await.unwrap();
    let addr = free_local_addr();
    let command = parse(&[
        "run",
        "--kubeconfig",
        &kubeconfig,
        "-n",
        &env.ns,
        "--http-addr",
        &addr,
        "--leader-elect",
        "--lease-name",
        "widgets",
        "--lease-namespace",
        &env.ns,
        "--identity",
        "replica-1",
        "--lease-duration",
        "3600",
    ]);
    let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let run = move |_: RunContext<WidgetState>| {
        let _ = started_tx.send(());
        std::future::pending::<()>()
    };
    let operator_task =
        tokio::spawn(async move { operator().execute(command, run, &mut Vec::new()).await });
    assert_eq!(eventually_answers(&addr, "/readyz", 200).await, "ok\n");
    assert!(
        started_rx.try_recv().is_err(),
        "the follower did not run the controller"
    );
    let holder = leases
        .get("widgets")
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(holder.as_deref(), Some("replica-0"));
    operator_task.abort();
}
