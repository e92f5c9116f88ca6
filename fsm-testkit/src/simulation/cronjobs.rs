//! The CronJob controller's decisions, as kube-controller-manager 1.20's
//! (the v1 controller, `pkg/controller/cronjob`: `syncOne` and
//! `cleanupFinishedJobs`, run for each CronJob on every pass). Both ways
//! of simulating (in the embedded server and through a client) call
//! [`sync`] with an [`Api`] that makes the requests.
//!
//! For one CronJob and the Jobs whose controller it is:
//! 1. `status.active` loses the Jobs that finished (a `Complete` or
//!    `Failed` condition `True`) and those that are gone; the status is
//!    written if that changed.
//! 2. Nothing more while it is being deleted or `suspend`ed. Else the
//!    schedule's unmet times since `status.lastScheduleTime` (or the
//!    creation, or now − `startingDeadlineSeconds` if later) are counted:
//!    none, nothing to do; more than 100, the controller's error (no Job);
//!    else only the most recent one runs, unless it is more than
//!    `startingDeadlineSeconds` late, or the policy is `Forbid` and a Job
//!    is active; `Replace` deletes the active Jobs first.
//! 3. The Job is created ([`job_for`]: name `<cronjob>-<scheduled Unix
//!    time in seconds>`, the template's labels, annotations and spec, a
//!    controller reference to the CronJob at `batch/v1beta1`), then the
//!    status written with a [`reference`] to it appended to `active` and
//!    `lastScheduleTime` the scheduled time.
//! 4. Finished Jobs beyond `successfulJobsHistoryLimit` and
//!    `failedJobsHistoryLimit` are deleted, the oldest (by `startTime`)
//!    first.
//!
//! The controller's Events (`SuccessfulCreate`, `SawCompletedJob`, …) are
//! not written: the simulation writes no Events; what they report is
//! logged (`tracing`).

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use crate::cron_schedule::Schedule;

/// The most unmet schedule times the controller counts before giving up.
const MAX_MISSED: usize = 100;

/// The API version of the controller reference a Job gets (1.20's
/// `controllerKind`).
pub(super) const OWNER_API_VERSION: &str = "batch/v1beta1";

/// A request the controller made that failed, with the server's message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct RequestFailed(pub String);

/// The requests the controller makes; each driver makes them its way.
pub(super) trait Api {
    /// Replaces the CronJob's status with `cron_job`'s (at its
    /// `resourceVersion`); the CronJob as written.
    async fn replace_status(&mut self, cron_job: &Value) -> Result<Value, RequestFailed>;
    /// Reads a Job.
    async fn get_job(&mut self, namespace: &str, name: &str) -> Result<Value, RequestFailed>;
    /// Creates a Job; the Job as created.
    async fn create_job(&mut self, namespace: &str, job: Value) -> Result<Value, RequestFailed>;
    /// Deletes a Job (propagation `Background`).
    async fn delete_job(&mut self, namespace: &str, name: &str) -> Result<(), RequestFailed>;
}

fn text<'v>(object: &'v Value, pointer: &str) -> &'v str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn uid(object: &Value) -> &str {
    text(object, "/metadata/uid")
}

/// Seconds since the epoch of an RFC 3339 time; Go's zero time (year 1)
/// when absent or unreadable, as an unset `metav1.Time`.
fn seconds(time: Option<&Value>) -> i64 {
    const GO_ZERO_TIME: i64 = -62_135_596_800;
    time.and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map_or(GO_ZERO_TIME, |t| t.as_second())
}

