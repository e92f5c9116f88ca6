//! A small database-as-a-service API on loopback, the external system the
//! `database` operator provisions through.
//!
//! It is deliberately unkind, like real cloud APIs:
//! - `POST /v1/instances` is **not idempotent**: every call creates (and
//!   charges for) a new instance, even with a request id seen before. The
//!   request id is only recorded, so a client can look it up afterwards with
//!   `GET /v1/instances?requestId=…`.
//! - Unless it is started with [`CloudConfig::idempotency_keys`]: then a
//!   create carrying the header `Idempotency-Key: K` with a `K` seen before
//!   creates nothing and answers `200` with the instance the first create
//!   with `K` made, as that create answered it (also when that answer was
//!   lost), like EC2's `ClientToken`, GCP's `requestId` or Stripe's
//!   `Idempotency-Key`. The same key with a different body is refused with
//!   `422` (Stripe's choice): the caller has a bug, and neither answer would
//!   be right. Keys are checked and recorded under the lock the create
//!   takes, so two creates with one key racing each other make one
//!   instance. Keys never expire here (real APIs keep them for a day or
//!   so). Off by default, so that the soaks keep showing what the look-up
//!   by request id is for; off, the header is ignored, as by an API without
//!   the feature.
//! - It fails now and then (seeded, so a test sees the same sequence for the
//!   same sequence of calls): `503` before doing anything, or, for a create,
//!   `500` *after* the instance was created and charged — the lost response
//!   that makes a blind retry pay twice.
//! - An instance is `creating` for a while before it is `available`.
//! - Seeding rejects SQL it cannot parse with `422`.
//!
//! `GET /v1/ledger` lists every charge, so tests can check that each
//! database was paid for exactly once.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How the service behaves.
#[derive(Clone, Debug)]
pub struct CloudConfig {
    /// The seed of the failure sequence.
    pub seed: u64,
    /// The share of calls that fail, from 0.0 to 1.0.
    pub failure_rate: f64,
    /// How long an instance is `creating`; `None`: forever.
    pub ready_after: Option<Duration>,
    /// Whether a create honours its `Idempotency-Key` header (see the
    /// module docs); `false`: the header is ignored.
    pub idempotency_keys: bool,
}

impl Default for CloudConfig {
    fn default() -> Self {
        CloudConfig {
            seed: 7,
            failure_rate: 0.2,
            ready_after: Some(Duration::from_millis(800)),
            idempotency_keys: false,
        }
    }
}

/// A database instance as the API shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    /// The instance id, `db-N`.
    pub id: String,
    /// The request id the create carried.
    pub request_id: String,
    /// The name asked for.
    pub name: String,
    /// `creating` or `available`.
    pub status: String,
    /// Whether seed SQL ran.
    pub seeded: bool,
}

/// The body of a create.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateInstance {
    /// The caller's request id, recorded with the instance.
    pub request_id: String,
    /// The database's name.
    pub name: String,
    /// `postgres`, `mysql`, ...
    pub engine: String,
    /// `small`, `medium`, `large`.
    pub size: String,
}

/// One charge: an instance created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Charge {
    /// The instance charged for.
    pub instance_id: String,
    /// The create's request id.
    pub request_id: String,
    /// The database's name.
    pub name: String,
}

/// Everything the service billed and deleted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ledger {
    /// Every create, in order.
    pub charges: Vec<Charge>,
    /// Instances deleted, in order.
    pub deleted: Vec<String>,
    /// Calls answered with an injected failure.
    pub injected_failures: u32,
    /// Creates that succeeded but answered `500`: the caller paid without
    /// hearing of it.
    pub lost_answers: u32,
    /// Creates answered from their `Idempotency-Key` instead of creating
    /// (with [`CloudConfig::idempotency_keys`] only): each a charge saved.
    #[serde(default)]
    pub replays: u32,
}

impl Ledger {
    /// How many instances were created for the database `name`.
    pub fn creates_for(&self, name: &str) -> usize {
        self.charges.iter().filter(|c| c.name == name).count()
    }
}

