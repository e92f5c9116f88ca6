//! Simulated workload controllers (off by default): Deployments and
//! StatefulSets become ready, Jobs succeed or fail, after a delay, by
//! writing their `status` as kube-controller-manager would; claims are
//! bound to static PersistentVolumes as its PersistentVolume controller
//! binds them; CronJobs start Jobs on their schedule as its CronJob
//! controller starts them.
//!
//! Two ways to start it, with the same behaviour:
//! - [`ApiServer::simulate`](crate::ApiServer::simulate), inside the
//!   embedded server: the simulation follows the store's change stream;
//!   each write goes through the same rules as a client's (the status
//!   subresource, `resourceVersion`, watch events) but is neither logged
//!   nor subject to faults.
//! - [`Simulation::through`], through a `kube::Client`, for any API server
//!   that runs no workload controllers (the embedded one served over HTTP
//!   to another process, or a bare kube-apiserver): it watches the
//!   workloads of one namespace (or all) and replaces their `status`, as
//!   a client with its own requests.
//!
//! What it does:
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
//! - **PersistentVolumeClaim** / **PersistentVolume** (`volumes.rs`): a
//!   new volume becomes `Available`; an unbound claim of an `Immediate`
//!   class (or of none, or of `""`) is bound at once to the volume
//!   reserved for it (`spec.claimRef`) or that it names
//!   (`spec.volumeName`), else to the smallest `Available` volume of its
//!   class whose access modes, capacity, volume mode and labels (the
//!   claim's `spec.selector`) fit; a claim that nothing fits stays
//!   `Pending`. Binding writes what kube-controller-manager 1.20 writes:
//!   the volume's full `spec.claimRef`, `status.phase: Bound` and
//!   (unless it was reserved) `pv.kubernetes.io/bound-by-controller`; the
//!   claim's `spec.volumeName`, `pv.kubernetes.io/bind-completed`,
//!   `pv.kubernetes.io/bound-by-controller` (unless it named the volume)
//!   and its status (`Bound`, the volume's access modes and capacity). A
//!   claim of a `WaitForFirstConsumer` class waits until a Pod of its
//!   namespace mounts it, then binds the same way: the simulation stands
//!   in for the scheduler, which would pick a node first (there are
//!   none). A bound volume whose claim is deleted becomes `Released`
//!   (reclaim policy `Retain`). Through a client, volumes and classes are
//!   read cluster-wide, claims and Pods in the simulated namespace.
//! - **CronJob** (`cronjobs.rs`, the schedule in `crate::cron_schedule`): every second (the
//!   1.20 controller every 10 s), as kube-controller-manager 1.20's
//!   CronJob controller (the v1 one): the schedule read as robfig/cron v1
//!   reads it (five fields with names, steps, ranges and lists, or
//!   `@hourly`, `@daily`, … and `@every D`; in UTC); only the most recent
//!   unmet time since `status.lastScheduleTime` (or the creation, or now
//!   − `startingDeadlineSeconds`) runs, none when more than 100 were
//!   missed; nothing while `suspend`ed, nor with `concurrencyPolicy:
//!   Forbid` while a Job is active, and `Replace` deletes the active ones
//!   first. The Job is named `<cronjob>-<scheduled Unix time in seconds>`
//!   (1.20's v1 controller; later ones use minutes), carries the
//!   template's labels, annotations and spec and a controller reference
//!   to the CronJob (`batch/v1beta1`, `blockOwnerDeletion`); then the
//!   CronJob's `status.active` gets a reference to it (kind, namespace,
//!   name, uid, `apiVersion: batch/v1`, resourceVersion) and
//!   `status.lastScheduleTime` the scheduled time. The Job then runs as
//!   any Job here (its outcome label in the template decides); finished
//!   or deleted, it leaves `active`, and finished Jobs beyond
//!   `successfulJobsHistoryLimit` / `failedJobsHistoryLimit` are deleted,
//!   the oldest first. Through a client, CronJobs are read at
//!   `batch/v1beta1` (the version 1.20 serves, and the embedded server
//!   too) and Jobs in the simulated namespace.
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
//! `paused: true` roll out anyway; a Job's `parallelism` is ignored. No
//! volume is provisioned for a claim of a class with a provisioner (the
//! claim stays `Pending`, without the controller's
//! `volume.beta.kubernetes.io/storage-provisioner` annotation), reclaim
//! policies `Delete` and `Recycle` do nothing, and the controller's Events
//! (`FailedBinding`, `WaitForFirstConsumer`) are not written: the
//! simulation writes no Events (nor the CronJob controller's
//! `SuccessfulCreate`, `SawCompletedJob`, …). Schedules use the wall
//! clock: a test waits for a CronJob's time (`@every 1s` is the
//! quickest).
//! Needs a Tokio runtime.

