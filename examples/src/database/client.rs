//! The HTTP client of the cloud API (see [`cloud`](super::cloud)).

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::cloud::{CreateInstance, Credentials, IDEMPOTENCY_KEY, Instance, SeedRequest};

/// Why a call to the cloud API failed.
#[derive(Debug, thiserror::Error)]
pub enum CloudError {
    /// The call did not complete (connection refused, reset); worth
    /// retrying.
    #[error("the cloud API could not be reached")]
    Transport(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The API answered 5xx; worth retrying.
    #[error("the cloud API failed with {status}: {message}")]
    Unavailable {
        /// The HTTP status.
        status: StatusCode,
        /// The API's message.
        message: String,
    },
    /// The API refused the request (4xx); repeating it will not help.
    #[error("the cloud API refused the request with {status}: {message}")]
    Rejected {
        /// The HTTP status.
        status: StatusCode,
        /// The API's message.
        message: String,
    },
    /// The answer was not what the API documents.
    #[error("the cloud API answered something unexpected")]
    Decode(#[source] serde_json::Error),
    /// The request could not be built (an id that cannot go in a URL or a
    /// header); repeating it will not help.
    #[error("the request to the cloud API could not be built")]
    Request(#[source] http::Error),
}

impl CloudError {
    /// Whether repeating the call may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            CloudError::Transport(_) | CloudError::Unavailable { .. }
        )
    }
}

/// A client of one cloud API endpoint.
#[derive(Clone, Debug)]
pub struct CloudClient {
    base: String,
    http: Client<HttpConnector, Full<Bytes>>,
}

impl CloudClient {
    /// A client of the API at `base` (`http://127.0.0.1:PORT`).
    pub fn new(base: impl Into<String>) -> Self {
        CloudClient {
            base: base.into(),
            http: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// The API's base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// `None` on 404.
    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<Option<T>, CloudError> {
        self.call_keyed(method, path, body, None).await
    }

    /// [`call`](Self::call) with an `Idempotency-Key` header when `key` is
    /// given.
    async fn call_keyed<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
        key: Option<&str>,
    ) -> Result<Option<T>, CloudError> {
        let bytes = match body {
            Some(body) => serde_json::to_vec(body).map_err(CloudError::Decode)?,
            None => Vec::new(),
        };
        let mut builder = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("content-type", "application/json");
        if let Some(key) = key {
            builder = builder.header(IDEMPOTENCY_KEY, key);
        }
        let request = builder
            .body(Full::new(Bytes::from(bytes)))
            .map_err(CloudError::Request)?;
        let response = self
            .http
            .request(request)
            .await
            .map_err(|e| CloudError::Transport(Box::new(e)))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| CloudError::Transport(Box::new(e)))?
            .to_bytes();
        if status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            let message = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.get("error")?.as_str().map(str::to_owned))
                .unwrap_or_default();
            return Err(if status.is_server_error() {
                CloudError::Unavailable { status, message }
            } else {
                CloudError::Rejected { status, message }
            });
        }
        if body.is_empty() {
            return serde_json::from_slice(b"null").map_err(CloudError::Decode);
        }
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(CloudError::Decode)
    }

    fn missing(what: &str) -> CloudError {
        CloudError::Rejected {
            status: StatusCode::NOT_FOUND,
            message: format!("{what} not found"),
        }
    }

    /// Creates an instance, sending `request.request_id` as its
    /// `Idempotency-Key`.
    ///
    /// Whether that makes the call idempotent is the service's choice: one
    /// that honours the key answers a repeated create with the instance the
    /// first one made, even a create made at the same time by another
    /// process; one that ignores it (the [`cloud`](super::cloud) default)
    /// creates, and charges for, another instance on each call. Hence the
    /// look-up by request id ([`find_by_request`](Self::find_by_request))
    /// before a retry, in any case.
    ///
    /// # Errors
    /// [`CloudError`]; after an `Unavailable` the instance may exist anyway.
    /// `Rejected` with `422` when the service honours keys and saw this one
    /// with a different body.
    pub async fn create(&self, request: &CreateInstance) -> Result<Instance, CloudError> {
        self.call_keyed(
            Method::POST,
            "/v1/instances",
            Some(request),
            Some(&request.request_id),
        )
        .await?
        .ok_or_else(|| Self::missing("the instances endpoint"))
    }

    /// The instances a create with `request_id` produced.
    ///
    /// # Errors
    /// [`CloudError`].
    pub async fn find_by_request(&self, request_id: &str) -> Result<Vec<Instance>, CloudError> {
        let path = format!("/v1/instances?requestId={request_id}");
        Ok(self
            .call::<(), _>(Method::GET, &path, None)
            .await?
            .unwrap_or_default())
    }

    /// The instance `id`, `None` when it does not exist.
    ///
    /// # Errors
    /// [`CloudError`].
    pub async fn get(&self, id: &str) -> Result<Option<Instance>, CloudError> {
        self.call::<(), _>(Method::GET, &format!("/v1/instances/{id}"), None)
            .await
    }

    /// Deletes the instance `id`; one already gone is fine.
    ///
    /// # Errors
    /// [`CloudError`].
    pub async fn delete(&self, id: &str) -> Result<(), CloudError> {
        self.call::<(), serde_json::Value>(Method::DELETE, &format!("/v1/instances/{id}"), None)
            .await
            .map(|_| ())
    }

    /// Runs `sql` on the instance `id`.
    ///
    /// # Errors
    /// [`CloudError::Rejected`] for SQL the service cannot parse.
    pub async fn seed(&self, id: &str, sql: &str) -> Result<(), CloudError> {
        let body = SeedRequest {
            sql: sql.to_owned(),
        };
        self.call::<_, Instance>(
            Method::POST,
            &format!("/v1/instances/{id}/seed"),
            Some(&body),
        )
        .await?
        .map(|_| ())
        .ok_or_else(|| Self::missing(id))
    }

    /// Issues new credentials for the instance `id`.
    ///
    /// # Errors
    /// [`CloudError`].
    pub async fn credentials(&self, id: &str) -> Result<Credentials, CloudError> {
        self.call::<(), _>(
            Method::POST,
            &format!("/v1/instances/{id}/credentials"),
            None,
        )
        .await?
        .ok_or_else(|| Self::missing(id))
    }
}
