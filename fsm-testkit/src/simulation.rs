//! Simulated workload controllers (off by default): Deployments and
//! StatefulSets become ready, Jobs succeed or fail, after a delay, by
//! writing their `status` as kube-controller-manager would.
//!
//! Started with [`ApiServer::simulate`](crate::ApiServer::simulate). The
//! simulation follows the store's change stream; each write goes through
//! the same rules as a client's (the status subresource, `resourceVersion`,
//! watch events) but is neither logged nor subject to faults.
//!
//! - **Deployment** / **StatefulSet**: on each new `generation` the status
//!   first says the rollout is progressing (`observedGeneration`,
//!   `updatedReplicas: 0`, condition `Progressing`), then, after
//!   [`SimulationConfig::rollout_delay`], that every replica is updated,
//!   ready and available (conditions `Available` and `Progressing`
//!   `NewReplicaSetAvailable` for a Deployment; `currentRevision` =
//!   `updateRevision` for a StatefulSet).
//! - **Job**: at once `startTime` and `active: 1`; after
//!   [`SimulationConfig::job_duration`] it succeeds (`succeeded`,
//!   `completionTime`, conditions `SuccessCriteriaMet` and `Complete`) or
//!   fails (`failed`, conditions `FailureTarget` and `Failed`,
//!   `BackoffLimitExceeded`), or never finishes. The outcome is the Job's
//!   label [`OUTCOME_LABEL`] (`succeed`, `fail`, `hang`) if it has one, else
//!   the first [`JobRule`] matching its name that has uses left, else
//!   success.
//!
//! # Expected flow
//! ```no_run
//! # async fn demo() {
//! use std::time::Duration;
//! use fsm_testkit::ApiServer;
//! use fsm_testkit::simulation::{JobOutcome, JobRule, SimulationConfig};
//!
//! let server = ApiServer::new();
//! let sim = server.simulate(SimulationConfig {
//!     rollout_delay: Duration::from_millis(200),
//!     job_duration: Duration::from_millis(300),
//!     job_rules: vec![JobRule::new("migrate-", JobOutcome::Fail).times(1)],
//! });
//! sim.add_job_rule(JobRule::new("stuck-", JobOutcome::Hang));
//! # }
//! ```
//!
//! # Caveats
//! No Pods or ReplicaSets are created; `replicas` of a Deployment with
//! `paused: true` roll out anyway; a Job's `parallelism` is ignored.
//! Needs a Tokio runtime.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use crate::cluster::Part;
use crate::resources::GroupResource;
use crate::state::Shared;
use crate::time::timestamp;

/// The label that decides a Job's outcome: `succeed`, `fail` or `hang`.
pub const OUTCOME_LABEL: &str = "fsm-testkit.io/job-outcome";

/// What happens to a simulated Job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOutcome {
    /// It completes.
    Succeed,
    /// It fails (`BackoffLimitExceeded`).
    Fail,
    /// It never finishes.
    Hang,
}

/// Decides the outcome of the Jobs whose name starts with a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRule {
    /// The prefix of the Jobs' names ("" matches every Job).
    pub name_prefix: String,
    /// What happens to them.
    pub outcome: JobOutcome,
    /// How many Jobs it applies to; every one when `None`.
    pub times: Option<u32>,
}

impl JobRule {
    /// A rule for every Job whose name starts with `name_prefix`.
    #[must_use]
    pub fn new(name_prefix: &str, outcome: JobOutcome) -> Self {
        Self {
            name_prefix: name_prefix.into(),
            outcome,
            times: None,
        }
    }

    /// Applies to the first `n` matching Jobs only.
    #[must_use]
    pub fn times(mut self, n: u32) -> Self {
        self.times = Some(n);
        self
    }
}

/// How the simulated controllers behave.
#[derive(Debug, Clone)]
pub struct SimulationConfig {
    /// How long a Deployment or StatefulSet takes to roll out a generation.
    pub rollout_delay: Duration,
    /// How long a Job runs.
    pub job_duration: Duration,
    /// Jobs that do not simply succeed (the label [`OUTCOME_LABEL`] wins).
    pub job_rules: Vec<JobRule>,
}

impl Default for SimulationConfig {
    /// Rollouts take 1 s, Jobs 1.5 s, and every Job succeeds.
    fn default() -> Self {
        Self {
            rollout_delay: Duration::from_millis(1_000),
            job_duration: Duration::from_millis(1_500),
            job_rules: Vec::new(),
        }
    }
}

#[derive(Debug)]
struct State {
    config: SimulationConfig,
    /// Uses of each rule so far.
    used: Vec<u32>,
    /// (uid, generation) of rollouts and uids of Jobs already handled.
    seen: HashSet<(String, i64)>,
}

