//! A small database-as-a-service API on loopback, the external system the
//! `database` operator provisions through.
//!
//! It is deliberately unkind, like real cloud APIs:
//! - `POST /v1/instances` is **not idempotent**: every call creates (and
//!   charges for) a new instance, even with a request id seen before. The
//!   request id is only recorded, so a client can look it up afterwards with
//!   `GET /v1/instances?requestId=…`.
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
use axum::http::StatusCode;
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
}

impl Default for CloudConfig {
    fn default() -> Self {
        CloudConfig {
            seed: 7,
            failure_rate: 0.2,
            ready_after: Some(Duration::from_millis(800)),
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

struct Inner {
    config: CloudConfig,
    rng: u64,
    next_id: u64,
    instances: BTreeMap<String, Stored>,
    ledger: Ledger,
}

impl Inner {
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
        let shared = Arc::new(Mutex::new(Inner {
            rng: config.seed,
            config,
            next_id: 1,
            instances: BTreeMap::new(),
            ledger: Ledger::default(),
        }));
        let app = Router::new()
            .route("/v1/instances", post(create).get(find))
            .route("/v1/instances/{id}", get(read).delete(remove))
            .route("/v1/instances/{id}/seed", post(seed))
            .route("/v1/instances/{id}/credentials", post(credentials))
            .route("/v1/ledger", get(ledger))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "the cloud API stopped");
            }
        });
        Ok(CloudService { addr, shared, task })
    }

    /// The service's base URL, `http://127.0.0.1:PORT`.
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

async fn create(State(shared): State<Shared>, Json(body): Json<CreateInstance>) -> Response {
    let mut inner = lock(&shared);
    let failure = inner.injected();
    if failure == Some(true) {
        return unavailable();
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
        request_id: body.request_id,
        name: body.name,
    });
    inner.instances.insert(
        id,
        Stored {
            instance: instance.clone(),
            created: Instant::now(),
        },
    );
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
            let mut inner = Inner {
                config: CloudConfig {
                    seed,
                    failure_rate: 0.3,
                    ready_after: None,
                },
                rng: seed,
                next_id: 1,
                instances: BTreeMap::new(),
                ledger: Ledger::default(),
            };
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
}