#[cfg(test)]
mod binding_tests;
mod client;
mod cron_client;
mod cron_local;
mod cronjobs;
mod volume_client;
mod volumes;

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

/// What the simulated controllers remember, shared by the task that
/// watches and the writes it schedules.
#[derive(Debug)]
struct State {
    config: SimulationConfig,
    /// Uses of each rule so far.
    used: Vec<u32>,
    /// (uid, generation) of rollouts and uids of Jobs already handled.
    seen: HashSet<(String, i64)>,
    /// Set by [`Simulation::stop`]: nothing more is written.
    stopped: bool,
}

impl State {
    fn new(config: SimulationConfig) -> Self {
        Self {
            used: vec![0; config.job_rules.len()],
            config,
            seen: HashSet::new(),
            stopped: false,
        }
    }

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

    /// What the controller of `kind` does about `object` as it is now:
    /// nothing when the workload is finished, being deleted, or this
    /// generation (Job) was already handled. Remembers what it decided.
    fn react(&mut self, kind: Kind, object: &Value) -> Option<Reaction> {
        if self.stopped || object["metadata"].get("deletionTimestamp").is_some() {
            return None;
        }
        let target = Target::of(kind, object);
        let status = &object["status"];
        match kind {
            Kind::Job => {
                let finished = status["succeeded"].as_i64().unwrap_or(0) > 0
                    || status["failed"].as_i64().unwrap_or(0) > 0;
                if finished || !self.seen.insert((target.uid.clone(), 0)) {
                    return None;
                }
                let finish = match self.outcome(object) {
                    JobOutcome::Hang => None,
                    JobOutcome::Succeed => Some(Finish::JobSucceeded),
                    JobOutcome::Fail => Some(Finish::JobFailed),
                };
                Some(Reaction {
                    target,
                    now: Some(job_started()),
                    delay: self.config.job_duration,
                    finish,
                })
            }
            Kind::Deployment | Kind::StatefulSet => {
                let want = replicas(object);
                let done = status["observedGeneration"].as_i64() == Some(target.generation)
                    && status["readyReplicas"].as_i64().unwrap_or(0) == want
                    && status["updatedReplicas"].as_i64().unwrap_or(0) == want;
                if done || !self.seen.insert((target.uid.clone(), target.generation)) {
                    return None;
                }
                let delay = self.config.rollout_delay;
                Some(Reaction {
                    target,
                    now: (!delay.is_zero()).then(|| rolling(kind, object)),
                    delay,
                    finish: Some(Finish::RolledOut),
                })
            }
        }
    }
}

/// The workload a reaction writes to: the same object (uid) at the same
/// generation (Jobs: any generation) as when it was observed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    kind: Kind,
    namespace: String,
    name: String,
    uid: String,
    /// 0 for a Job: its writes do not wait on a generation.
    generation: i64,
}