impl State {
    fn outcome(&mut self, job: &Value) -> JobOutcome {
        match job["metadata"]["labels"][OUTCOME_LABEL].as_str() {
            Some("fail") => return JobOutcome::Fail,
            Some("hang") => return JobOutcome::Hang,
            Some("succeed") => return JobOutcome::Succeed,
            _ => {}
        }
        let name = job["metadata"]["name"].as_str().unwrap_or_default();
        for (i, rule) in self.config.job_rules.iter().enumerate() {
            let used = self.used.get(i).copied().unwrap_or(0);
            if name.starts_with(&rule.name_prefix) && rule.times.is_none_or(|t| used < t) {
                if let Some(u) = self.used.get_mut(i) {
                    *u += 1;
                }
                return rule.outcome;
            }
        }
        JobOutcome::Succeed
    }
}

/// A running simulation. Dropping the handle does not stop it (it ends
/// with the server); [`Simulation::stop`] does.
#[derive(Debug, Clone)]
pub struct Simulation {
    state: Arc<Mutex<State>>,
    task: Arc<JoinHandle<()>>,
}

impl Simulation {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a rule for Jobs created from now on (after the configured ones).
    pub fn add_job_rule(&self, rule: JobRule) {
        let mut s = self.lock();
        s.config.job_rules.push(rule);
        s.used.push(0);
    }

    /// Changes the rollout delay of generations seen from now on.
    pub fn set_rollout_delay(&self, delay: Duration) {
        self.lock().config.rollout_delay = delay;
    }

    /// Changes the duration of Jobs seen from now on.
    pub fn set_job_duration(&self, duration: Duration) {
        self.lock().config.job_duration = duration;
    }

