//! The WebPage example on a real one-node cluster (issue 37, test 1):
//! its dependents-only operator runs in this test process (out of the
//! cluster, as `cargo run` would) against a cluster from
//! `scripts/real-cluster/start`; the page's Deployment really rolls out,
//! its pod really serves the page, and the page is fetched through the
//! page's Service at its ClusterIP (kube-proxy's rules), before and after
//! new HTML rolls the Deployment again.
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

use examples::webpage::{self, NGINX_IMAGE, WebPage, WebPageSpec};
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::CustomResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
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
