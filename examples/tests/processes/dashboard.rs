//! The Grafana dashboard in `docs/grafana/operator-fsm.json` against a
//! running operator: the `database` operator runs as a process in sharded
//! mode (one replica, so that it assigns the shards too) against the
//! embedded API server, its Databases run their workflows (some fail on
//! the cloud and are compensated), and its `/metrics` is scraped. Every
//! query of the dashboard must name at least one metric, and only metrics
//! the operator exports (a family it declares, or a sample it serves);
//! the metrics at the heart of the dashboard must have samples.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::soak::{self, Stack, create_up_to, settle};

/// How many Databases run (the soak's names: some are rejected by the
/// cloud, fail and are compensated).
const DATABASES: usize = 9;

fn free_local_addr() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("its address")
        .port();
    format!("127.0.0.1:{port}")
}

/// `GET http://{addr}{path}`'s body, when the answer is a 200.
fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// The names the exposition `text` serves: every sample's name, and for
/// every family its declared type's sample names (a counter's `_total`, a
/// histogram's `_bucket`, `_sum` and `_count`, a gauge's own), whether or
/// not it has samples yet.
fn exported(text: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut declared = BTreeSet::new();
    let mut sampled = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut words = rest.split_whitespace();
            let (Some(name), Some(kind)) = (words.next(), words.next()) else {
                continue;
            };
            match kind {
                "counter" => {
                    declared.insert(format!("{}_total", name.trim_end_matches("_total")));
                }
                "histogram" => {
                    for suffix in ["_bucket", "_sum", "_count"] {
                        declared.insert(format!("{name}{suffix}"));
                    }
                }
                _ => {
                    declared.insert(name.to_owned());
                }
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let name: String = line
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            sampled.insert(name);
        }
    }
    declared.extend(sampled.iter().cloned());
    (declared, sampled)
}

/// Every `expr` in the dashboard, with the title of its panel.
fn queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut stack = vec![(String::new(), dashboard)];
    while let Some((title, value)) = stack.pop() {
        match value {
            Value::Object(map) => {
                let title = map
                    .get("title")
                    .and_then(Value::as_str)
                    .map_or(title, str::to_owned);
                if let Some(Value::String(expr)) = map.get("expr") {
                    found.push((title.clone(), expr.clone()));
                }
                for child in map.values() {
                    stack.push((title.clone(), child));
                }
            }
            Value::Array(items) => {
                for item in items {
                    stack.push((title.clone(), item));
                }
            }
            _ => {}
        }
    }
    found
}

/// The metric names a PromQL expression names: its identifiers that start
/// with the operator's prefix.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut word = String::new();
    for c in expr.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            if word.starts_with("operator_fsm_") {
                names.push(word.clone());
            }
            word.clear();
        }
    }
    names
}

fn dashboard() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/grafana/operator-fsm.json"
    );
    let text = std::fs::read_to_string(path).expect("docs/grafana/operator-fsm.json");
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

#[test]
fn the_queries_and_names_are_read_as_meant() {
    assert_eq!(
        metric_names(
            "histogram_quantile(0.9, sum by (le) (rate(operator_fsm_time_in_state_seconds_bucket{machine=~\"$machine\"}[5m])))"
        ),
        ["operator_fsm_time_in_state_seconds_bucket"]
    );
    let (declared, sampled) = exported(
        "# TYPE operator_fsm_transitions counter\n\
         operator_fsm_transitions_total{machine=\"M\"} 1\n\
         # TYPE operator_fsm_time_in_state_seconds histogram\n\
         # TYPE operator_fsm_objects gauge\n",
    );
    assert!(declared.contains("operator_fsm_transitions_total"));
    assert!(declared.contains("operator_fsm_time_in_state_seconds_count"));
    assert!(declared.contains("operator_fsm_objects"));
    assert!(!declared.contains("operator_fsm_transitions"));
    assert_eq!(sampled.len(), 1);
    let found = queries(&dashboard());
    assert!(found.len() >= 20, "{found:?}");
    let panels = dashboard()["panels"].as_array().map_or(0, Vec::len);
    assert!(panels >= 20, "{panels} panels");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_names_metrics_the_running_operator_exports() {
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    let mut stack = Stack::start("dashboard", 1, 20).await;
    let metrics_addr = free_local_addr();
    let operator = stack.operator(&[
        "--shards",
        "--shard-lease",
        "database-operator-shard-0",
        "--metrics-addr",
        &metrics_addr,
    ]);
    let mut created = 0;
    create_up_to(&stack.client, &mut created, DATABASES).await;
    let records = settle(&stack.client, DATABASES, Duration::from_secs(90)).await;
    let rested = records.iter().filter(|r| r.is_some()).count();

    // The heart of the dashboard has samples once the workflows ran.
    let wanted = [
        "operator_fsm_objects",
        "operator_fsm_transitions_total",
        "operator_fsm_time_in_state_seconds_bucket",
        "operator_fsm_handler_errors_total",
        "operator_fsm_retries_total",
        "operator_fsm_compensations_total",
        "operator_fsm_shard_objects",
        "operator_fsm_shard_ring_member",
        "operator_fsm_shard_assigner_active",
    ];
    let deadline = Instant::now() + Duration::from_secs(60);
    let (declared, sampled) = loop {
        let addr = metrics_addr.clone();
        let body = tokio::task::spawn_blocking(move || http_get(&addr, "/metrics"))
            .await
            .ok()
            .flatten()
            .unwrap_or_default();
        let (declared, sampled) = exported(&body);
        if wanted.iter().all(|w| sampled.contains(*w)) {
            break (declared, sampled);
        }
        assert!(
            Instant::now() < deadline,
            "the operator's /metrics never had samples of all of {wanted:?} \
             ({rested} of {DATABASES} Databases rested); it served:\n{body}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    operator.kill();
    stack.assert_no_panic();
    stack.stop();

    let mut problems = Vec::new();
    for (panel, expr) in queries(&dashboard()) {
        let names = metric_names(&expr);
        if names.is_empty() {
            problems.push(format!("{panel}: `{expr}` names no operator_fsm_ metric"));
        }
        for name in names {
            if !declared.contains(&name) {
                problems.push(format!(
                    "{panel}: `{name}` is not exported (exported: {declared:?})"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    for name in wanted {
        assert!(sampled.contains(name), "{name}");
    }
}