/// The uid of the CronJob controlling `job` (its controller reference of
/// kind `CronJob`), as `getParentUIDFromJob`.
pub(super) fn parent_uid(job: &Value) -> Option<&str> {
    job["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["controller"] == true)
        .filter(|r| r["kind"] == "CronJob")
        .and_then(|r| r["uid"].as_str())
}

/// How a Job finished (`Complete` or `Failed`), if it did.
pub(super) fn finished(job: &Value) -> Option<&str> {
    job["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True")
        .and_then(|c| c["type"].as_str())
}

/// The unmet schedule times of `cron_job` up to `now` (seconds), as
/// `getRecentUnmetScheduleTimes`.
///
/// # Errors
/// The controller's message for a schedule that does not parse, or more
/// than 100 unmet times.
pub(super) fn unmet_times(cron_job: &Value, now: i64) -> Result<Vec<i64>, String> {
    let spec = text(cron_job, "/spec/schedule");
    let schedule =
        Schedule::parse(spec).map_err(|e| format!("unparseable schedule: {spec} : {e}"))?;
    let mut earliest = match cron_job["status"].get("lastScheduleTime") {
        Some(Value::String(_)) => seconds(cron_job["status"].get("lastScheduleTime")),
        _ => seconds(cron_job["metadata"].get("creationTimestamp")),
    };
    if let Some(deadline) = cron_job["spec"]["startingDeadlineSeconds"].as_i64() {
        earliest = earliest.max(now - deadline);
    }
    if earliest > now {
        return Ok(Vec::new());
    }
    let too_many = || {
        "too many missed start time (> 100). Set or decrease .spec.startingDeadlineSeconds \
         or check clock skew"
            .to_string()
    };
    let mut starts = Vec::new();
    let mut t = schedule.next(earliest);
    loop {
        // robfig's zero time (nothing within five years) is never after
        // now: the controller counts it until it gives up.
        let Some(at) = t else { return Err(too_many()) };
        if at > now {
            return Ok(starts);
        }
        starts.push(at);
        if starts.len() > MAX_MISSED {
            return Err(too_many());
        }
        t = schedule.next(at);
    }
}

/// Whether a CronJob should start a Job now, and which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Start {
    /// Nothing to do (deleted, suspended, no unmet time, or `Forbid` with
    /// a Job active); the reason, for the log.
    No(&'static str),
    /// The most recent unmet time was missed by more than
    /// `startingDeadlineSeconds` (kept as the controller checks it,
    /// though its count already leaves out the times that late).
    TooLate(i64),
    /// The controller's error (an unparseable schedule, too many misses).
    Error(String),
    /// Start the Job of this scheduled time.
    At(i64),
}

/// What `syncOne` decides about starting a Job, once `status.active` is
/// up to date; `now` with its fraction, as the controller's clock.
pub(super) fn start(cron_job: &Value, now: jiff::Timestamp) -> Start {
    if cron_job["metadata"].get("deletionTimestamp").is_some() {
        return Start::No("being deleted");
    }
    if cron_job["spec"]["suspend"] == true {
        return Start::No("suspended");
    }
    let times = match unmet_times(cron_job, now.as_second()) {
        Ok(times) => times,
        Err(e) => return Start::Error(e),
    };
    let Some(&scheduled) = times.last() else {
        return Start::No("no unmet start time");
    };
    if let Some(deadline) = cron_job["spec"]["startingDeadlineSeconds"].as_i64() {
        let latest = i128::from(scheduled + deadline) * 1_000_000_000;
        if latest < now.as_nanosecond() {
            return Start::TooLate(scheduled);
        }
    }
    let active = cron_job["status"]["active"]
        .as_array()
        .is_some_and(|a| !a.is_empty());
    if cron_job["spec"]["concurrencyPolicy"] == "Forbid" && active {
        return Start::No("a Job is still active and the policy is Forbid");
    }
    Start::At(scheduled)
}

/// The Job a CronJob starts for `scheduled`, as `getJobFromTemplate`.
pub(super) fn job_for(cron_job: &Value, scheduled: i64) -> Value {
    let template = &cron_job["spec"]["jobTemplate"];
    let name = format!("{}-{scheduled}", text(cron_job, "/metadata/name"));
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(name));
    metadata.insert(
        "namespace".into(),
        json!(text(cron_job, "/metadata/namespace")),
    );
    for key in ["labels", "annotations"] {
        if let Some(map) = template["metadata"][key].as_object()
            && !map.is_empty()
        {
            metadata.insert(key.into(), Value::Object(map.clone()));
        }
    }
    metadata.insert(
        "ownerReferences".into(),
        json!([{
            "apiVersion": OWNER_API_VERSION,
            "kind": "CronJob",
            "name": text(cron_job, "/metadata/name"),
            "uid": uid(cron_job),
            "controller": true,
            "blockOwnerDeletion": true,
        }]),
    );
    let mut job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata});
    if let Some(spec) = template.get("spec") {
        job["spec"] = spec.clone();
    }
    job
}

