//! The database operator through a real `Controller`, against the flaky,
//! non-idempotent cloud API on loopback.

use crate::common;

use std::time::Duration;

use common::{Env, eventually, options, quick_simulation, wait_for};
use examples::database::cloud::{CloudConfig, CloudService};
use examples::database::{self, Database, DatabaseSpec, DbContext};
use examples::demo::observe::{Kind, read_record};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

const GOOD: &str = "CREATE TABLE t (id int); INSERT INTO t VALUES (1);";
const BAD: &str = "CREATE TABLE t (id int); INSRT INTO t VALUES (1);";

async fn start(failure_rate: f64) -> (Env, CloudService) {
    let cloud = CloudService::start(CloudConfig {
        seed: 3,
        failure_rate,
        ready_after: Some(Duration::from_millis(200)),
        idempotency_keys: false,
    })
    .await
    .unwrap();
    let mut env = Env::new(quick_simulation()).await;
    let client = env.client.clone();
    let mut ctx = DbContext::new(client.clone(), cloud.url());
    ctx.poll = Duration::from_millis(100);
    let scope = env.scope();
    env.spawn(database::run_in(client, scope, ctx, options()));
    (env, cloud)
}

async fn create(env: &Env, name: &str, seed: &str) {
    let api: Api<Database> = Api::namespaced(env.client.clone(), &env.ns);
    let spec = DatabaseSpec {
        engine: "postgres".into(),
        size: "small".into(),
        seed: seed.into(),
    };
    api.create(&PostParams::default(), &Database::new(name, spec))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_database_is_created_exactly_once_through_a_flaky_api() {
    let (env, cloud) = start(0.2).await;
    let names = ["inventory", "orders", "users"];
    for name in names {
        create(&env, name, GOOD).await;
    }
    create(&env, "analytics", BAD).await;

    for name in names {
        wait_for(&env, Kind::Database, name, "Ready", |_| true).await;
    }
    let failed = wait_for(&env, Kind::Database, "analytics", "Failed", |_| true).await;
    let last_error = failed.last_error.clone().unwrap_or_default();
    assert!(
        last_error.contains("INSRT"),
        "analytics failed for another reason: {failed:?}"
    );

    let ledger = cloud.ledger();
    assert!(
        ledger.injected_failures > 0,
        "the API never failed: {ledger:?}"
    );
    for name in names.iter().chain(&["analytics"]) {
        assert_eq!(ledger.creates_for(name), 1, "{name} in {ledger:?}");
    }
    // The rejected database's instance was deleted by the compensation.
    let analytics = ledger
        .charges
        .iter()
        .find(|c| c.name == "analytics")
        .unwrap();
    assert_eq!(ledger.deleted, std::slice::from_ref(&analytics.instance_id));
    let mut live: Vec<String> = cloud.instances().into_iter().map(|i| i.name).collect();
    live.sort();
    assert_eq!(live, ["inventory", "orders", "users"]);

    // Credentials are published; the password lives in Secrets only.
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.ns);
    let connection = secrets.get("inventory-connection").await.unwrap();
    let data = connection.data.unwrap_or_default();
    let password = String::from_utf8(data["password"].0.clone()).unwrap();
    assert!(!password.is_empty());
    let record = secrets
        .get(&operator_fsm::store::record_object_name_for::<
            database::DbState,
        >("inventory"))
        .await
        .unwrap();
    assert!(
        record.data.is_some(),
        "the record is kept in the Secret store"
    );
    let databases: Api<Database> = Api::namespaced(env.client.clone(), &env.ns);
    let object = serde_json::to_string(&databases.get("inventory").await.unwrap()).unwrap();
    assert!(
        !object.contains(&password),
        "the password leaked into the Database"
    );
    // Nor into events (`Credentials` is `sensitive`), which do tell the story.
    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.ns);
    let events = events.list(&ListParams::default()).await.unwrap().items;
    let text = serde_json::to_string(&events).unwrap();
    assert!(
        text.contains("Transitioned"),
        "no transition events: {text}"
    );
    assert!(
        !text.contains(&password),
        "the password leaked into an event"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_database_deletes_its_instance() {
    let (env, cloud) = start(0.0).await;
    create(&env, "scratch", GOOD).await;
    wait_for(&env, Kind::Database, "scratch", "Ready", |_| true).await;
    assert_eq!(cloud.instances().len(), 1);

    let api: Api<Database> = Api::namespaced(env.client.clone(), &env.ns);
    api.delete("scratch", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Database to be gone", || async {
        api.get_opt("scratch").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(cloud.instances().is_empty());
    assert_eq!(cloud.ledger().deleted.len(), 1);
}

/// A Secret of the connection Secret's name that is not the Database's
/// (someone's, from before) is left alone: the Database waits in
/// `Credentials`, saying why, without failing or deleting its instance,
/// and publishes its credentials once the Secret is gone, in a Secret of
/// its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_secret_it_does_not_own_is_left_alone() {
    let (env, cloud) = start(0.0).await;
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.ns);
    let foreign = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("billing-connection".into()),
            ..Default::default()
        },
        string_data: Some([("password".to_owned(), "someone-else's".to_owned())].into()),
        ..Secret::default()
    };
    secrets
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();
    create(&env, "billing", GOOD).await;

    // Waiting for its next try: read the record as it is.
    let waiting = eventually("billing waiting in Credentials", || async {
        let r = read_record(&env.client, &env.ns, Kind::Database, "billing")
            .await
            .ok()??;
        let says = r
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("is not this Database's"));
        (r.state == "Credentials" && says).then_some(r)
    })
    .await;
    assert_eq!(waiting.attempt, 0, "waiting spends no attempt");
    assert!(waiting.failures_without_attempt >= 1);
    let untouched = secrets.get("billing-connection").await.unwrap();
    assert!(untouched.metadata.owner_references.is_none());
    let data = untouched.data.unwrap_or_default();
    assert_eq!(data.len(), 1, "nothing written into it: {:?}", data.keys());
    assert_eq!(cloud.instances().len(), 1, "the instance is kept");

    secrets
        .delete("billing-connection", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&env, Kind::Database, "billing", "Ready", |_| true).await;
    let ours = secrets.get("billing-connection").await.unwrap();
    let owners = ours.metadata.owner_references.unwrap_or_default();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].kind, "Database");
    assert!(ours.data.unwrap_or_default().contains_key("username"));
}
