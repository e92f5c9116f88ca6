//! The examples on a real one-node cluster (issue 37, test 1), against a
//! cluster from `scripts/real-cluster/start`, their operators in this test
//! process (out of the cluster, as `cargo run` would):
//!
//! - the WebPage example's dependents-only operator: the page's Deployment
//!   really rolls out, its pod really serves the page, and the page is
//!   fetched through the page's Service at its ClusterIP (kube-proxy's
//!   rules), before and after new HTML rolls the Deployment again;
//! - the whole demo (`examples::demo::run`, as `demo --kubeconfig` runs
//!   it): every object comes to rest as on the embedded server, its Jobs
//!   and Deployments run by the cluster's own controllers and kubelet on
//!   the stand-in images `scripts/real-cluster/build` assembles under the
//!   examples' image names.
//!
//! The pod's image is the example's `nginx:1.27`, which on that cluster is
//! busybox's httpd serving nginx's document root on port 80
//! (`scripts/real-cluster/common.sh`, `WEBPAGE_SERVER_IMAGE`): nothing is
//! pulled.
//!
//! Runs only when `FSM_REAL_CLUSTER_KUBECONFIG` names that cluster's
//! kubeconfig; otherwise it says so and returns.
//!
//! ```sh
//! export FSM_REAL_CLUSTER_KUBECONFIG=$(sudo scripts/real-cluster/start)
//! cargo test -p examples --test it -- real_cluster::
//! ```

use std::time::Duration;

use examples::database::Database;
use examples::demo::{DemoOptions, run};
use examples::webpage::{self, NGINX_IMAGE, WebPage, WebPageSpec};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{CustomResourceExt, ResourceExt};
use operator_fsm::testkit::TestCluster;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ENV: &str = "FSM_REAL_CLUSTER_KUBECONFIG";
/// The name under which the cluster holds the stand-in server image
/// (`WEBPAGE_SERVER_IMAGE` in scripts/real-cluster/common.sh), as the CRI
/// spells `nginx:1.27`.
const SERVER_IMAGE: &str = "docker.io/library/nginx:1.27";
/// A rollout on a started cluster takes a few seconds; generous for a
/// loaded machine.
const DEADLINE: Duration = Duration::from_secs(120);

/// Polls `check` until it returns `Some`, or panics with `what`.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {DEADLINE:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `GET /` over HTTP/1.0 from this machine: the body of a `200`.
async fn http_get(addr: &str) -> Option<String> {
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        stream
            .write_all(b"GET / HTTP/1.0\r\nHost: fsm\r\n\r\n")
            .await
            .ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await.ok()?;
        let (head, body) = response.split_once("\r\n\r\n")?;
        (head.starts_with("HTTP/1.") && head.contains(" 200 ")).then(|| body.to_owned())
    };
    tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .ok()
        .flatten()
}

/// The page's `DependentsReady` condition is `True`.
async fn dependents_ready(pages: &Api<WebPage>, name: &str) -> Option<()> {
    let page = pages.get(name).await.ok()?;
    page.status?
        .conditions?
        .iter()
        .any(|c| c.type_ == "DependentsReady" && c.status == "True")
        .then_some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webpage_is_served_by_a_real_pod_through_its_service() {
    let Some(kubeconfig) = std::env::var_os(ENV).filter(|p| !p.is_empty()) else {
        eprintln!(
            "real_cluster::the_webpage_is_served_by_a_real_pod_through_its_service: skipped, \
             {ENV} is not set (scripts/real-cluster/start prints it)"
        );
        return;
    };
    assert_eq!(
        format!("docker.io/library/{NGINX_IMAGE}"),
        SERVER_IMAGE,
        "the example's server image changed: change WEBPAGE_SERVER_IMAGE in \
         scripts/real-cluster/common.sh with it"
    );
    let cluster = TestCluster::connect(std::path::Path::new(&kubeconfig))
        .await
        .expect("the real cluster's kubeconfig");
    cluster
        .install_crd(&WebPage::crd())
        .await
        .expect("the WebPage CRD");
    let ns = cluster
        .create_namespace("real-cluster-webpage")
        .await
        .expect("a namespace");
    let client = cluster.client();
    let operator = tokio::spawn(webpage::run_in(
        client.clone(),
        Some(ns.clone()),
        webpage::runtime(client.clone()),
    ));

    let pages: Api<WebPage> = Api::namespaced(client.clone(), &ns);
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let first = "<h1>served by a real pod</h1>\n";
    pages
        .create(
            &PostParams::default(),
            &WebPage::new(
                "hello",
                WebPageSpec {
                    html: first.to_owned(),
                    exposed: false,
                },
            ),
        )
        .await
        .expect("create the WebPage");
    eventually(
        "the page's dependents ready (its Deployment rolled out)",
        || dependents_ready(&pages, "hello"),
    )
    .await;
    let service = services.get("hello").await.expect("the page's Service");
    let cluster_ip = service
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a ClusterIP");
    let addr = format!("{cluster_ip}:80");
    eventually("the page at the Service's ClusterIP", || async {
        http_get(&addr).await.filter(|body| body == first)
    })
    .await;

    // New HTML: the ConfigMap changes and the Deployment rolls new pods,
    // which serve the new page at the same address.
    let second = "<h1>and rolled again</h1>\n";
    pages
        .patch(
            "hello",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"html": second}})),
        )
        .await
        .expect("edit the WebPage");
    eventually("the new page at the Service's ClusterIP", || async {
        http_get(&addr).await.filter(|body| body == second)
    })
    .await;
    eventually("the page's dependents ready again", || {
        dependents_ready(&pages, "hello")
    })
    .await;

    operator.abort();
    let namespaces: Api<Namespace> = Api::all(client);
    let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
}

