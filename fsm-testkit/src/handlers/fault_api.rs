//! The fault API over HTTP, under `/testkit/faults` (see
//! [`faults`](crate::faults) for what faults do):
//!
//! - `POST /testkit/faults` with a JSON [`FaultSpec`] answers `201 {"id": N}`;
//! - `GET /testkit/faults` lists the faults with their hits;
//! - `DELETE /testkit/faults/N` removes one, `DELETE /testkit/faults` all;
//! - `POST /testkit/faults/drop-watches?resource=widgets` ends open watches
//!   (of every resource without `resource`).
//!
//! Its router is merged in front of the API's, so requests under `/testkit/`
//! are neither faulted nor logged. Refusals are `Status` objects.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::json;
use super::query::query_map;
use crate::faults::{Fault, FaultKind, Faults};
use crate::status::ApiError;

/// A router serving the fault API of `faults` under `/testkit/`.
pub fn router(faults: Faults) -> Router {
    Router::new()
        .route("/testkit/{*path}", any(serve))
        .with_state(faults)
}

/// A fault as the HTTP API reads and writes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultSpec {
    /// `error`, `latency`, `dropWatches` or `gone`.
    pub kind: String,
    /// The code of an `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    /// The message of an `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The delay of a `latency`, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// [`Fault::verb`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verb: Option<String>,
    /// [`Fault::resource`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// [`Fault::namespace`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// [`Fault::name`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// [`Fault::times`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u64>,
    /// [`Fault::probability`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    /// [`Fault::seed`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// [`Fault::after_serving`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_serving: bool,
}

impl FaultSpec {
    /// The fault this spec describes.
    ///
    /// # Errors
    /// A message naming the problem (unknown kind, missing code or delay).
    pub fn to_fault(&self) -> Result<Fault, String> {
        let mut f = match self.kind.as_str() {
            "error" => Fault::error(self.code.ok_or("an error fault needs a code")?),
            "latency" => Fault::latency(Duration::from_millis(
                self.latency_ms.ok_or("a latency fault needs latencyMs")?,
            )),
            "dropWatches" => Fault::drop_watches(),
            "gone" => Fault::gone(),
            other => {
                return Err(format!(
                    "unknown fault kind {other:?}: expected error, latency, dropWatches or gone"
                ));
            }
        };
        if let Some(m) = &self.message {
            f = f.message(m);
        }
        f.verb = self.verb.clone().or(f.verb);
        f.resource.clone_from(&self.resource);
        f.namespace.clone_from(&self.namespace);
        f.name.clone_from(&self.name);
        f.times = self.times;
        f.probability = self.probability.map(|p| p.clamp(0.0, 1.0));
        f.seed = self.seed;
        f.after_serving = self.after_serving;
        Ok(f)
    }

    /// The spec of `fault`.
    #[must_use]
    pub fn of(fault: &Fault) -> Self {
        let mut s = Self {
            verb: fault.verb.clone(),
            resource: fault.resource.clone(),
            namespace: fault.namespace.clone(),
            name: fault.name.clone(),
            times: fault.times,
            probability: fault.probability,
            seed: fault.seed,
            after_serving: fault.after_serving,
            ..Self::default()
        };
        match &fault.kind {
            FaultKind::Error { code, message } => {
                s.kind = "error".into();
                s.code = Some(*code);
                s.message.clone_from(message);
            }
            FaultKind::Latency(d) => {
                s.kind = "latency".into();
                s.latency_ms = Some(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            }
            FaultKind::DropWatches => s.kind = "dropWatches".into(),
            FaultKind::Gone => s.kind = "gone".into(),
        }
        s
    }
}

/// Serves one request of the fault API.
async fn serve(State(faults): State<Faults>, request: Request<Body>) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().trim_end_matches('/');
    let reply = |code: StatusCode, v: Value| json(code, &v);
    let refuse = |code: u16, message: String| {
        ApiError::Other {
            code,
            message,
            subject: None,
        }
        .into_response()
    };
    let method = parts.method.clone();
    match (method.as_str(), path) {
        ("GET", "/testkit/faults") => {
            let items: Vec<Value> = faults
                .list()
                .into_iter()
                .map(|(id, f, hits)| {
                    let mut v = serde_json::to_value(FaultSpec::of(&f)).unwrap_or(Value::Null);
                    v["id"] = json!(id);
                    v["hits"] = json!(hits);
                    v
                })
                .collect();
            reply(StatusCode::OK, json!({"items": items}))
        }
        ("POST", "/testkit/faults") => {
            let bytes = match axum::body::to_bytes(body, 1 << 20).await {
                Ok(b) => b,
                Err(e) => return refuse(400, format!("reading the body: {e}")),
            };
            let spec: FaultSpec = match serde_json::from_slice(&bytes) {
                Ok(s) => s,
                Err(e) => return refuse(400, format!("not a fault: {e}")),
            };
            match spec.to_fault() {
                Ok(f) => {
                    let handle = faults.add(f);
                    reply(StatusCode::CREATED, json!({"id": handle.id()}))
                }
                Err(e) => refuse(400, e),
            }
        }
        ("DELETE", "/testkit/faults") => {
            faults.clear();
            reply(StatusCode::OK, json!({}))
        }
        ("POST", "/testkit/faults/drop-watches") => {
            let resource = query_map(&parts).get("resource").cloned();
            faults.drop_watches(resource.as_deref());
            reply(StatusCode::OK, json!({}))
        }
        ("DELETE", p) => match p
            .strip_prefix("/testkit/faults/")
            .and_then(|id| id.parse::<u64>().ok())
        {
            Some(id) if faults.remove(id) => reply(StatusCode::OK, json!({"id": id})),
            _ => refuse(404, format!("no fault at {p}")),
        },
        _ => refuse(404, format!("nothing served at {method} {path}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_serving_round_trips() {
        let spec: FaultSpec = serde_json::from_value(json!({
            "kind": "error", "code": 504, "verb": "patch", "afterServing": true
        }))
        .unwrap();
        assert_eq!(
            spec.to_fault().unwrap(),
            Fault::error(504).verb("patch").after_serving()
        );
        assert_eq!(FaultSpec::of(&spec.to_fault().unwrap()), spec);
    }

    #[test]
    fn specs_round_trip() {
        let spec: FaultSpec = serde_json::from_value(json!({
            "kind": "error", "code": 503, "verb": "list", "resource": "configmaps", "times": 2
        }))
        .unwrap();
        let fault = spec.to_fault().unwrap();
        assert_eq!(
            fault,
            Fault::error(503)
                .verb("list")
                .resource("configmaps")
                .times(2)
        );
        assert_eq!(FaultSpec::of(&fault), spec);
        assert!(
            FaultSpec {
                kind: "boom".into(),
                ..FaultSpec::default()
            }
            .to_fault()
            .is_err()
        );
    }
}
