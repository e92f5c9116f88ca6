//! PodDisruptionBudgets of `policy/v1beta1`, the only version 1.20 serves:
//! the status a new one gets, validation (the cause on `spec` prints Go
//! pointers on 1.20: its message is not compared), a spec that may change,
//! the table kubectl prints.

use integration_tests::{Fallible, Reply, Scene};
use serde_json::{Value, json};

/// A budget named `name` with `spec`.
fn budget(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
           "metadata": {"name": name}, "spec": spec})
}

/// A refusal's code and causes, but the message of a cause on `spec`.
fn refusal(reply: &Reply) -> Value {
    let causes: Vec<Value> = reply.body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            if c["field"] == "spec" {
                json!({"field": c["field"], "reason": c["reason"]})
            } else {
                c.clone()
            }
        })
        .collect();
    json!({"code": reply.code, "reason": reply.body["reason"], "causes": causes})
}

/// A budget's life on `policy/v1beta1`.
pub async fn disruption_budgets_of_policy_v1beta1(s: &mut Scene) -> Fallible {
    let path = format!(
        "/apis/policy/v1beta1/namespaces/{}/poddisruptionbudgets",
        s.ns
    );
    let selector = json!({"matchLabels": {"app": "web"}});
    let created = s
        .post(
            &path,
            budget("web", json!({"minAvailable": 1, "selector": selector})),
        )
        .await?
        .expect(201)?;
    s.record("created", &created);
    let reply = s
        .post(
            &path,
            budget(
                "both",
                json!({"minAvailable": 1, "maxUnavailable": "120%", "selector": selector}),
            ),
        )
        .await?;
    s.record("both bounds", refusal(&reply));
    let reply = s
        .post(
            &path,
            budget(
                "negative",
                json!({"minAvailable": -1, "selector": selector}),
            ),
        )
        .await?;
    s.record("negative", refusal(&reply));
    let updated = s
        .merge(
            &format!("{path}/web"),
            json!({"spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "db"}}}}),
        )
        .await?
        .expect(200)?;
    s.record("updated", &updated);
    let table = s.get_table(&path).await?.expect(200)?;
    // Names and types (the embedded server words descriptions shorter).
    let columns: Vec<Value> = table.body["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!([c["name"], c["type"], c["format"]]))
        .collect();
    s.record("table columns", columns);
    let cells: Vec<Value> = table.body["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            json!(
                r["cells"]
                    .as_array()
                    .map(|c| c[..c.len().saturating_sub(1)].to_vec())
            )
        })
        .collect();
    s.record("table cells but age", cells);
    Ok(())
}
