//! Whether a live dependent is ready: built-in rules for common kinds, a
//! `Ready` condition, or mere existence; all pure functions of the object.
//!
//! | kind | ready when |
//! |------|------------|
//! | `apps` Deployment | rolled out for its generation: `observedGeneration` ≥ `generation`, and `updatedReplicas`, `readyReplicas` and `availableReplicas` reach `spec.replicas` (default 1) |
//! | `apps` StatefulSet | `observedGeneration` ≥ `generation`, `updatedReplicas` and `readyReplicas` reach `spec.replicas` (default 1) |
//! | `apps` DaemonSet | `observedGeneration` ≥ `generation`, `updatedNumberScheduled` and `numberAvailable` reach `desiredNumberScheduled` |
//! | `batch` Job | a `Complete` condition is `True`; a `Failed` condition `True` makes the dependent **failed** |
//! | PersistentVolumeClaim | `status.phase` is `Bound` |
//! | Pod | the `Ready` condition is `True`; phase `Failed` makes it failed |
//! | Service | exists; of `type: LoadBalancer`, once `status.loadBalancer.ingress` has an entry |
//! | anything with a `Ready` condition | that condition is `True` |
//! | anything else | exists |

use serde_json::Value;

/// What a readiness check says about a live dependent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Ready: what depends on it may go ahead.
    Ready,
    /// Not ready yet, and why (shown in the `DependentsReady` condition).
    Pending(String),
    /// It will not become ready by waiting (a failed Job): the dependent
    /// is failed, with this message.
    Failed(String),
}

impl Readiness {
    /// `Pending` with `why`.
    pub fn pending(why: impl Into<String>) -> Self {
        Readiness::Pending(why.into())
    }

    /// Whether it is [`Readiness::Ready`].
    pub fn is_ready(&self) -> bool {
        matches!(self, Readiness::Ready)
    }
}

impl From<bool> for Readiness {
    /// `true` is ready; `false` is pending ("not ready yet").
    fn from(ready: bool) -> Self {
        if ready {
            Readiness::Ready
        } else {
            Readiness::pending("not ready yet")
        }
    }
}

/// The built-in readiness of `live`, an object of API group `group` (""
/// for the core group) and kind `kind` (see the module's table).
///
/// ```
/// use fsm_kube::dependents::{Readiness, builtin_readiness};
/// use serde_json::json;
///
/// let claim = json!({"status": {"phase": "Bound"}});
/// assert_eq!(builtin_readiness("", "PersistentVolumeClaim", &claim), Readiness::Ready);
/// let job = json!({"status": {"conditions": [{"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}]}});
/// assert!(matches!(builtin_readiness("batch", "Job", &job), Readiness::Failed(_)));
/// ```
pub fn builtin_readiness(group: &str, kind: &str, live: &Value) -> Readiness {
    match (group, kind) {
        ("apps", "Deployment") => deployment(live),
        ("apps", "StatefulSet") => stateful_set(live),
        ("apps", "DaemonSet") => daemon_set(live),
        ("batch", "Job") => job(live),
        ("", "PersistentVolumeClaim") => claim(live),
        ("", "Pod") => pod(live),
        ("", "Service") => service(live),
        _ => match condition(live, "Ready") {
            Some(("True", _)) | None => Readiness::Ready,
            Some((status, message)) => {
                Readiness::pending(format!("condition Ready is {status}{}", suffix(message)))
            }
        },
    }
}