/// The entry of `status.active` for a Job, as `reference.GetReference`
/// writes it.
pub(super) fn reference(job: &Value) -> Value {
    json!({
        "kind": "Job",
        "namespace": text(job, "/metadata/namespace"),
        "name": text(job, "/metadata/name"),
        "uid": uid(job),
        "apiVersion": "batch/v1",
        "resourceVersion": text(job, "/metadata/resourceVersion"),
    })
}

fn active(cron_job: &Value) -> Vec<Value> {
    cron_job["status"]["active"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Sets `status.active` (omitted when empty, as its `omitempty`).
fn set_active(cron_job: &mut Value, active: Vec<Value>) {
    if !cron_job["status"].is_object() {
        cron_job["status"] = json!({});
    }
    if let Some(status) = cron_job["status"].as_object_mut() {
        if active.is_empty() {
            status.remove("active");
        } else {
            status.insert("active".into(), Value::Array(active));
        }
    }
}

fn remove_active(cron_job: &mut Value, job_uid: &str) {
    let mut list = active(cron_job);
    list.retain(|r| r["uid"] != job_uid);
    set_active(cron_job, list);
}

/// The finished Jobs the history limits delete, as
/// `cleanupFinishedJobs`: beyond each limit, the oldest by `startTime`
/// (those without one last, then by name). No limit set, none.
pub(super) fn history_to_delete<'j>(cron_job: &Value, jobs: &[&'j Value]) -> Vec<&'j Value> {
    let mut out = Vec::new();
    for (outcome, limit) in [
        ("Complete", "successfulJobsHistoryLimit"),
        ("Failed", "failedJobsHistoryLimit"),
    ] {
        let Some(limit) = cron_job["spec"][limit].as_i64() else {
            continue;
        };
        let mut done: Vec<&Value> = jobs
            .iter()
            .copied()
            .filter(|j| finished(j) == Some(outcome))
            .collect();
        let excess =
            usize::try_from(i64::try_from(done.len()).unwrap_or(i64::MAX) - limit).unwrap_or(0);
        if excess == 0 {
            continue;
        }
        done.sort_by_key(|j| {
            let start = j["status"].get("startTime").map(|t| seconds(Some(t)));
            (
                start.is_none(),
                start,
                text(j, "/metadata/name").to_string(),
            )
        });
        out.extend(done.into_iter().take(excess));
    }
    out
}

/// One pass of the controller over one CronJob and the Jobs it controls
/// (`syncOne`, then `cleanupFinishedJobs`), at `now`.
pub(super) async fn sync(
    api: &mut impl Api,
    cron_job: &Value,
    jobs: &[&Value],
    now: jiff::Timestamp,
) {
    let cron_job = sync_one(api, cron_job, jobs, now).await;
    cleanup(api, cron_job, jobs).await;
}

fn name_of(cron_job: &Value) -> String {
    format!(
        "{}/{}",
        text(cron_job, "/metadata/namespace"),
        text(cron_job, "/metadata/name")
    )
}