/// Credentials issued for an instance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password.
    pub password: String,
}

/// The body of a seed call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedRequest {
    /// SQL statements separated by `;`.
    pub sql: String,
}

struct Stored {
    instance: Instance,
    created: Instant,
}

/// What a create with an idempotency key did: its body, to tell a retry
/// from a different request under the same key, and its answer, to repeat.
struct Keyed {
    request: CreateInstance,
    answer: Instance,
}

struct Inner {
    config: CloudConfig,
    rng: u64,
    next_id: u64,
    instances: BTreeMap<String, Stored>,
    /// By idempotency key; filled only with `config.idempotency_keys`.
    keys: BTreeMap<String, Keyed>,
    ledger: Ledger,
}

impl Inner {
    fn new(config: CloudConfig) -> Inner {
        Inner {
            rng: config.seed,
            config,
            next_id: 1,
            instances: BTreeMap::new(),
            keys: BTreeMap::new(),
            ledger: Ledger::default(),
        }
    }

    /// splitmix64: small, seeded, good enough to decide failures.
    fn draw(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `Some(true)`: fail before acting; `Some(false)`: act, then fail.
    fn injected(&mut self) -> Option<bool> {
        if self.config.failure_rate <= 0.0 || self.draw() >= self.config.failure_rate {
            return None;
        }
        self.ledger.injected_failures += 1;
        Some(self.draw() < 0.5)
    }

    fn refresh(&mut self) {
        let ready_after = self.config.ready_after;
        for stored in self.instances.values_mut() {
            if ready_after.is_some_and(|d| stored.created.elapsed() >= d) {
                stored.instance.status = "available".to_owned();
            }
        }
    }
}

type Shared = Arc<Mutex<Inner>>;

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Inner> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}

fn unavailable() -> Response {
    error(StatusCode::SERVICE_UNAVAILABLE, "try again later")
}

/// The running service.
pub struct CloudService {
    addr: SocketAddr,
    shared: Shared,
    task: JoinHandle<()>,
}

impl CloudService {
    /// Starts the service on `127.0.0.1`, on a free port.
    ///
    /// # Errors
    /// The port could not be bound.
    pub async fn start(config: CloudConfig) -> std::io::Result<Self> {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), config).await
    }

    /// Starts the service on `addr` (port 0: a free one), e.g. an address
    /// that pods of a local cluster reach.
    ///
    /// # Errors
    /// `addr` could not be bound.
    pub async fn start_on(addr: SocketAddr, config: CloudConfig) -> std::io::Result<Self> {
        let shared = Arc::new(Mutex::new(Inner::new(config)));
        let app = Router::new()
            .route("/v1/instances", post(create).get(find))
            .route("/v1/instances/{id}", get(read).delete(remove))
            .route("/v1/instances/{id}/seed", post(seed))
            .route("/v1/instances/{id}/credentials", post(credentials))
            .route("/v1/ledger", get(ledger))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "the cloud API stopped");
            }
        });
        Ok(CloudService { addr, shared, task })
    }

    /// The service's base URL, `http://ADDRESS:PORT` (`127.0.0.1` unless
    /// started elsewhere).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A copy of the ledger.
    pub fn ledger(&self) -> Ledger {
        lock(&self.shared).ledger.clone()
    }

    /// The instances that exist now.
    pub fn instances(&self) -> Vec<Instance> {
        let mut inner = lock(&self.shared);
        inner.refresh();
        inner
            .instances
            .values()
            .map(|s| s.instance.clone())
            .collect()
    }
}

impl Drop for CloudService {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The header a create's idempotency key travels in.
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

/// The create's idempotency key, when the service honours keys and the
/// request carries one; `Err` (the message of a `400`) for a header that
/// is empty or not text.
fn idempotency_key(
    config: &CloudConfig,
    headers: &HeaderMap,
) -> Result<Option<String>, &'static str> {
    if !config.idempotency_keys {
        return Ok(None);
    }
    let Some(value) = headers.get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    match value.to_str() {
        Ok(key) if !key.is_empty() => Ok(Some(key.to_owned())),
        _ => Err("Idempotency-Key must be non-empty visible ASCII"),
    }
}