impl Target {
    fn of(kind: Kind, object: &Value) -> Self {
        let text = |field: &str| {
            object["metadata"][field]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        Self {
            kind,
            namespace: text("namespace"),
            name: text("name"),
            uid: uid(object),
            generation: match kind {
                Kind::Job => 0,
                Kind::Deployment | Kind::StatefulSet => generation(object),
            },
        }
    }

    /// Whether `current` is still the object this target was taken from.
    fn matches(&self, current: &Value) -> bool {
        uid(current) == self.uid && (self.generation == 0 || generation(current) == self.generation)
    }
}

/// What a simulated controller does about one observation: write `now` at
/// once, then after `delay` the status `finish` computes from the object
/// as it is then.
#[derive(Debug, Clone, PartialEq)]
struct Reaction {
    target: Target,
    now: Option<Value>,
    delay: Duration,
    /// `None`: the workload never finishes (a hanging Job).
    finish: Option<Finish>,
}

/// How a workload finishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finish {
    RolledOut,
    JobSucceeded,
    JobFailed,
}

impl Finish {
    /// The status of `object` once finished.
    fn status(self, kind: Kind, object: &Value) -> Value {
        match self {
            Finish::RolledOut => rolled_out(kind, object),
            Finish::JobSucceeded => job_succeeded(object),
            Finish::JobFailed => job_failed(object),
        }
    }
}

/// A running simulation. Dropping the handle does not stop it (it ends
/// with the server, or, through a client, with the runtime);
/// [`Simulation::stop`] does.
#[derive(Debug, Clone)]
pub struct Simulation {
    state: Arc<Mutex<State>>,
    tasks: Arc<Vec<JoinHandle<()>>>,
}

