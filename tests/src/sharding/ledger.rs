//! The ledger the harness owns: an HTTP server in the harness process that
//! records every handler's start and end (object, state, replica, time)
//! and every charge (the workload's non-idempotent call), and the client
//! the operator's handlers call it with.
//!
//! A charge carries a request id. A second charge with an id already seen
//! is answered as the first (the id is an idempotency key) and counted as
//! a *repeat*; a charge with a new id for an object already charged is a
//! *second distinct call*, which the proof forbids.
//!
//! | request | body | answer |
//! | --- | --- | --- |
//! | `POST /reports` | [`Report`] | 204 |
//! | `POST /charges` | [`ChargeRequest`] | 200 |
//! | `GET /charges/{request id}` | | 200 if charged, 404 if not |

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::{Deserialize, Serialize};

/// Microseconds since the Unix epoch, by this machine's wall clock (all
/// processes of a run share it).
#[must_use]
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// Which end of a handler a report marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// The handler started.
    Begin,
    /// The handler finished its work (and returns its transition).
    End,
    /// The handler's future was dropped before it finished (its
    /// controller stopped).
    Cancelled,
}

/// One handler's start or end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Start or end.
    pub event: Event,
    /// The object's name.
    pub object: String,
    /// The state whose handler runs.
    pub state: String,
    /// The replica it runs in.
    pub replica: String,
    /// When, in microseconds since the epoch.
    pub at_us: i64,
}

/// A charge: the non-idempotent call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChargeRequest {
    /// The object charged for.
    pub object: String,
    /// The request id the handler committed before calling.
    pub request_id: String,
    /// The replica calling.
    pub replica: String,
}

/// A recorded charge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Charge {
    /// The call.
    pub request: ChargeRequest,
    /// When it arrived, in microseconds since the epoch.
    pub at_us: i64,
}

/// Everything the ledger recorded.
#[derive(Clone, Debug, Default)]
pub struct Records {
    /// The handlers' reports, in arrival order.
    pub reports: Vec<Report>,
    /// The first charge of each request id.
    pub charges: BTreeMap<String, Charge>,
    /// Charges repeated with an id already charged (answered as the first).
    pub repeats: Vec<Charge>,
}

impl Records {
    /// The distinct request ids charged per object.
    #[must_use]
    pub fn charges_per_object(&self) -> BTreeMap<String, Vec<String>> {
        let mut per_object = BTreeMap::<String, Vec<String>>::new();
        for (id, charge) in &self.charges {
            per_object
                .entry(charge.request.object.clone())
                .or_default()
                .push(id.clone());
        }
        per_object
    }
}

/// The ledger's shared records; the harness reads them in-process.
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    records: Arc<Mutex<Records>>,
}

impl Ledger {
    /// A copy of everything recorded so far.
    #[must_use]
    pub fn snapshot(&self) -> Records {
        self.lock().clone()
    }

    /// How many `End` reports arrived so far.
    #[must_use]
    pub fn ends(&self) -> usize {
        self.lock()
            .reports
            .iter()
            .filter(|r| r.event == Event::End)
            .count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Records> {
        // A panic while holding the lock leaves whole records behind.
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Serves the ledger on a free loopback port until the returned task
    /// is aborted; its base URL.
    ///
    /// # Errors
    /// The listener could not be bound.
    pub async fn serve(&self) -> std::io::Result<(String, tokio::task::JoinHandle<()>)> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let url = format!("http://{}", listener.local_addr()?);
        let router = axum::Router::new()
            .route("/reports", post(report))
            .route("/charges", post(charge))
            .route("/charges/{id}", get(find))
            .with_state(self.clone());
        let task = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, router).await {
                tracing::error!(%error, "the ledger stopped");
            }
        });
        Ok((url, task))
    }
}

async fn report(State(ledger): State<Ledger>, Json(report): Json<Report>) -> StatusCode {
    ledger.lock().reports.push(report);
    StatusCode::NO_CONTENT
}