    /// Stops simulating (pending completions are not written).
    pub fn stop(&self) {
        self.task.abort();
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Deployment,
    StatefulSet,
    Job,
}

fn kind_of(gr: &GroupResource) -> Option<Kind> {
    match (gr.group.as_str(), gr.resource.as_str()) {
        ("apps", "deployments") => Some(Kind::Deployment),
        ("apps", "statefulsets") => Some(Kind::StatefulSet),
        ("batch", "jobs") => Some(Kind::Job),
        _ => None,
    }
}

fn gr(kind: Kind) -> GroupResource {
    let (group, resource) = match kind {
        Kind::Deployment => ("apps", "deployments"),
        Kind::StatefulSet => ("apps", "statefulsets"),
        Kind::Job => ("batch", "jobs"),
    };
    GroupResource {
        group: group.into(),
        resource: resource.into(),
    }
}

/// Starts simulating on `shared`'s cluster.
pub(crate) fn start(shared: &Arc<Shared>, config: SimulationConfig) -> Simulation {
    let used = vec![0; config.job_rules.len()];
    let state = Arc::new(Mutex::new(State {
        config,
        used,
        seen: HashSet::new(),
    }));
    let weak = Arc::downgrade(shared);
    let (mut rx, existing) = {
        let cluster = shared.cluster();
        let existing: Vec<(Kind, Arc<Value>)> = [Kind::Deployment, Kind::StatefulSet, Kind::Job]
            .into_iter()
            .flat_map(|k| {
                cluster
                    .store
                    .list(&gr(k), None)
                    .into_iter()
                    .map(move |o| (k, o))
            })
            .collect();
        (cluster.store.subscribe(), existing)
    };
    let task_state = state.clone();
    let task = tokio::spawn(async move {
        for (kind, object) in existing {
            observe(&weak, &task_state, kind, &object);
        }
        loop {
            match rx.recv().await {
                Ok(e) => {
                    if e.kind != crate::store::EventType::Deleted
                        && let Some(kind) = kind_of(&e.resource)
                    {
                        observe(&weak, &task_state, kind, &e.object);
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    let Some(shared) = weak.upgrade() else { return };
                    let all: Vec<(Kind, Arc<Value>)> = {
                        let cluster = shared.cluster();
                        [Kind::Deployment, Kind::StatefulSet, Kind::Job]
                            .into_iter()
                            .flat_map(|k| {
                                cluster
                                    .store
                                    .list(&gr(k), None)
                                    .into_iter()
                                    .map(move |o| (k, o))
                            })
                            .collect()
                    };
                    for (kind, object) in all {
                        observe(&weak, &task_state, kind, &object);
                    }
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
    Simulation {
        state,
        task: Arc::new(task),
    }
}

fn uid(o: &Value) -> String {
    o["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn replicas(o: &Value) -> i64 {
    o["spec"]["replicas"].as_i64().unwrap_or(1)
}

/// Reacts to the current state of a workload.
fn observe(shared: &Weak<Shared>, state: &Arc<Mutex<State>>, kind: Kind, object: &Value) {
    if object["metadata"].get("deletionTimestamp").is_some() {
        return;
    }
    let generation = object["metadata"]["generation"].as_i64().unwrap_or(1);
    let status = &object["status"];
    let (delay, first, last) = {
        let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
        match kind {
            Kind::Job => {
                let finished = status["succeeded"].as_i64().unwrap_or(0) > 0
                    || status["failed"].as_i64().unwrap_or(0) > 0;
                if finished || !s.seen.insert((uid(object), 0)) {
                    return;
                }
                let outcome = s.outcome(object);
                let now = timestamp(jiff::Timestamp::now());
                let started = json!({"startTime": now, "active": 1, "ready": 0});
                let last = match outcome {
                    JobOutcome::Hang => None,
                    JobOutcome::Succeed => Some(Box::new(move |o: &Value| job_succeeded(o))
                        as Box<dyn FnOnce(&Value) -> Value + Send>),
                    JobOutcome::Fail => Some(Box::new(move |o: &Value| job_failed(o))
                        as Box<dyn FnOnce(&Value) -> Value + Send>),
                };
                (s.config.job_duration, Some(started), last)
            }
            Kind::Deployment | Kind::StatefulSet => {
                let want = replicas(object);
                let done = status["observedGeneration"].as_i64() == Some(generation)
                    && status["readyReplicas"].as_i64().unwrap_or(0) == want
                    && status["updatedReplicas"].as_i64().unwrap_or(0) == want;
                if done || !s.seen.insert((uid(object), generation)) {
                    return;
                }
                let delay = s.config.rollout_delay;
                let first = (!delay.is_zero()).then(|| rolling(kind, object));
                let last: Box<dyn FnOnce(&Value) -> Value + Send> =
                    Box::new(move |o: &Value| rolled_out(kind, o));
                (delay, first, Some(last))
            }
        }
    };
    let (ns, name) = (
        object["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    );
    let (object_uid, generation) = (uid(object), if kind == Kind::Job { 0 } else { generation });
    if let Some(first) = first {
        write_status(shared, kind, &ns, &name, &object_uid, generation, |_| first);
    }
    let Some(last) = last else { return };
    let shared = shared.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        write_status(&shared, kind, &ns, &name, &object_uid, generation, last);
    });
}

/// Writes the status `f` computes from the stored object, if it is still
/// the same object (uid) at the same generation (0: any).
fn write_status(
    shared: &Weak<Shared>,
    kind: Kind,
    ns: &str,
    name: &str,
    object_uid: &str,
    generation: i64,
    f: impl FnOnce(&Value) -> Value,
) {
    let Some(shared) = shared.upgrade() else {
        return;
    };
    let mut cluster = shared.cluster();
    let gr = gr(kind);
    let Some(current) = cluster.store.get(&gr, ns, name) else {
        return;
    };
    if uid(&current) != object_uid
        || (generation != 0
            && current["metadata"]["generation"].as_i64().unwrap_or(1) != generation)
    {
        return;
    }
    let Some(def) = cluster.registry.preferred(&gr) else {
        return;
    };
    let mut next = (*current).clone();
    next["status"] = f(&current);
    let part = if def.status_subresource {
        Part::Status
    } else {
        Part::Main
    };
    if let Err(e) = cluster.update(&def, ns, name, next, part, false, jiff::Timestamp::now()) {
        tracing::warn!(error = %e, %name, "simulation: writing a status failed");
    }
}

fn condition(ty: &str, status: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": ty, "status": status, "reason": reason, "message": message,
           "lastUpdateTime": now, "lastTransitionTime": now})
}

/// A rollout in progress: the new generation observed, nothing updated yet.
fn rolling(kind: Kind, o: &Value) -> Value {
    let now = timestamp(jiff::Timestamp::now());
    let want = replicas(o);
    let old = &o["status"];
    let ready = old["readyReplicas"].as_i64().unwrap_or(0).min(want);
    let generation = o["metadata"]["generation"].as_i64().unwrap_or(1);
    let name = o["metadata"]["name"].as_str().unwrap_or_default();
    match kind {
        Kind::Deployment => json!({
            "observedGeneration": generation,
            "replicas": want,
            "updatedReplicas": 0,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "unavailableReplicas": want - ready,
            "conditions": [
                condition("Available", if ready >= want { "True" } else { "False" },
                    if ready >= want { "MinimumReplicasAvailable" } else { "MinimumReplicasUnavailable" },
                    "Deployment does not have minimum availability.", &now),
                condition("Progressing", "True", "ReplicaSetUpdated",
                    &format!("ReplicaSet \"{name}\" is progressing."), &now),
            ],
        }),
        _ => json!({
            "observedGeneration": generation,
            "replicas": want,
            "updatedReplicas": 0,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "currentReplicas": ready,
            "currentRevision": old["currentRevision"].clone(),
            "updateRevision": format!("{name}-{generation}"),
            "collisionCount": 0,
        }),
    }
}

/// A finished rollout: every replica updated, ready and available.
fn rolled_out(kind: Kind, o: &Value) -> Value {
    let now = timestamp(jiff::Timestamp::now());
    let want = replicas(o);
    let generation = o["metadata"]["generation"].as_i64().unwrap_or(1);
    let name = o["metadata"]["name"].as_str().unwrap_or_default();
    match kind {
        Kind::Deployment => json!({
            "observedGeneration": generation,
            "replicas": want,
            "updatedReplicas": want,
            "readyReplicas": want,
            "availableReplicas": want,
            "conditions": [
                condition("Available", "True", "MinimumReplicasAvailable",
                    "Deployment has minimum availability.", &now),
                condition("Progressing", "True", "NewReplicaSetAvailable",
                    &format!("ReplicaSet \"{name}\" has successfully progressed."), &now),
            ],
        }),
        _ => {
            let revision = format!("{name}-{generation}");
            json!({
                "observedGeneration": generation,
                "replicas": want,
                "updatedReplicas": want,
                "readyReplicas": want,
                "availableReplicas": want,
                "currentReplicas": want,
                "currentRevision": revision,
                "updateRevision": revision,
                "collisionCount": 0,
            })
        }
    }
}

fn job_succeeded(o: &Value) -> Value {
    let now = timestamp(jiff::Timestamp::now());
    let completions = o["spec"]["completions"].as_i64().unwrap_or(1);
    json!({
        "startTime": o["status"]["startTime"].as_str().unwrap_or(&now),
        "completionTime": now,
        "succeeded": completions,
        "ready": 0,
        "terminating": 0,
        "uncountedTerminatedPods": {},
        "conditions": [
            condition("SuccessCriteriaMet", "True", "CompletionsReached",
                "Reached expected number of succeeded pods", &now),
            condition("Complete", "True", "CompletionsReached",
                "Reached expected number of succeeded pods", &now),
        ],
    })
}

fn job_failed(o: &Value) -> Value {
    let now = timestamp(jiff::Timestamp::now());
    let backoff = o["spec"]["backoffLimit"].as_i64().unwrap_or(6);
    json!({
        "startTime": o["status"]["startTime"].as_str().unwrap_or(&now),
        "failed": backoff + 1,
        "ready": 0,
        "terminating": 0,
        "uncountedTerminatedPods": {},
        "conditions": [
            condition("FailureTarget", "True", "BackoffLimitExceeded",
                "Job has reached the specified backoff limit", &now),
            condition("Failed", "True", "BackoffLimitExceeded",
                "Job has reached the specified backoff limit", &now),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_follow_label_then_rules_then_success() {
        let mut s = State {
            config: SimulationConfig {
                job_rules: vec![JobRule::new("kit-", JobOutcome::Fail).times(1)],
                ..SimulationConfig::default()
            },
            used: vec![0],
            seen: HashSet::new(),
        };
        let job = |name: &str, label: Option<&str>| {
            let mut j = json!({"metadata": {"name": name}});
            if let Some(l) = label {
                j["metadata"]["labels"] = json!({ OUTCOME_LABEL: l });
            }
            j
        };
        assert_eq!(s.outcome(&job("kit-1", Some("hang"))), JobOutcome::Hang);
        assert_eq!(s.outcome(&job("kit-1", None)), JobOutcome::Fail);
        assert_eq!(s.outcome(&job("kit-2", None)), JobOutcome::Succeed);
        assert_eq!(s.outcome(&job("other", Some("fail"))), JobOutcome::Fail);
    }

    #[test]
    fn statuses_read_like_the_controllers() {
        let d = json!({"metadata": {"name": "web", "generation": 3}, "spec": {"replicas": 2},
                       "status": {"readyReplicas": 2}});
        let r = rolling(Kind::Deployment, &d);
        assert_eq!(
            (
                r["observedGeneration"].as_i64(),
                r["updatedReplicas"].as_i64()
            ),
            (Some(3), Some(0))
        );
        let done = rolled_out(Kind::Deployment, &d);
        assert_eq!(done["readyReplicas"], 2);
        assert_eq!(done["conditions"][0]["type"], "Available");
        let s = rolled_out(Kind::StatefulSet, &d);
        assert_eq!(s["currentRevision"], s["updateRevision"]);
        let j = json!({"metadata": {"name": "j"}, "spec": {"completions": 3, "backoffLimit": 1},
                       "status": {"startTime": "2026-01-01T00:00:00Z"}});
        assert_eq!(job_succeeded(&j)["succeeded"], 3);
        assert_eq!(job_failed(&j)["failed"], 2);
        assert_eq!(job_failed(&j)["conditions"][1]["type"], "Failed");
    }
}
