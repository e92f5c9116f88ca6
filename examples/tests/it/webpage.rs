//! The WebPage operator through a real `Controller`, on the embedded API
//! server or the real kube-apiserver: without a machine, the four
//! dependents converge, the Ingress goes when the page is no longer
//! exposed, new HTML updates the ConfigMap in place, and a converged page
//! costs no write; with the machine, the page is deployed, smoke-tested
//! and served.

use crate::common;

use common::{Env, eventually, options, quick_simulation, wait_for};
use examples::demo::observe::Kind;
use examples::webpage::{self, NGINX_IMAGE, WebPage, WebPageSpec, desired, html_digest};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use operator_fsm::dependents::converge;
use operator_fsm::testkit::simulation::{JobOutcome, JobRule};
use serde_json::json;

fn page(html: &str, exposed: bool) -> WebPageSpec {
    WebPageSpec {
        html: html.to_owned(),
        exposed,
    }
}

async fn create(env: &Env, name: &str, spec: WebPageSpec) -> WebPage {
    Api::<WebPage>::namespaced(env.client.clone(), &env.ns)
        .create(&PostParams::default(), &WebPage::new(name, spec))
        .await
        .unwrap()
}

async fn edit(env: &Env, name: &str, spec: serde_json::Value) {
    Api::<WebPage>::namespaced(env.client.clone(), &env.ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": spec })),
        )
        .await
        .unwrap();
}

fn api<K>(env: &Env) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    Api::namespaced(env.client.clone(), &env.ns)
}

/// Runs the WebPage machine for `env`'s namespace, with quick requeues.
fn run_machine(env: &mut Env, client: &Client) {
    env.spawn(webpage::run_machine_in(
        client.clone(),
        env.scope(),
        webpage::runtime(client.clone()).pending_requeue(std::time::Duration::from_millis(300)),
        options(),
    ));
}

/// The page's `DependentsReady` condition, once it has `status`.
async fn dependents_ready(
    client: &Client,
    ns: &str,
    name: &str,
    status: &str,
) -> Option<Condition> {
    let page = Api::<WebPage>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .ok()??;
    page.status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "DependentsReady" && c.status == status)
}