/// `syncOne`: the CronJob as it is after its writes.
async fn sync_one(
    api: &mut impl Api,
    read: &Value,
    jobs: &[&Value],
    now: jiff::Timestamp,
) -> Value {
    let cron_job_name = name_of(read);
    let mut cron_job = read.clone();
    let children: HashSet<&str> = jobs.iter().map(|j| uid(j)).collect();
    for job in jobs {
        let listed = active(&cron_job).iter().any(|r| r["uid"] == uid(job));
        match (listed, finished(job)) {
            (true, Some(outcome)) => {
                tracing::debug!(cron_job = %cron_job_name, job = text(job, "/metadata/name"), outcome, "simulation: saw a completed job");
                remove_active(&mut cron_job, uid(job));
            }
            (false, None) => {
                tracing::debug!(cron_job = %cron_job_name, job = text(job, "/metadata/name"), "simulation: saw a job the controller did not create or forgot");
            }
            _ => {}
        }
    }
    let mut list = active(&cron_job);
    list.retain(|r| children.contains(r["uid"].as_str().unwrap_or("")));
    set_active(&mut cron_job, list);
    if active(&cron_job) != active(read) {
        match api.replace_status(&cron_job).await {
            Ok(written) => cron_job = written,
            Err(error) => {
                tracing::warn!(%error, cron_job = %cron_job_name, "simulation: updating a CronJob's status failed");
                return cron_job;
            }
        }
    }
    let scheduled = match start(&cron_job, now) {
        Start::At(scheduled) => scheduled,
        Start::No(why) => {
            tracing::trace!(cron_job = %cron_job_name, why, "simulation: no job to start");
            return cron_job;
        }
        Start::TooLate(scheduled) => {
            tracing::info!(cron_job = %cron_job_name, scheduled, "simulation: missed scheduled time to start a job");
            return cron_job;
        }
        Start::Error(error) => {
            tracing::warn!(%error, cron_job = %cron_job_name, "simulation: cannot determine if a job needs to be started");
            return cron_job;
        }
    };
    if cron_job["spec"]["concurrencyPolicy"] == "Replace" {
        for running in active(&cron_job) {
            let (ns, name) = (text(&running, "/namespace"), text(&running, "/name"));
            let job = match api.get_job(ns, name).await {
                Ok(job) => job,
                Err(error) => {
                    tracing::warn!(%error, job = name, "simulation: reading a CronJob's job failed");
                    return cron_job;
                }
            };
            if !delete(api, &mut cron_job, &job).await {
                return cron_job;
            }
        }
    }
    let ns = text(&cron_job, "/metadata/namespace").to_string();
    let created = match api.create_job(&ns, job_for(&cron_job, scheduled)).await {
        Ok(created) => created,
        Err(error) => {
            tracing::warn!(%error, cron_job = %cron_job_name, "simulation: creating a CronJob's job failed");
            return cron_job;
        }
    };
    tracing::debug!(cron_job = %cron_job_name, job = text(&created, "/metadata/name"), "simulation: created a job");
    let mut list = active(&cron_job);
    list.push(reference(&created));
    set_active(&mut cron_job, list);
    cron_job["status"]["lastScheduleTime"] = json!(crate::time::timestamp(
        jiff::Timestamp::from_second(scheduled).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
    ));
    match api.replace_status(&cron_job).await {
        Ok(written) => written,
        Err(error) => {
            tracing::warn!(%error, cron_job = %cron_job_name, "simulation: updating a CronJob's status failed");
            cron_job
        }
    }
}

/// `deleteJob`: deletes the Job and drops it from `active`; whether it was
/// deleted.
async fn delete(api: &mut impl Api, cron_job: &mut Value, job: &Value) -> bool {
    let (ns, name) = (
        text(job, "/metadata/namespace"),
        text(job, "/metadata/name"),
    );
    if let Err(error) = api.delete_job(ns, name).await {
        tracing::warn!(%error, job = name, "simulation: deleting a CronJob's job failed");
        return false;
    }
    remove_active(cron_job, uid(job));
    true
}

