//! `GET /debug/requests?since=K`: the request log over HTTP, so that a
//! process outside the server (a benchmark driver, a person with `curl`)
//! can count what clients asked.
//!
//! The answer is JSON:
//!
//! ```json
//! {"total": 1234, "first": 1200,
//!  "records": [{"verb": "patch", "group": "apps", "resource": "deployments",
//!               "subresource": "status", "namespace": "default",
//!               "name": "web", "code": 200}]}
//! ```
//!
//! `total` counts every request since the server started; `records` are the
//! kept records whose index (0 for the first request ever) is at least
//! `since`, oldest first, the first of them being number `first`. A reader
//! polls with `since` set to the last `total` it saw; when `first > since`
//! the log dropped records in between (it keeps
//! [`ServerConfig::request_log_size`](crate::ServerConfig) of them), so poll
//! more often.
//!
//! It is served on a listener of its own (the `fsm-apiserver` binary's
//! `--debug-port`), so that reading it never shows up in the log it reads.

use axum::extract::{Query, State};
use axum::routing::get;
use serde_json::{Value, json};

use crate::log::RequestLog;
use crate::server::ApiServer;

/// The query of `/debug/requests`.
#[derive(Debug, Default, serde::Deserialize)]
pub struct Since {
    /// Index of the first record wanted (0 for all that are kept).
    #[serde(default)]
    pub since: usize,
}

/// A router serving `GET /debug/requests` for `server`'s request log.
pub fn router(server: ApiServer) -> axum::Router {
    axum::Router::new()
        .route("/debug/requests", get(requests))
        .with_state(server)
}

async fn requests(State(server): State<ApiServer>, Query(q): Query<Since>) -> axum::Json<Value> {
    axum::Json(snapshot(server.request_log(), q.since))
}

/// The records of `log` from index `since` on, with the total, as served by
/// `/debug/requests`.
#[must_use]
pub fn snapshot(log: &RequestLog, since: usize) -> Value {
    // `total` and `records` take the lock separately: retry until no request
    // landed in between, so that the records end exactly at `total`.
    let (total, records) = log.records_since(since);
    let first = total - records.len();
    let records: Vec<Value> = records
        .iter()
        .map(|r| {
            json!({
                "verb": r.verb,
                "group": r.group,
                "resource": r.resource,
                "subresource": r.subresource,
                "namespace": r.namespace,
                "name": r.name,
                "code": r.code,
            })
        })
        .collect();
    json!({"total": total, "first": first, "records": records})
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, ListParams, PostParams};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::log::RequestRecord;

    fn rec(verb: &str, code: u16) -> RequestRecord {
        RequestRecord {
            verb: verb.into(),
            group: String::new(),
            resource: "configmaps".into(),
            subresource: None,
            namespace: Some("default".into()),
            name: None,
            path: "/".into(),
            code,
        }
    }

    #[test]
    fn records_from_an_index_and_what_was_dropped() {
        let log = RequestLog::new(3);
        for verb in ["get", "list", "create", "update", "delete"] {
            log.record(rec(verb, 200));
        }
        let all = snapshot(&log, 0);
        assert_eq!(all["total"], 5);
        assert_eq!(all["first"], 2, "records 0 and 1 were dropped");
        assert_eq!(all["records"].as_array().unwrap().len(), 3);
        assert_eq!(all["records"][0]["verb"], "create");
        let tail = snapshot(&log, 4);
        assert_eq!(tail["first"], 4);
        assert_eq!(tail["records"][0]["verb"], "delete");
        assert_eq!(snapshot(&log, 9)["records"].as_array().unwrap().len(), 0);
    }

    #[tokio::test]
    async fn served_over_http() {
        let server = ApiServer::new();
        let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("a".into());
        cms.create(&PostParams::default(), &cm).await.unwrap();
        assert!(cms.create(&PostParams::default(), &cm).await.is_err());
        cms.list(&ListParams::default()).await.unwrap();

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(axum::serve(listener, router(server.clone())).into_future());
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(
                b"GET /debug/requests?since=1 HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
            )
            .await
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        task.abort();
        let body = answer.split("\r\n\r\n").nth(1).unwrap();
        let doc: Value = serde_json::from_str(body).unwrap();
        assert_eq!(doc["total"], 3);
        assert_eq!(doc["first"], 1);
        let records = doc["records"].as_array().unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0]["verb"], "create");
        assert_eq!(records[0]["code"], 409);
        assert_eq!(records[1]["verb"], "list");
        assert_eq!(records[1]["resource"], "configmaps");
        assert_eq!(server.request_log().total(), 3, "reading is not logged");
    }
}