/// The fields of a live object the built-in rules below read (its
/// `metadata.generation`, `spec.replicas`, `spec.type` and `status`), from
/// its body (everything but `metadata`) and its generation: what a caller
/// holding the parts of an object passes to [`builtin_readiness`] instead
/// of a copy of the whole. A rule that reads another field adds it here.
pub(crate) fn readiness_view(body: &Value, generation: Option<i64>) -> Value {
    let mut spec = serde_json::Map::new();
    for field in ["replicas", "type"] {
        if let Some(value) = body.get("spec").and_then(|s| s.get(field)) {
            spec.insert(field.to_owned(), value.clone());
        }
    }
    let mut view = serde_json::Map::new();
    let mut metadata = serde_json::Map::new();
    if let Some(generation) = generation {
        metadata.insert("generation".to_owned(), generation.into());
    }
    view.insert("metadata".to_owned(), Value::Object(metadata));
    view.insert("spec".to_owned(), Value::Object(spec));
    if let Some(status) = body.get("status") {
        view.insert("status".to_owned(), status.clone());
    }
    Value::Object(view)
}

fn int(value: &Value, path: &[&str]) -> Option<i64> {
    path.iter()
        .try_fold(value, |v, key| v.get(key))
        .and_then(Value::as_i64)
}

fn str_at<'v>(value: &'v Value, path: &[&str]) -> Option<&'v str> {
    path.iter()
        .try_fold(value, |v, key| v.get(key))
        .and_then(Value::as_str)
}

/// The `status` and `message` of condition `type_`, if present.
fn condition<'v>(live: &'v Value, type_: &str) -> Option<(&'v str, &'v str)> {
    live.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        .map(|c| {
            (
                c.get("status").and_then(Value::as_str).unwrap_or("Unknown"),
                c.get("message").and_then(Value::as_str).unwrap_or(""),
            )
        })
}

fn suffix(message: &str) -> String {
    if message.is_empty() {
        String::new()
    } else {
        format!(": {message}")
    }
}

/// The controller has not seen the latest spec yet.
fn stale_generation(live: &Value) -> Option<Readiness> {
    let generation = int(live, &["metadata", "generation"]).unwrap_or(0);
    let observed = int(live, &["status", "observedGeneration"]).unwrap_or(0);
    (observed < generation).then(|| {
        Readiness::pending(format!(
            "generation {generation} not observed yet (observed {observed})"
        ))
    })
}

fn counts(live: &Value, wanted: i64, fields: &[&str]) -> Readiness {
    for field in fields {
        let have = int(live, &["status", field]).unwrap_or(0);
        if have < wanted {
            return Readiness::pending(format!("{field} {have}/{wanted}"));
        }
    }
    Readiness::Ready
}

fn deployment(live: &Value) -> Readiness {
    if let Some(stale) = stale_generation(live) {
        return stale;
    }
    if let Some(message) = progress_deadline_exceeded(live) {
        return Readiness::Failed(format!("rollout stalled{}", suffix(message)));
    }
    let wanted = int(live, &["spec", "replicas"]).unwrap_or(1);
    counts(
        live,
        wanted,
        &["updatedReplicas", "readyReplicas", "availableReplicas"],
    )
}

/// The message of a Deployment's `Progressing` condition with reason
/// `ProgressDeadlineExceeded`: the rollout will not finish by waiting.
fn progress_deadline_exceeded(live: &Value) -> Option<&str> {
    live.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| {
            c.get("type").and_then(Value::as_str) == Some("Progressing")
                && c.get("reason").and_then(Value::as_str) == Some("ProgressDeadlineExceeded")
        })
        .map(|c| c.get("message").and_then(Value::as_str).unwrap_or(""))
}

fn stateful_set(live: &Value) -> Readiness {
    if let Some(stale) = stale_generation(live) {
        return stale;
    }
    let wanted = int(live, &["spec", "replicas"]).unwrap_or(1);
    counts(live, wanted, &["updatedReplicas", "readyReplicas"])
}

fn daemon_set(live: &Value) -> Readiness {
    if let Some(stale) = stale_generation(live) {
        return stale;
    }
    let wanted = int(live, &["status", "desiredNumberScheduled"]).unwrap_or(0);
    counts(live, wanted, &["updatedNumberScheduled", "numberAvailable"])
}

fn job(live: &Value) -> Readiness {
    if let Some(("True", message)) = condition(live, "Failed") {
        return Readiness::Failed(format!("the Job failed{}", suffix(message)));
    }
    match condition(live, "Complete") {
        Some(("True", _)) => Readiness::Ready,
        _ => Readiness::pending("the Job has not completed"),
    }
}