impl Simulation {
    /// Simulates the workload controllers through `client`, for the
    /// workloads of `namespace` (every namespace when `None`), on an API
    /// server that runs none: each workload is watched, and its status
    /// replaced (`PUT …/status`, retried on a conflict) as
    /// kube-controller-manager would. The embedded server simulates in
    /// process instead, without requests: [`ApiServer::simulate`](crate::ApiServer::simulate).
    ///
    /// # Caveats
    /// Never point it at a cluster that runs the real controllers: both
    /// would write the workloads' status. It needs the rights to list,
    /// watch, get and update the status of Deployments, StatefulSets and
    /// Jobs, and, to bind claims, to list and watch PersistentVolumes and
    /// StorageClasses (cluster-wide), claims and Pods, and to update
    /// volumes and claims and their status, and, to run CronJobs, to list
    /// `batch/v1beta1` CronJobs and update their status and to list, get,
    /// create and delete Jobs; a request that fails is logged (`tracing`)
    /// and not retried, the watch is (CronJobs: at the next pass).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: kube::Client) {
    /// use fsm_testkit::simulation::{JobOutcome, JobRule, Simulation, SimulationConfig};
    ///
    /// let sim = Simulation::through(client, Some("team-a"), SimulationConfig {
    ///     job_rules: vec![JobRule::new("build-", JobOutcome::Fail).times(1)],
    ///     ..SimulationConfig::default()
    /// });
    /// // … create Jobs and Deployments in team-a, watch them finish …
    /// sim.stop();
    /// # }
    /// ```
    #[must_use = "the simulation runs until stopped; keep the handle to stop it"]
    pub fn through(
        client: kube::Client,
        namespace: Option<&str>,
        config: SimulationConfig,
    ) -> Simulation {
        let state = Arc::new(Mutex::new(State::new(config)));
        let namespace = namespace.map(str::to_owned);
        let binder = volume_client::start(client.clone(), namespace.clone(), state.clone());
        let cron = cron_client::start(client.clone(), namespace.clone(), state.clone());
        let task = client::start(client, namespace, state.clone());
        Simulation {
            state,
            tasks: Arc::new(vec![task, binder, cron]),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Adds a rule for Jobs created from now on (after the configured ones).
    pub fn add_job_rule(&self, rule: JobRule) {
        let mut s = self.lock();
        s.config.job_rules.push(rule);
        s.used.push(0);
    }

    /// Stops simulating: nothing more is written, not even the pending
    /// completions of workloads already seen (through a client, a request
    /// already sent may still land).
    pub fn stop(&self) {
        self.lock().stopped = true;
        for task in self.tasks.iter() {
            task.abort();
        }
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether [`Simulation::stop`] was called.
fn stopped(state: &Mutex<State>) -> bool {
    lock(state).stopped
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Deployment,
    StatefulSet,
    Job,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Deployment, Kind::StatefulSet, Kind::Job];
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
    let state = Arc::new(Mutex::new(State::new(config)));
    let weak = Arc::downgrade(shared);
    let (mut rx, existing) = {
        let cluster = shared.cluster();
        (cluster.store.subscribe(), workloads(&cluster))
    };
    let cron = cron_local::start(weak.clone(), state.clone());
    let task_state = state.clone();
    let task = tokio::spawn(async move {
        for (kind, object) in existing {
            observe(&weak, &task_state, kind, &object);
        }
        bind_claims(&weak, &task_state);
        loop {
            match rx.recv().await {
                Ok(e) => {
                    if volume_related(&e.resource) {
                        bind_claims(&weak, &task_state);
                    } else if e.kind != crate::store::EventType::Deleted
                        && let Some(kind) = kind_of(&e.resource)
                    {
                        observe(&weak, &task_state, kind, &e.object);
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    let Some(shared) = weak.upgrade() else { return };
                    let all = workloads(&shared.cluster());
                    for (kind, object) in all {
                        observe(&weak, &task_state, kind, &object);
                    }
                    bind_claims(&weak, &task_state);
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
    Simulation {
        state,
        tasks: Arc::new(vec![task, cron]),
    }
}

/// The resources the PersistentVolume controller follows: a change to any
/// of them may bind a claim.
const VOLUME_RESOURCES: [(&str, &str); 4] = [
    ("", "persistentvolumes"),
    ("", "persistentvolumeclaims"),
    ("", "pods"),
    ("storage.k8s.io", "storageclasses"),
];

fn volume_related(gr: &GroupResource) -> bool {
    VOLUME_RESOURCES
        .iter()
        .any(|(g, r)| gr.group == *g && gr.resource == *r)
}

fn core(resource: &str) -> GroupResource {
    GroupResource {
        group: String::new(),
        resource: resource.into(),
    }
}

/// Plans the PersistentVolume controller's writes on the cluster as it is
/// ([`volumes::plan`]) and makes them, in the embedded server.
fn bind_claims(shared: &Weak<Shared>, state: &Mutex<State>) {
    if stopped(state) {
        return;
    }
    let Some(shared) = shared.upgrade() else {
        return;
    };
    let mut cluster = shared.cluster();
    let [volumes, claims, pods, classes] = VOLUME_RESOURCES.map(|(group, resource)| {
        let gr = GroupResource {
            group: group.into(),
            resource: resource.into(),
        };
        cluster.store.list(&gr, None)
    });
    let world = volumes::World {
        volumes: volumes.iter().map(AsRef::as_ref).collect(),
        claims: claims.iter().map(AsRef::as_ref).collect(),
        classes: classes.iter().map(AsRef::as_ref).collect(),
        pods: pods.iter().map(AsRef::as_ref).collect(),
    };
    for group in volumes::plan(&world) {
        for step in group {
            if !write_step(&mut cluster, &step) {
                break;
            }
        }
    }
}

/// Makes one step of the volume binder in the embedded server: whether
/// it was written (no: the object is gone, replaced, or no longer fits the
/// step, and the rest of its group is left).
fn write_step(cluster: &mut crate::cluster::Cluster, step: &volumes::Step) -> bool {
    let gr = match step.object {
        volumes::Object::Volume => core("persistentvolumes"),
        volumes::Object::Claim => core("persistentvolumeclaims"),
    };
    let (ns, name) = (step.namespace.as_str(), step.name.as_str());
    let Some(current) = cluster.store.get(&gr, ns, name) else {
        return false;
    };
    let Some(def) = cluster.registry.preferred(&gr) else {
        return false;
    };
    if uid(&current) != step.uid || !step.edit.fits(&current) {
        return false;
    }
    let mut next = (*current).clone();
    step.edit.apply(&mut next);
    let part = if step.status {
        Part::Status
    } else {
        Part::Main
    };
    match cluster.update(&def, ns, name, next, part, false, jiff::Timestamp::now()) {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(error = %e, %name, "simulation: binding a claim failed");
            false
        }
    }
}

/// Every stored Deployment, StatefulSet and Job.
fn workloads(cluster: &crate::cluster::Cluster) -> Vec<(Kind, Arc<Value>)> {
    Kind::ALL
        .into_iter()
        .flat_map(|k| {
            cluster
                .store
                .list(&gr(k), None)
                .into_iter()
                .map(move |o| (k, o))
        })
        .collect()
}

fn uid(o: &Value) -> String {
    o["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn generation(o: &Value) -> i64 {
    o["metadata"]["generation"].as_i64().unwrap_or(1)
}

fn replicas(o: &Value) -> i64 {
    o["spec"]["replicas"].as_i64().unwrap_or(1)
}

/// Reacts, in the embedded server, to the current state of a workload.
fn observe(shared: &Weak<Shared>, state: &Arc<Mutex<State>>, kind: Kind, object: &Value) {
    let Some(reaction) = lock(state).react(kind, object) else {
        return;
    };
    let Reaction {
        target,
        now,
        delay,
        finish,
    } = reaction;
    if let Some(now) = now {
        write_status(shared, &target, |_| now);
    }
    let Some(finish) = finish else { return };
    let (shared, state) = (shared.clone(), state.clone());
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        if !stopped(&state) {
            write_status(&shared, &target, |o| finish.status(target.kind, o));
        }
    });
}

/// Writes the status `f` computes from the stored object, if it is still
/// the target.
fn write_status(shared: &Weak<Shared>, target: &Target, f: impl FnOnce(&Value) -> Value) {
    let Some(shared) = shared.upgrade() else {
        return;
    };
    let mut cluster = shared.cluster();
    let gr = gr(target.kind);
    let (ns, name) = (target.namespace.as_str(), target.name.as_str());
    let Some(current) = cluster.store.get(&gr, ns, name) else {
        return;
    };
    if !target.matches(&current) {
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

/// A Job just started: one active pod, none ready yet.
fn job_started() -> Value {
    json!({"startTime": timestamp(jiff::Timestamp::now()), "active": 1, "ready": 0})
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
        let mut s = State::new(SimulationConfig {
            job_rules: vec![JobRule::new("kit-", JobOutcome::Fail).times(1)],
            ..SimulationConfig::default()
        });
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

    fn deployment(uid: &str, generation: i64) -> Value {
        json!({"metadata": {"name": "web", "namespace": "ns", "uid": uid,
                            "generation": generation},
               "spec": {"replicas": 2}})
    }

    #[test]
    fn each_generation_of_a_rollout_is_reacted_to_once() {
        let mut s = State::new(SimulationConfig::default());
        let first = s.react(Kind::Deployment, &deployment("u1", 1));
        let first = first.expect("a new generation starts a rollout");
        assert_eq!(first.target.generation, 1);
        assert_eq!(
            first.now.as_ref().map(|n| n["updatedReplicas"].clone()),
            Some(json!(0))
        );
        assert_eq!(
            (first.delay, first.finish),
            (Duration::from_secs(1), Some(Finish::RolledOut))
        );
        assert_eq!(
            s.react(Kind::Deployment, &deployment("u1", 1)),
            None,
            "seen"
        );
        assert!(
            s.react(Kind::Deployment, &deployment("u1", 2)).is_some(),
            "a new generation"
        );
        assert!(
            s.react(Kind::Deployment, &deployment("u2", 1)).is_some(),
            "a new object"
        );
    }

    #[test]
    fn a_rollout_without_delay_writes_only_its_end() {
        let mut s = State::new(SimulationConfig {
            rollout_delay: Duration::ZERO,
            ..SimulationConfig::default()
        });
        let r = s.react(Kind::StatefulSet, &deployment("u1", 1));
        assert_eq!(
            r.map(|r| (r.now, r.finish)),
            Some((None, Some(Finish::RolledOut)))
        );
    }

    #[test]
    fn a_rolled_out_or_deleted_workload_is_left_alone() {
        let mut s = State::new(SimulationConfig::default());
        let mut done = deployment("u1", 1);
        done["status"] = rolled_out(Kind::Deployment, &done);
        assert_eq!(s.react(Kind::Deployment, &done), None);
        let mut deleting = deployment("u2", 1);
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(s.react(Kind::Deployment, &deleting), None);
    }

    #[test]
    fn a_job_starts_at_once_and_finishes_as_its_outcome_says() {
        let mut s = State::new(SimulationConfig {
            job_rules: vec![JobRule::new("stuck-", JobOutcome::Hang)],
            ..SimulationConfig::default()
        });
        let job = |name: &str| json!({"metadata": {"name": name, "uid": name, "generation": 1}});
        let ok = s.react(Kind::Job, &job("build-1")).expect("a new Job");
        assert_eq!(
            ok.target.generation, 0,
            "a Job's writes wait on no generation"
        );
        assert_eq!(ok.now.as_ref().map(|n| n["active"].clone()), Some(json!(1)));
        assert_eq!(
            (ok.delay, ok.finish),
            (Duration::from_millis(1_500), Some(Finish::JobSucceeded))
        );
        let stuck = s.react(Kind::Job, &job("stuck-1")).expect("a new Job");
        assert_eq!(stuck.finish, None);
        assert_eq!(s.react(Kind::Job, &job("build-1")), None, "seen");
        let mut finished = job("build-2");
        finished["status"] = json!({"failed": 1});
        assert_eq!(s.react(Kind::Job, &finished), None);
    }

    #[test]
    fn nothing_is_reacted_to_once_stopped() {
        let mut s = State::new(SimulationConfig::default());
        s.stopped = true;
        assert_eq!(s.react(Kind::Deployment, &deployment("u1", 1)), None);
    }

    #[test]
    fn a_target_is_the_same_object_at_the_same_generation() {
        let target = Target::of(Kind::Deployment, &deployment("u1", 2));
        assert_eq!(
            (target.namespace.as_str(), target.name.as_str()),
            ("ns", "web")
        );
        assert!(target.matches(&deployment("u1", 2)));
        assert!(!target.matches(&deployment("u1", 3)), "a newer generation");
        assert!(
            !target.matches(&deployment("u2", 2)),
            "recreated under the same name"
        );
        let job = Target::of(Kind::Job, &deployment("u1", 2));
        assert!(
            job.matches(&deployment("u1", 5)),
            "a Job's status is written at any generation"
        );
    }

    #[tokio::test]
    async fn a_pending_completion_is_not_written_after_stop() {
        let server = crate::ApiServer::new();
        let sim = server.simulate(SimulationConfig {
            job_duration: Duration::from_secs(60),
            ..SimulationConfig::default()
        });
        let jobs =
            kube::Api::<k8s_openapi::api::batch::v1::Job>::default_namespaced(server.client());
        let job = serde_json::from_value(
            json!({"metadata": {"name": "late"}, "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}}}),
        )
        .expect("a valid Job");
        jobs.create(&kube::api::PostParams::default(), &job)
            .await
            .expect("created");
        // The Job starts in the same change as its creation is observed.
        let mut status = None;
        for _ in 0..200 {
            status = jobs.get("late").await.expect("stored").status;
            if status.as_ref().is_some_and(|s| s.active == Some(1)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            status.as_ref().and_then(|s| s.active),
            Some(1),
            "{status:?}"
        );
        sim.stop();
        // Paused, the clock jumps to each timer in turn: the completion's
        // first, then this sleep's.
        tokio::time::pause();
        tokio::time::sleep(Duration::from_secs(120)).await;
        let status = jobs.get("late").await.expect("stored").status;
        assert_eq!(status.and_then(|s| s.succeeded), None);
    }
}