async fn charge(State(ledger): State<Ledger>, Json(request): Json<ChargeRequest>) -> StatusCode {
    let charge = Charge {
        request,
        at_us: now_us(),
    };
    let mut records = ledger.lock();
    if records.charges.contains_key(&charge.request.request_id) {
        records.repeats.push(charge);
    } else {
        records
            .charges
            .insert(charge.request.request_id.clone(), charge);
    }
    StatusCode::OK
}

async fn find(State(ledger): State<Ledger>, Path(id): Path<String>) -> StatusCode {
    if ledger.lock().charges.contains_key(&id) {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    }
}

/// Why a ledger call failed; the handler's step is retried.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The request could not be built.
    #[error("the ledger request could not be built")]
    Request(#[source] http::Error),
    /// The body could not be encoded.
    #[error("the ledger request could not be encoded")]
    Encode(#[source] serde_json::Error),
    /// The ledger could not be reached.
    #[error("the ledger could not be reached")]
    Transport(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The ledger answered an unexpected status.
    #[error("the ledger answered {0}")]
    Status(StatusCode),
}

/// The handlers' client of the ledger (pooled connections).
#[derive(Clone, Debug)]
pub struct LedgerClient {
    base: String,
    http: Client<HttpConnector, Full<Bytes>>,
}

impl LedgerClient {
    /// A client of the ledger at `base` (`http://127.0.0.1:PORT`).
    #[must_use]
    pub fn new(base: impl Into<String>) -> Self {
        LedgerClient {
            base: base.into().trim_end_matches('/').to_owned(),
            http: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// Reports a handler's start or end, timed now.
    ///
    /// # Errors
    /// [`LedgerError`].
    pub async fn report(
        &self,
        event: Event,
        object: &str,
        state: &str,
        replica: &str,
    ) -> Result<(), LedgerError> {
        self.report_at(event, object, state, replica, now_us())
            .await
    }

    /// Reports a handler's start or end, timed `at_us`.
    ///
    /// # Errors
    /// [`LedgerError`].
    pub async fn report_at(
        &self,
        event: Event,
        object: &str,
        state: &str,
        replica: &str,
        at_us: i64,
    ) -> Result<(), LedgerError> {
        let report = Report {
            event,
            object: object.to_owned(),
            state: state.to_owned(),
            replica: replica.to_owned(),
            at_us,
        };
        self.call(http::Method::POST, "/reports", Some(&report))
            .await
            .and_then(expect(StatusCode::NO_CONTENT))
    }

    /// Charges for `object` under `request_id`.
    ///
    /// # Errors
    /// [`LedgerError`].
    pub async fn charge(
        &self,
        object: &str,
        request_id: &str,
        replica: &str,
    ) -> Result<(), LedgerError> {
        let request = ChargeRequest {
            object: object.to_owned(),
            request_id: request_id.to_owned(),
            replica: replica.to_owned(),
        };
        self.call(http::Method::POST, "/charges", Some(&request))
            .await
            .and_then(expect(StatusCode::OK))
    }

    /// Whether a charge with `request_id` was made.
    ///
    /// # Errors
    /// [`LedgerError`].
    pub async fn find_charge(&self, request_id: &str) -> Result<bool, LedgerError> {
        let path = format!("/charges/{request_id}");
        match self.call::<()>(http::Method::GET, &path, None).await? {
            StatusCode::OK => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            other => Err(LedgerError::Status(other)),
        }
    }

    async fn call<B: Serialize>(
        &self,
        method: http::Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<StatusCode, LedgerError> {
        let body = match body {
            Some(body) => Bytes::from(serde_json::to_vec(body).map_err(LedgerError::Encode)?),
            None => Bytes::new(),
        };
        let request = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(body))
            .map_err(LedgerError::Request)?;
        let response = self
            .http
            .request(request)
            .await
            .map_err(|e| LedgerError::Transport(Box::new(e)))?;
        let status = response.status();
        // Read the body so the connection goes back to the pool.
        response
            .into_body()
            .collect()
            .await
            .map_err(|e| LedgerError::Transport(Box::new(e)))?;
        Ok(status)
    }
}

fn expect(wanted: StatusCode) -> impl FnOnce(StatusCode) -> Result<(), LedgerError> {
    move |got| {
        if got == wanted {
            Ok(())
        } else {
            Err(LedgerError::Status(got))
        }
    }
}