fn claim(live: &Value) -> Readiness {
    match str_at(live, &["status", "phase"]) {
        Some("Bound") => Readiness::Ready,
        Some(phase) => Readiness::pending(format!("phase {phase}")),
        None => Readiness::pending("not bound yet"),
    }
}

fn pod(live: &Value) -> Readiness {
    if str_at(live, &["status", "phase"]) == Some("Failed") {
        let message = str_at(live, &["status", "message"]).unwrap_or("");
        return Readiness::Failed(format!("the Pod failed{}", suffix(message)));
    }
    match condition(live, "Ready") {
        Some(("True", _)) => Readiness::Ready,
        Some((_, message)) => Readiness::pending(format!("not ready{}", suffix(message))),
        None => Readiness::pending("not ready"),
    }
}

fn service(live: &Value) -> Readiness {
    if str_at(live, &["spec", "type"]) != Some("LoadBalancer") {
        return Readiness::Ready;
    }
    let has_ingress = live
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .is_some_and(|i| !i.is_empty());
    if has_ingress {
        Readiness::Ready
    } else {
        Readiness::pending("the load balancer has no ingress yet")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_readiness_view_reads_as_the_whole_object() {
        let objects = [
            (
                "apps",
                "Deployment",
                json!({"metadata": {"generation": 2, "name": "d"},
                "spec": {"replicas": 3, "template": {"spec": {"containers": []}}},
                "status": {"observedGeneration": 2, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3, "replicas": 3}}),
            ),
            (
                "apps",
                "Deployment",
                json!({"metadata": {"generation": 3},
                "spec": {"replicas": 3}, "status": {"observedGeneration": 2}}),
            ),
            (
                "apps",
                "Deployment",
                json!({"metadata": {"generation": 1}, "spec": {},
                "status": {"observedGeneration": 1, "conditions": [{"type": "Progressing",
                "status": "False", "reason": "ProgressDeadlineExceeded", "message": "stuck"}]}}),
            ),
            (
                "apps",
                "StatefulSet",
                json!({"metadata": {"generation": 1}, "spec": {"replicas": 2},
                "status": {"observedGeneration": 1, "updatedReplicas": 2, "readyReplicas": 1}}),
            ),
            (
                "apps",
                "DaemonSet",
                json!({"metadata": {"generation": 1},
                "status": {"observedGeneration": 1, "desiredNumberScheduled": 2,
                "updatedNumberScheduled": 2, "numberAvailable": 2}}),
            ),
            (
                "batch",
                "Job",
                json!({"status": {"conditions": [{"type": "Failed", "status": "True", "message": "backoff"}]}}),
            ),
            (
                "",
                "PersistentVolumeClaim",
                json!({"status": {"phase": "Bound"}}),
            ),
            (
                "",
                "Pod",
                json!({"status": {"phase": "Failed", "message": "oom"}}),
            ),
            (
                "",
                "Service",
                json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {}}}),
            ),
            (
                "",
                "Service",
                json!({"spec": {"type": "ClusterIP", "clusterIP": "10.0.0.1"}}),
            ),
            (
                "example.com",
                "Widget",
                json!({"status": {"conditions": [{"type": "Ready", "status": "False", "message": "no"}]}}),
            ),
        ];
        for (group, kind, live) in objects {
            let mut body = live.clone();
            let generation = body
                .as_object_mut()
                .and_then(|b| b.remove("metadata"))
                .and_then(|m| m.get("generation").and_then(Value::as_i64));
            assert_eq!(
                builtin_readiness(group, kind, &readiness_view(&body, generation)),
                builtin_readiness(group, kind, &live),
                "{kind} {live}"
            );
        }
    }

    fn deploy(
        generation: i64,
        observed: i64,
        replicas: i64,
        updated: i64,
        ready: i64,
        available: i64,
    ) -> Value {
        json!({
            "metadata": {"generation": generation},
            "spec": {"replicas": replicas},
            "status": {
                "observedGeneration": observed,
                "updatedReplicas": updated,
                "readyReplicas": ready,
                "availableReplicas": available,
            }
        })
    }

    #[test]
    fn a_deployment_is_ready_once_rolled_out_for_its_generation() {
        assert_eq!(
            builtin_readiness("apps", "Deployment", &deploy(2, 2, 3, 3, 3, 3)),
            Readiness::Ready
        );
        assert!(matches!(
            builtin_readiness("apps", "Deployment", &deploy(2, 1, 3, 3, 3, 3)),
            Readiness::Pending(why) if why.contains("generation 2")
        ));
        assert!(matches!(
            builtin_readiness("apps", "Deployment", &deploy(2, 2, 3, 3, 2, 2)),
            Readiness::Pending(why) if why == "readyReplicas 2/3"
        ));
        assert!(
            !builtin_readiness(
                "apps",
                "Deployment",
                &json!({"metadata": {"generation": 1}})
            )
            .is_ready()
        );
    }

    #[test]
    fn a_deployment_past_its_progress_deadline_fails() {
        let mut live = deploy(1, 1, 1, 0, 0, 0);
        live["status"]["conditions"] = json!([{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "too slow"}]);
        assert!(
            matches!(builtin_readiness("apps", "Deployment", &live), Readiness::Failed(m) if m.contains("too slow"))
        );
    }

    #[test]
    fn stateful_and_daemon_sets_count_their_replicas() {
        let sts = json!({"metadata": {"generation": 1}, "spec": {"replicas": 2},
            "status": {"observedGeneration": 1, "updatedReplicas": 2, "readyReplicas": 1}});
        assert!(!builtin_readiness("apps", "StatefulSet", &sts).is_ready());
        let ds = json!({"metadata": {"generation": 1},
            "status": {"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2}});
        assert!(builtin_readiness("apps", "DaemonSet", &ds).is_ready());
    }

    #[test]
    fn a_job_is_ready_when_complete_and_failed_when_failed() {
        let complete = json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}});
        assert!(builtin_readiness("batch", "Job", &complete).is_ready());
        assert!(!builtin_readiness("batch", "Job", &json!({})).is_ready());
        let failed = json!({"status": {"conditions": [{"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}]}});
        assert_eq!(
            builtin_readiness("batch", "Job", &failed),
            Readiness::Failed("the Job failed: BackoffLimitExceeded".into())
        );
    }

    #[test]
    fn claims_pods_and_services() {
        assert!(
            !builtin_readiness(
                "",
                "PersistentVolumeClaim",
                &json!({"status": {"phase": "Pending"}})
            )
            .is_ready()
        );
        let pod = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert!(builtin_readiness("", "Pod", &pod).is_ready());
        assert!(matches!(
            builtin_readiness("", "Pod", &json!({"status": {"phase": "Failed"}})),
            Readiness::Failed(_)
        ));
        assert!(
            builtin_readiness("", "Service", &json!({"spec": {"type": "ClusterIP"}})).is_ready()
        );
        let lb = json!({"spec": {"type": "LoadBalancer"}});
        assert!(!builtin_readiness("", "Service", &lb).is_ready());
        let lb = json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}});
        assert!(builtin_readiness("", "Service", &lb).is_ready());
    }

    #[test]
    fn other_kinds_use_a_ready_condition_or_exist() {
        assert!(builtin_readiness("", "ConfigMap", &json!({"data": {}})).is_ready());
        let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "False", "message": "syncing"}]}});
        assert_eq!(
            builtin_readiness("example.com", "Database", &not_ready),
            Readiness::Pending("condition Ready is False: syncing".into())
        );
    }

    #[test]
    fn a_bool_is_a_readiness() {
        assert_eq!(Readiness::from(true), Readiness::Ready);
        assert!(!Readiness::from(false).is_ready());
    }
}