/// The demo against the real cluster: no `--simulate`, so the build Jobs,
/// the smoke test and every Deployment really run, on the stand-ins. It
/// comes to rest as on the embedded server, with the whole story (the same
/// checks as `demo::every_object_rests_in_its_expected_state`); and what
/// the cluster ran says so too: orders' first kit build's pod really
/// failed and its second succeeded, every other Job completed, every
/// Deployment is available with all its replicas.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_comes_to_rest_on_the_real_cluster() {
    let Some(kubeconfig) = std::env::var_os(ENV).filter(|p| !p.is_empty()) else {
        eprintln!(
            "real_cluster::the_demo_comes_to_rest_on_the_real_cluster: skipped, \
             {ENV} is not set (scripts/real-cluster/start prints it)"
        );
        return;
    };
    let path = std::path::PathBuf::from(&kubeconfig);
    let cluster = TestCluster::connect(&path)
        .await
        .expect("the real cluster's kubeconfig");
    let namespace = cluster
        .create_namespace("real-cluster-demo")
        .await
        .expect("a namespace");
    let client = cluster.client();
    let options = DemoOptions {
        kubeconfig: Some(path),
        namespace: namespace.clone(),
        // About 15 s on a started cluster; generous for a loaded machine.
        timeout: Duration::from_secs(180),
        ..DemoOptions::default()
    };
    let started = std::time::Instant::now();
    let mut out = Vec::new();
    let report = run(&options, &mut out).await.expect("the demo runs");
    let text = String::from_utf8(out).expect("UTF-8 output");
    println!(
        "the demo on the real cluster: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    super::demo::the_whole_story_was_told(&report, &text);
    assert!(
        text.contains("Jobs and Deployments must really run there"),
        "{text}"
    );

    let jobs: Api<Job> = Api::namespaced(client.clone(), &namespace);
    let jobs = jobs.list(&ListParams::default()).await.expect("the Jobs");
    let outcome = |job: &Job| {
        let status = job.status.clone().unwrap_or_default();
        (status.succeeded.unwrap_or(0), status.failed.unwrap_or(0))
    };
    let mut orders_attempts = Vec::new();
    for job in &jobs.items {
        let name = job.name_any();
        if name.starts_with("orders-kit-") {
            orders_attempts.push((
                name.rsplit('-').next().unwrap_or_default().to_owned(),
                outcome(job),
            ));
        } else {
            assert_eq!(outcome(job), (1, 0), "Job {name} completed: {job:?}");
        }
    }
    orders_attempts.sort();
    // Attempt 0's pod failed (the stand-in builder's scripted failure),
    // attempt 1's succeeded.
    assert_eq!(
        orders_attempts,
        [("0".to_owned(), (0, 1)), ("1".to_owned(), (1, 0))],
        "{text}"
    );
    // sso's build Job, billing's two (its routes changed), the page's two
    // smoke tests (its HTML changed; the first may already be pruned).
    assert!(
        jobs.items.len() >= 5,
        "{:?}",
        jobs.items
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>()
    );

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    let deployments = deployments
        .list(&ListParams::default())
        .await
        .expect("the Deployments");
    let mut names: Vec<String> = deployments
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    names.sort();
    assert_eq!(names, ["billing", "corner", "home", "orders", "sso"]);
    for deployment in &deployments.items {
        let want = deployment
            .spec
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(1);
        let available = deployment
            .status
            .as_ref()
            .and_then(|s| s.available_replicas)
            .unwrap_or(0);
        assert_eq!(available, want, "{}: {deployment:?}", deployment.name_any());
    }

    // The operators are gone with the demo: the Databases' finalizers are
    // nobody's to remove now, so the test removes them, then the namespace.
    let databases: Api<Database> = Api::namespaced(client.clone(), &namespace);
    for database in databases
        .list(&ListParams::default())
        .await
        .expect("the Databases")
    {
        let _ = databases
            .patch(
                &database.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
            )
            .await;
    }
    let namespaces: Api<Namespace> = Api::all(client);
    let _ = namespaces
        .delete(&namespace, &DeleteParams::default())
        .await;
}