async fn wait_ready(env: &Env, name: &str) -> Condition {
    eventually("DependentsReady True", || {
        dependents_ready(&env.client, &env.ns, name, "True")
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_machine_the_page_converges_loses_its_ingress_and_updates_in_place() {
    let mut env = Env::new(quick_simulation()).await;
    let client = env.client.clone();
    env.spawn(webpage::run_in(
        client.clone(),
        env.scope(),
        webpage::runtime(client.clone()),
    ));
    create(&env, "hello", page("<h1>one</h1>", true)).await;

    let ready = wait_ready(&env, "hello").await;
    assert_eq!(ready.message, "all 4 active dependent(s) ready");
    let html = api::<ConfigMap>(&env).get("hello-html").await.unwrap();
    assert_eq!(html.data.as_ref().unwrap()["index.html"], "<h1>one</h1>");
    let server = api::<Deployment>(&env).get("hello").await.unwrap();
    let pod = server.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.containers[0].image.as_deref(), Some(NGINX_IMAGE));
    let volume = pod.volumes.unwrap()[0].config_map.clone().unwrap();
    assert_eq!(volume.name, "hello-html");
    let service = api::<Service>(&env).get("hello").await.unwrap();
    assert_eq!(service.spec.unwrap().ports.unwrap()[0].port, 80);
    let ingress = api::<Ingress>(&env).get("hello").await.unwrap();
    let rule = &ingress.spec.clone().unwrap().rules.unwrap()[0];
    let backend = &rule.http.as_ref().unwrap().paths[0].backend;
    assert_eq!(backend.service.as_ref().unwrap().name, "hello");
    for owned in [html.owner_references(), ingress.owner_references()] {
        assert_eq!(owned[0].kind, "WebPage");
    }

    // No longer exposed: the Ingress is pruned, the rest stays.
    edit(&env, "hello", json!({"exposed": false})).await;
    eventually("the Ingress pruned", || {
        let ingresses = api::<Ingress>(&env);
        async move {
            ingresses
                .get_opt("hello")
                .await
                .unwrap()
                .is_none()
                .then_some(())
        }
    })
    .await;
    let ready = wait_ready(&env, "hello").await;
    assert_eq!(ready.message, "all 3 active dependent(s) ready");
    assert!(
        api::<Service>(&env)
            .get_opt("hello")
            .await
            .unwrap()
            .is_some()
    );

    // New HTML: the same ConfigMap, updated; the server rolls again.
    edit(&env, "hello", json!({"html": "<h1>two</h1>"})).await;
    let updated = eventually("the page updated", || {
        let configmaps = api::<ConfigMap>(&env);
        async move {
            let cm = configmaps.get("hello-html").await.ok()?;
            (cm.data.as_ref()?["index.html"] == "<h1>two</h1>").then_some(cm)
        }
    })
    .await;
    assert_eq!(updated.uid(), html.uid(), "updated in place, not replaced");
    eventually("a new rollout", || {
        let deployments = api::<Deployment>(&env);
        async move {
            let server = deployments.get("hello").await.ok()?;
            (server.metadata.generation > Some(1)).then_some(())
        }
    })
    .await;
    wait_ready(&env, "hello").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converged_page_is_resynced_without_a_write() {
    // No operator: only the converges of this test write.
    let env = Env::new(quick_simulation()).await;
    let runtime = webpage::runtime(env.client.clone());
    create(&env, "quiet", page("<h1>still</h1>", true)).await;
    eventually("the page converged", || {
        let (runtime, pages) = (runtime.clone(), api::<WebPage>(&env));
        async move {
            let page = pages.get("quiet").await.ok()?;
            let convergence = converge(&runtime, &page, &desired(&page).ok()?)
                .await
                .ok()?;
            convergence.is_ready().then_some(())
        }
    })
    .await;

    let page = api::<WebPage>(&env).get("quiet").await.unwrap();
    let log = env.cluster.embedded_server().map(|s| s.request_log());
    let since = log.as_ref().map_or(0, |l| l.records_since(0).0);
    let resync = converge(&runtime, &page, &desired(&page).unwrap())
        .await
        .unwrap();
    assert!(resync.is_ready(), "{}", resync.summary());
    assert!(resync.applied.is_empty(), "{:?}", resync.applied);
    assert!(resync.pruned.is_empty(), "{:?}", resync.pruned);
    assert_eq!(resync.unchanged, 4);
    if let Some(log) = log {
        let (_, records) = log.records_since(since);
        let writes: Vec<String> = records
            .iter()
            .filter(|r| !matches!(r.verb.as_str(), "get" | "list" | "watch"))
            .map(|r| format!("{} {} {:?}", r.verb, r.resource, r.name))
            .collect();
        assert!(writes.is_empty(), "{writes:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_machine_deploys_smoke_tests_and_serves_each_version_of_the_page() {
    let mut env = Env::new(quick_simulation()).await;
    let client = env.client.clone();
    run_machine(&mut env, &client);
    let first = create(&env, "shop", page("<h1>open</h1>", true)).await;

    let serving = wait_for(&env, Kind::WebPage, "shop", "Serving", |_| true).await;
    let path: Vec<&str> = serving.history.iter().map(|h| h.to.as_str()).collect();
    assert_eq!(path, ["Deploying", "Verifying", "Serving"]);
    let test = format!("shop-smoke-{}", html_digest(&first));
    assert!(api::<Job>(&env).get_opt(&test).await.unwrap().is_some());
    assert!(
        api::<Ingress>(&env)
            .get_opt("shop")
            .await
            .unwrap()
            .is_some()
    );
    let ready = wait_ready(&env, "shop").await;
    assert_eq!(ready.reason, "Ready");

    // A new version is deployed and tested again; the old test is pruned.
    edit(&env, "shop", json!({"html": "<h1>sale</h1>"})).await;
    let again = wait_for(&env, Kind::WebPage, "shop", "Serving", |r| {
        r.transitions > serving.transitions
    })
    .await;
    let edited = api::<WebPage>(&env).get("shop").await.unwrap();
    let new_test = format!("shop-smoke-{}", html_digest(&edited));
    assert!(
        again
            .history
            .iter()
            .any(|h| h.from.as_deref() == Some("Serving") && h.to == "Deploying"),
        "{:?}",
        again.history
    );
    let jobs: Vec<String> = api::<Job>(&env)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(jobs, [new_test]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_smoke_test_fails_the_page() {
    let mut simulation = quick_simulation();
    simulation
        .job_rules
        .push(JobRule::new("broken-smoke-", JobOutcome::Fail));
    let mut env = Env::new(simulation).await;
    let client = env.client.clone();
    run_machine(&mut env, &client);
    create(&env, "broken", page("<h1>?</h1>", false)).await;

    let failed = wait_for(&env, Kind::WebPage, "broken", "Failed", |_| true).await;
    let reason = failed.last_error.unwrap_or_default();
    assert!(reason.contains("the Job failed"), "{reason}");
    // The page's dependents stay: only the workflow failed.
    assert!(
        api::<Service>(&env)
            .get_opt("broken")
            .await
            .unwrap()
            .is_some()
    );
}

/// A person takes a field of the served page's Service with
/// `kubectl apply --server-side --force-conflicts`: the page stays
/// `Serving`, degraded with the conflict named, instead of spending its
/// attempts and failing; once the person gives the field up, the page
/// converges and is no longer degraded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_page_survives_a_persons_force_apply_degraded_not_failed() {
    let mut env = Env::new(quick_simulation()).await;
    let client = env.client.clone();
    run_machine(&mut env, &client);
    create(&env, "kiosk", page("<h1>hi</h1>", false)).await;
    let serving = wait_for(&env, Kind::WebPage, "kiosk", "Serving", |_| true).await;

    let persons = |target_port: Option<i32>| {
        let mut service = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kiosk"},
        });
        if let Some(port) = target_port {
            service["spec"] =
                json!({"ports": [{"port": 80, "protocol": "TCP", "targetPort": port}]});
        }
        service
    };
    api::<Service>(&env)
        .patch(
            "kiosk",
            &PatchParams::apply("person").force(),
            &Patch::Apply(&persons(Some(8080))),
        )
        .await
        .unwrap();
    let degraded = wait_for(&env, Kind::WebPage, "kiosk", "Serving", |r| {
        r.degraded.is_some()
    })
    .await;
    let reason = degraded.degraded.as_ref().unwrap().reason.clone();
    assert!(reason.contains("person"), "{reason}");
    assert_eq!(degraded.attempt, 0, "no attempt spent");
    assert_eq!(degraded.transitions, serving.transitions, "it never left");

    // Given up, the field is the page's again.
    api::<Service>(&env)
        .patch(
            "kiosk",
            &PatchParams::apply("person").force(),
            &Patch::Apply(&persons(None)),
        )
        .await
        .unwrap();
    let recovered = wait_for(&env, Kind::WebPage, "kiosk", "Serving", |r| {
        r.degraded.is_none() && r.transitions == serving.transitions
    })
    .await;
    assert_eq!(recovered.state, "Serving");
    let service = api::<Service>(&env).get("kiosk").await.unwrap();
    let port = service.spec.unwrap().ports.unwrap()[0].target_port.clone();
    assert_eq!(
        port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(80))
    );
}