async fn create(
    State(shared): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<CreateInstance>,
) -> Response {
    // One lock for the whole create: the key is looked up and recorded
    // with the instance, so two creates with one key cannot both create.
    let mut inner = lock(&shared);
    let key = match idempotency_key(&inner.config, &headers) {
        Ok(key) => key,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let failure = inner.injected();
    if failure == Some(true) {
        return unavailable();
    }
    if let Some(key) = &key
        && let Some(keyed) = inner.keys.get(key)
    {
        if keyed.request != body {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("Idempotency-Key {key} was used with a different request"),
            );
        }
        // A replay acts on nothing, so it has no answer to lose: a failure
        // drawn for it fails it as before acting.
        if failure.is_some() {
            return unavailable();
        }
        let answer = keyed.answer.clone();
        inner.ledger.replays += 1;
        return (StatusCode::OK, Json(answer)).into_response();
    }
    let id = format!("db-{}", inner.next_id);
    inner.next_id += 1;
    let instance = Instance {
        id: id.clone(),
        request_id: body.request_id.clone(),
        name: body.name.clone(),
        status: "creating".to_owned(),
        seeded: false,
    };
    inner.ledger.charges.push(Charge {
        instance_id: id.clone(),
        request_id: body.request_id.clone(),
        name: body.name.clone(),
    });
    inner.instances.insert(
        id,
        Stored {
            instance: instance.clone(),
            created: Instant::now(),
        },
    );
    if let Some(key) = key {
        inner.keys.insert(
            key,
            Keyed {
                request: body,
                answer: instance.clone(),
            },
        );
    }
    if failure == Some(false) {
        // Created and charged, but the caller never hears of it.
        inner.ledger.lost_answers += 1;
        return error(StatusCode::INTERNAL_SERVER_ERROR, "connection reset");
    }
    (StatusCode::CREATED, Json(instance)).into_response()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FindQuery {
    request_id: String,
}

async fn find(State(shared): State<Shared>, Query(q): Query<FindQuery>) -> Response {
    let mut inner = lock(&shared);
    if inner.injected().is_some() {
        return unavailable();
    }
    inner.refresh();
    let found: Vec<Instance> = inner
        .instances
        .values()
        .filter(|s| s.instance.request_id == q.request_id)
        .map(|s| s.instance.clone())
        .collect();
    Json(found).into_response()
}

async fn read(State(shared): State<Shared>, Path(id): Path<String>) -> Response {
    let mut inner = lock(&shared);
    if inner.injected().is_some() {
        return unavailable();
    }
    inner.refresh();
    match inner.instances.get(&id) {
        Some(s) => Json(s.instance.clone()).into_response(),
        None => error(StatusCode::NOT_FOUND, "no such instance"),
    }
}

async fn remove(State(shared): State<Shared>, Path(id): Path<String>) -> Response {
    let mut inner = lock(&shared);
    if inner.injected().is_some() {
        return unavailable();
    }
    match inner.instances.remove(&id) {
        Some(_) => {
            inner.ledger.deleted.push(id);
            StatusCode::NO_CONTENT.into_response()
        }
        None => error(StatusCode::NOT_FOUND, "no such instance"),
    }
}

/// Statements must start with a word the service knows.
fn parse_sql(sql: &str) -> Result<(), String> {
    const KNOWN: [&str; 4] = ["CREATE", "INSERT", "ALTER", "GRANT"];
    for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let word = statement.split_whitespace().next().unwrap_or_default();
        if !KNOWN.iter().any(|k| k.eq_ignore_ascii_case(word)) {
            return Err(format!("syntax error at or near \"{word}\""));
        }
    }
    Ok(())
}