/// `cleanupFinishedJobs`: deletes the finished Jobs beyond the history
/// limits; the status is written if that changed `active`.
async fn cleanup(api: &mut impl Api, mut cron_job: Value, jobs: &[&Value]) {
    let before = active(&cron_job);
    for job in history_to_delete(&cron_job, jobs) {
        delete(api, &mut cron_job, job).await;
    }
    if active(&cron_job) != before
        && let Err(error) = api.replace_status(&cron_job).await
    {
        tracing::warn!(%error, cron_job = %name_of(&cron_job), "simulation: updating a CronJob's status failed");
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    fn at(text: &str) -> jiff::Timestamp {
        text.parse().expect("a time")
    }

    fn secs(text: &str) -> i64 {
        at(text).as_second()
    }

    fn cron_job(schedule: &str, created: &str) -> Value {
        json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "nightly", "namespace": "ns", "uid": "cj-uid",
                "resourceVersion": "1", "creationTimestamp": created},
            "spec": {"schedule": schedule, "concurrencyPolicy": "Allow", "suspend": false,
                "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                "jobTemplate": {"metadata": {"labels": {"app": "x"}, "annotations": {"a": "b"}},
                    "spec": {"template": {"spec": {"restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox"}]}}}}},
            "status": {}})
    }

    #[test]
    fn unmet_times_count_from_the_last_schedule_or_creation() {
        let mut cj = cron_job("*/1 * * * *", "2026-12-02T18:30:25Z");
        assert_eq!(unmet_times(&cj, secs("2026-12-02T18:30:59Z")), Ok(vec![]));
        assert_eq!(
            unmet_times(&cj, secs("2026-12-02T18:32:10Z")),
            Ok(vec![
                secs("2026-12-02T18:31:00Z"),
                secs("2026-12-02T18:32:00Z")
            ])
        );
        cj["status"]["lastScheduleTime"] = json!("2026-12-02T18:32:00Z");
        assert_eq!(unmet_times(&cj, secs("2026-12-02T18:32:10Z")), Ok(vec![]));
        assert_eq!(
            unmet_times(&cj, secs("2026-12-02T18:33:00Z")),
            Ok(vec![secs("2026-12-02T18:33:00Z")]),
            "a time is met once it is now"
        );
    }

    #[test]
    fn a_starting_deadline_bounds_the_count_and_makes_a_start_too_late() {
        let mut cj = cron_job("*/1 * * * *", "2026-12-02T10:00:00Z");
        assert!(
            unmet_times(&cj, secs("2026-12-02T12:00:00Z"))
                .expect_err("120 missed")
                .starts_with("too many missed start time (> 100)")
        );
        cj["spec"]["startingDeadlineSeconds"] = json!(200);
        assert_eq!(
            unmet_times(&cj, secs("2026-12-02T12:00:30Z")).map(|t| t.len()),
            Ok(3),
            "only since now - 200 s"
        );
        assert_eq!(
            start(&cj, at("2026-12-02T12:00:30Z")),
            Start::At(secs("2026-12-02T12:00:00Z"))
        );
        let mut hourly = cron_job("0 * * * *", "2026-12-02T10:00:00Z");
        hourly["spec"]["startingDeadlineSeconds"] = json!(10);
        hourly["status"]["lastScheduleTime"] = json!("2026-12-02T10:00:00Z");
        // The deadline moves the count's start past 11:00 once it is late:
        // as in 1.20, a time missed by more than the deadline is not even
        // counted (the controller's `tooLate` check never fires after it).
        assert_eq!(
            start(&hourly, at("2026-12-02T11:00:10.5Z")),
            Start::No("no unmet start time")
        );
        assert_eq!(
            start(&hourly, at("2026-12-02T11:00:09Z")),
            Start::At(secs("2026-12-02T11:00:00Z"))
        );
    }

    #[test]
    fn suspended_forbidden_unparseable_and_deleted_cron_jobs_start_nothing() {
        let now = at("2026-12-02T18:31:05Z");
        let mut cj = cron_job("*/1 * * * *", "2026-12-02T18:30:25Z");
        assert_eq!(start(&cj, now), Start::At(secs("2026-12-02T18:31:00Z")));
        cj["spec"]["suspend"] = json!(true);
        assert_eq!(start(&cj, now), Start::No("suspended"));
        cj["spec"]["suspend"] = json!(false);
        cj["spec"]["concurrencyPolicy"] = json!("Forbid");
        cj["status"]["active"] = json!([{"uid": "j1"}]);
        assert!(matches!(start(&cj, now), Start::No(_)));
        cj["spec"]["concurrencyPolicy"] = json!("Replace");
        assert_eq!(start(&cj, now), Start::At(secs("2026-12-02T18:31:00Z")));
        cj["spec"]["schedule"] = json!("61 * * * *");
        assert_eq!(
            start(&cj, now),
            Start::Error(
                "unparseable schedule: 61 * * * * : End of range (61) above maximum (59): 61"
                    .into()
            )
        );
        cj["spec"]["schedule"] = json!("*/1 * * * *");
        cj["metadata"]["deletionTimestamp"] = json!("2026-12-02T18:31:00Z");
        assert_eq!(start(&cj, now), Start::No("being deleted"));
    }

    #[test]
    fn the_job_is_the_template_under_the_scheduled_name_and_a_controller_reference() {
        let cj = cron_job("*/1 * * * *", "2026-12-02T18:30:25Z");
        let job = job_for(&cj, secs("2026-12-02T18:31:00Z"));
        assert_eq!(
            job["metadata"],
            json!({"name": "nightly-1796236260", "namespace": "ns",
                "labels": {"app": "x"}, "annotations": {"a": "b"},
                "ownerReferences": [{"apiVersion": "batch/v1beta1", "kind": "CronJob",
                    "name": "nightly", "uid": "cj-uid", "controller": true,
                    "blockOwnerDeletion": true}]})
        );
        assert_eq!(job["spec"], cj["spec"]["jobTemplate"]["spec"]);
        assert_eq!(secs("2026-12-02T18:31:00Z") % 60, 0);
        let mut bare = cj.clone();
        bare["spec"]["jobTemplate"]["metadata"] = json!({"labels": {}});
        let job = job_for(&bare, 60);
        assert_eq!(job["metadata"].get("labels"), None, "empty maps omitted");
        let created = json!({"metadata": {"name": "nightly-60", "namespace": "ns",
            "uid": "j-uid", "resourceVersion": "7"}});
        assert_eq!(
            reference(&created),
            json!({"kind": "Job", "namespace": "ns", "name": "nightly-60", "uid": "j-uid",
                "apiVersion": "batch/v1", "resourceVersion": "7"})
        );
        assert_eq!(parent_uid(&job), Some("cj-uid"));
    }

    fn job(name: &str, started: Option<&str>, outcome: Option<&str>) -> Value {
        let mut j = json!({"metadata": {"name": name, "namespace": "ns", "uid": name},
            "status": {}});
        if let Some(s) = started {
            j["status"]["startTime"] = json!(s);
        }
        if let Some(o) = outcome {
            j["status"]["conditions"] = json!([{"type": o, "status": "True"}]);
        }
        j
    }

    #[test]
    fn history_limits_delete_the_oldest_finished_jobs() {
        let cj = cron_job("*/1 * * * *", "2026-12-02T18:30:25Z");
        let jobs = [
            job("d", Some("2026-12-02T18:34:00Z"), Some("Complete")),
            job("a", Some("2026-12-02T18:31:00Z"), Some("Complete")),
            job("c", Some("2026-12-02T18:33:00Z"), Some("Complete")),
            job("b", Some("2026-12-02T18:32:00Z"), Some("Complete")),
            job("none", None, Some("Complete")),
            job("f1", Some("2026-12-02T18:31:00Z"), Some("Failed")),
            job("f2", Some("2026-12-02T18:32:00Z"), Some("Failed")),
            job("running", Some("2026-12-02T18:30:00Z"), None),
        ];
        let refs: Vec<&Value> = jobs.iter().collect();
        let names: Vec<&str> = history_to_delete(&cj, &refs)
            .into_iter()
            .map(|j| text(j, "/metadata/name"))
            .collect();
        assert_eq!(names, ["a", "b", "f1"], "no start time counts as newest");
        let mut unlimited = cj.clone();
        for key in ["successfulJobsHistoryLimit", "failedJobsHistoryLimit"] {
            unlimited["spec"].as_object_mut().map(|s| s.remove(key));
        }
        assert!(history_to_delete(&unlimited, &refs).is_empty());
    }

    /// Records the requests, answering as a server would.
    #[derive(Default)]
    struct Fake {
        calls: Vec<String>,
        stored: Vec<Value>,
        fail_create: bool,
    }

    impl Api for Fake {
        async fn replace_status(&mut self, cron_job: &Value) -> Result<Value, RequestFailed> {
            self.calls.push(format!("status {}", cron_job["status"]));
            let mut written = cron_job.clone();
            written["metadata"]["resourceVersion"] = json!("2");
            Ok(written)
        }
        async fn get_job(&mut self, _: &str, name: &str) -> Result<Value, RequestFailed> {
            self.calls.push(format!("get {name}"));
            Ok(job(name, None, None))
        }
        async fn create_job(&mut self, _: &str, mut job: Value) -> Result<Value, RequestFailed> {
            self.calls
                .push(format!("create {}", job["metadata"]["name"]));
            if self.fail_create {
                return Err(RequestFailed("already exists".into()));
            }
            job["metadata"]["uid"] = json!("new-uid");
            job["metadata"]["resourceVersion"] = json!("5");
            self.stored.push(job.clone());
            Ok(job)
        }
        async fn delete_job(&mut self, _: &str, name: &str) -> Result<(), RequestFailed> {
            self.calls.push(format!("delete {name}"));
            Ok(())
        }
    }

    fn run(fake: &mut Fake, cj: &Value, jobs: &[Value], now: &str) {
        let refs: Vec<&Value> = jobs.iter().collect();
        sync(fake, cj, &refs, at(now))
            .now_or_never()
            .expect("the fake answers at once");
    }

    #[test]
    fn a_due_cron_job_creates_its_job_then_records_it() {
        let mut fake = Fake::default();
        let cj = cron_job("*/1 * * * *", "2026-12-02T18:30:25Z");
        run(&mut fake, &cj, &[], "2026-12-02T18:31:03Z");
        assert_eq!(
            fake.calls,
            [
                "create \"nightly-1796236260\"".to_string(),
                format!(
                    "status {}",
                    json!({"active": [{"kind": "Job", "namespace": "ns",
                        "name": "nightly-1796236260", "uid": "new-uid",
                        "apiVersion": "batch/v1", "resourceVersion": "5"}],
                        "lastScheduleTime": "2026-12-02T18:31:00Z"})
                )
            ]
        );
        let mut failing = Fake {
            fail_create: true,
            ..Fake::default()
        };
        run(&mut failing, &cj, &[], "2026-12-02T18:31:03Z");
        assert_eq!(
            failing.calls,
            ["create \"nightly-1796236260\""],
            "no status without a Job"
        );
    }

    #[test]
    fn finished_and_missing_jobs_leave_active_and_replace_deletes_the_running_one() {
        let mut cj = cron_job("*/1 * * * *", "2026-12-02T18:30:25Z");
        cj["status"] = json!({"lastScheduleTime": "2026-12-02T18:31:00Z", "active": [
            {"uid": "done", "name": "done", "namespace": "ns"},
            {"uid": "gone", "name": "gone", "namespace": "ns"},
            {"uid": "running", "name": "running", "namespace": "ns"}]});
        let owned = |mut j: Value| {
            j["metadata"]["ownerReferences"] =
                json!([{"kind": "CronJob", "uid": "cj-uid", "controller": true}]);
            j
        };
        let jobs = [
            owned(job("done", Some("2026-12-02T18:31:00Z"), Some("Complete"))),
            owned(job("running", Some("2026-12-02T18:31:00Z"), None)),
        ];
        let mut fake = Fake::default();
        run(&mut fake, &cj, &jobs, "2026-12-02T18:31:30Z");
        assert_eq!(
            fake.calls,
            [format!(
                "status {}",
                json!({"lastScheduleTime": "2026-12-02T18:31:00Z",
                    "active": [{"uid": "running", "name": "running", "namespace": "ns"}]})
            )],
            "not due yet: only the active list is updated"
        );
        cj["spec"]["concurrencyPolicy"] = json!("Replace");
        let mut fake = Fake::default();
        run(&mut fake, &cj, &jobs, "2026-12-02T18:32:01Z");
        assert_eq!(fake.calls.len(), 5, "{:?}", fake.calls);
        assert_eq!(
            &fake.calls[1..4],
            [
                "get running",
                "delete running",
                "create \"nightly-1796236320\""
            ]
        );
        assert!(
            fake.calls[4].contains("nightly-1796236320") && !fake.calls[4].contains("\"running\""),
            "{}",
            fake.calls[4]
        );
        cj["spec"]["concurrencyPolicy"] = json!("Forbid");
        let mut fake = Fake::default();
        run(&mut fake, &cj, &jobs, "2026-12-02T18:32:01Z");
        assert_eq!(fake.calls.len(), 1, "Forbid: no Job while one runs");
    }
}