async fn seed(
    State(shared): State<Shared>,
    Path(id): Path<String>,
    Json(body): Json<SeedRequest>,
) -> Response {
    let mut inner = lock(&shared);
    if inner.injected().is_some() {
        return unavailable();
    }
    inner.refresh();
    let Some(stored) = inner.instances.get_mut(&id) else {
        return error(StatusCode::NOT_FOUND, "no such instance");
    };
    if stored.instance.status != "available" {
        return error(StatusCode::CONFLICT, "instance is not available yet");
    }
    if let Err(message) = parse_sql(&body.sql) {
        return error(StatusCode::UNPROCESSABLE_ENTITY, &message);
    }
    stored.instance.seeded = true;
    Json(stored.instance.clone()).into_response()
}

async fn credentials(State(shared): State<Shared>, Path(id): Path<String>) -> Response {
    let mut inner = lock(&shared);
    if inner.injected().is_some() {
        return unavailable();
    }
    if !inner.instances.contains_key(&id) {
        return error(StatusCode::NOT_FOUND, "no such instance");
    }
    // A new password on every call, as rotating APIs do.
    let password = format!("{:016x}", (inner.draw() * u64::MAX as f64) as u64);
    Json(Credentials {
        username: "app".to_owned(),
        password,
    })
    .into_response()
}

async fn ledger(State(shared): State<Shared>) -> Json<Ledger> {
    Json(lock(&shared).ledger.clone())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn sql_is_checked_statement_by_statement() {
        assert_eq!(
            parse_sql("CREATE TABLE t (id int); insert into t values (1);"),
            Ok(())
        );
        assert_eq!(
            parse_sql("CREATE TABLE t (id int); INSRT INTO t VALUES (1)"),
            Err("syntax error at or near \"INSRT\"".to_owned())
        );
    }

    #[test]
    fn failures_follow_the_seed() {
        let run = |seed| {
            let mut inner = Inner::new(CloudConfig {
                seed,
                failure_rate: 0.3,
                ready_after: None,
                idempotency_keys: false,
            });
            (0..50).map(|_| inner.injected()).collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
        let failures = run(1).iter().filter(|f| f.is_some()).count();
        assert!(
            (5..=25).contains(&failures),
            "{failures} of 50 failed at rate 0.3"
        );
    }

    use crate::database::client::{CloudClient, CloudError};

    async fn service(failure_rate: f64, idempotency_keys: bool) -> CloudService {
        CloudService::start(CloudConfig {
            seed: 1,
            failure_rate,
            ready_after: None,
            idempotency_keys,
        })
        .await
        .unwrap()
    }

    fn request(request_id: &str, size: &str) -> CreateInstance {
        CreateInstance {
            request_id: request_id.into(),
            name: "inventory".into(),
            engine: "postgres".into(),
            size: size.into(),
        }
    }

    #[tokio::test]
    async fn a_key_seen_before_returns_the_first_instance_and_charges_once() {
        let cloud = service(0.0, true).await;
        let client = CloudClient::new(cloud.url());
        let first = client.create(&request("req-1", "small")).await.unwrap();
        let again = client.create(&request("req-1", "small")).await.unwrap();
        assert_eq!(again, first);
        let ledger = cloud.ledger();
        assert_eq!(ledger.charges.len(), 1, "{ledger:?}");
        assert_eq!(ledger.replays, 1, "{ledger:?}");
        assert_eq!(cloud.instances().len(), 1);
        // Another key is another create.
        let other = client.create(&request("req-2", "small")).await.unwrap();
        assert_ne!(other.id, first.id);
        assert_eq!(cloud.ledger().charges.len(), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_creates_with_one_key_make_one_instance() {
        let cloud = service(0.0, true).await;
        let client = CloudClient::new(cloud.url());
        let creates: Vec<_> = (0..8)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move { client.create(&request("req-1", "small")).await })
            })
            .collect();
        let mut ids = BTreeSet::new();
        for create in creates {
            ids.insert(create.await.unwrap().unwrap().id);
        }
        assert_eq!(ids.len(), 1, "{ids:?}");
        let ledger = cloud.ledger();
        assert_eq!(ledger.charges.len(), 1, "{ledger:?}");
        assert_eq!(ledger.replays, 7, "{ledger:?}");
        assert_eq!(cloud.instances().len(), 1);
    }

    /// A seed whose first call fails after acting: a create that charges
    /// and answers `500`.
    fn seed_losing_the_first_answer() -> u64 {
        (0..1000)
            .find(|seed| {
                Inner::new(CloudConfig {
                    seed: *seed,
                    failure_rate: 0.5,
                    ready_after: None,
                    idempotency_keys: true,
                })
                .injected()
                    == Some(false)
            })
            .expect("a seed whose first call loses its answer")
    }

    #[tokio::test]
    async fn a_retry_after_a_lost_answer_gets_the_instance_created() {
        let cloud = CloudService::start(CloudConfig {
            seed: seed_losing_the_first_answer(),
            failure_rate: 0.5,
            ready_after: None,
            idempotency_keys: true,
        })
        .await
        .unwrap();
        let client = CloudClient::new(cloud.url());
        let lost = client.create(&request("req-1", "small")).await;
        assert!(
            matches!(lost, Err(CloudError::Unavailable { status, .. }) if status == 500),
            "{lost:?}"
        );
        lock(&cloud.shared).config.failure_rate = 0.0;
        let retried = client.create(&request("req-1", "small")).await.unwrap();
        let ledger = cloud.ledger();
        assert_eq!(ledger.lost_answers, 1, "{ledger:?}");
        assert_eq!(ledger.charges.len(), 1, "{ledger:?}");
        assert_eq!(ledger.charges[0].instance_id, retried.id);
        assert_eq!(ledger.replays, 1, "{ledger:?}");
        assert_eq!(cloud.instances().len(), 1);
    }

    #[tokio::test]
    async fn a_key_reused_with_another_body_is_refused() {
        let cloud = service(0.0, true).await;
        let client = CloudClient::new(cloud.url());
        let first = client.create(&request("req-1", "small")).await.unwrap();
        let other = client.create(&request("req-1", "large")).await;
        match other {
            Err(CloudError::Rejected { status, message }) => {
                assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
                assert!(message.contains("req-1"), "{message}");
            }
            other => panic!("expected a 422, got {other:?}"),
        }
        let ledger = cloud.ledger();
        assert_eq!(ledger.charges.len(), 1, "{ledger:?}");
        assert_eq!(ledger.replays, 0, "{ledger:?}");
        assert_eq!(cloud.instances(), [first]);
    }

    #[tokio::test]
    async fn without_keys_the_header_is_ignored_and_each_create_charges() {
        let cloud = service(0.0, false).await;
        let client = CloudClient::new(cloud.url());
        let first = client.create(&request("req-1", "small")).await.unwrap();
        let again = client.create(&request("req-1", "small")).await.unwrap();
        assert_ne!(again.id, first.id);
        // Even a different body under the same key: nothing checks it.
        client.create(&request("req-1", "large")).await.unwrap();
        let ledger = cloud.ledger();
        assert_eq!(ledger.charges.len(), 3, "{ledger:?}");
        assert_eq!(ledger.replays, 0, "{ledger:?}");
        assert_eq!(cloud.instances().len(), 3);
    }

    #[test]
    fn the_key_is_read_only_when_keys_are_on() {
        let on = CloudConfig {
            idempotency_keys: true,
            ..CloudConfig::default()
        };
        let off = CloudConfig::default();
        let mut headers = HeaderMap::new();
        assert_eq!(idempotency_key(&on, &headers).ok(), Some(None));
        headers.insert(IDEMPOTENCY_KEY, "req-1".parse().unwrap());
        assert_eq!(
            idempotency_key(&on, &headers).ok(),
            Some(Some("req-1".to_owned()))
        );
        assert_eq!(idempotency_key(&off, &headers).ok(), Some(None));
        headers.insert(IDEMPOTENCY_KEY, "".parse().unwrap());
        assert!(idempotency_key(&on, &headers).is_err(), "an empty key");
        assert_eq!(idempotency_key(&off, &headers).ok(), Some(None));
    }
}
