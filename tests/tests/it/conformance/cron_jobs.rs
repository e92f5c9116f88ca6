//! A CronJob starts its Job: on the real server by kube-controller-manager
//! 1.20's `cronjob` controller (the v1 controller, which passes every
//! 10 s), on the embedded one by `fsm_testkit`'s simulation
//! ([`Scene::simulate_cron_jobs`]). What both write is compared: the
//! Job's name (the CronJob's, then the scheduled Unix time in seconds,
//! which for a five-field schedule is a whole minute), labels,
//! annotations, owner reference and spec, and the CronJob's
//! `status.active` and `lastScheduleTime`.
//!
//! The real server runs no Job controller: the Job's status is not
//! compared, and its template says `hang` to the simulation, which would
//! otherwise finish it (and take it out of `active`).

use integration_tests::scene::eventually;
use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

/// Why a real server may never start the Job: started before its
/// controller-manager ran the CronJob controller.
const CRON_HINT: &str = "kube-controller-manager must run the cronjob controller, as \
    scripts/real-apiserver/start does since issue 32: restart a server started before";

/// `value` with every occurrence of `secret` in its strings replaced by
/// `shown`.
fn mask(value: &Value, secret: &str, shown: &str) -> Value {
    match value {
        Value::String(s) if !secret.is_empty() => Value::String(s.replace(secret, shown)),
        Value::Array(items) => Value::Array(items.iter().map(|v| mask(v, secret, shown)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), mask(v, secret, shown)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A `*/1 * * * *` CronJob's first Job appears within 80 s (the next
/// minute, plus the real controller's 10 s pass), named for its minute,
/// made from the template and owned by the CronJob; the CronJob lists it
/// as active and records the scheduled time.
pub async fn cron_jobs_start_their_jobs(s: &mut Scene) -> Fallible {
    s.simulate_cron_jobs();
    let cron_jobs = s
        .core("cronjobs")
        .replace("/api/v1/", "/apis/batch/v1beta1/");
    let jobs = s.core("jobs").replace("/api/v1/", "/apis/batch/v1/");
    let created = s
        .post(
            &cron_jobs,
            json!({"apiVersion": "batch/v1beta1", "kind": "CronJob",
                "metadata": {"name": "every-minute"},
                "spec": {"schedule": "*/1 * * * *", "jobTemplate": {
                    "metadata": {"labels": {"app": "tick", "fsm-testkit.io/job-outcome": "hang"},
                        "annotations": {"note": "from the template"}},
                    "spec": {"backoffLimit": 2, "template": {"spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox"}]}}}}}}),
        )
        .await?
        .expect(201)?;
    let cron_uid = created.body["metadata"]["uid"].clone();
    let what = format!("the CronJob's first Job (on a real server, {CRON_HINT})");
    let job = eventually(&what, 80, async || {
        let listed = s.get(&jobs).await?.expect(200)?;
        Ok(listed.body["items"]
            .as_array()
            .and_then(|items| {
                items
                    .iter()
                    .find(|j| j["metadata"]["ownerReferences"][0]["uid"] == cron_uid)
            })
            .cloned())
    })
    .await?;
    let name = job["metadata"]["name"].as_str().unwrap_or_default();
    let (prefix, time) = name.rsplit_once('-').unwrap_or((name, ""));
    let scheduled: i64 = time.parse()?;
    assert_eq!(prefix, "every-minute", "{name}");
    assert_eq!(scheduled % 60, 0, "a whole minute: {name}");
    let job_uid = job["metadata"]["uid"].as_str().unwrap_or_default();
    let job_name = json!(name);
    let shown = |v: &Value| mask(&mask(v, time, "<scheduled>"), job_uid, "<job-uid>");
    let meta = &job["metadata"];
    s.record(
        "the Job",
        shown(&json!({"name": meta["name"], "labels": meta["labels"],
            "annotations": meta["annotations"], "ownerReferences": meta["ownerReferences"],
            "spec": job["spec"]})),
    );
    // The status is written right after the Job is created.
    let cron_job = eventually("the CronJob's status", 15, async || {
        let read = s
            .get(&format!("{cron_jobs}/every-minute"))
            .await?
            .expect(200)?;
        let listed = read.body["status"]["active"]
            .as_array()
            .is_some_and(|a| a.iter().any(|r| r["name"] == job_name));
        Ok(listed.then_some(read.body))
    })
    .await?;
    let last = cron_job["status"]["lastScheduleTime"]
        .as_str()
        .unwrap_or_default();
    let last: jiff::Timestamp = last.parse()?;
    assert_eq!(last.as_second(), scheduled, "{cron_job}");
    s.record("the CronJob's status", shown(&cron_job["status"]));
    Ok(())
}

/// A schedule the CronJob controller cannot parse is refused (422) on
/// create and on update, with robfig/cron's message; so is a name too
/// long for its Jobs' and a policy that is none of the three.
pub async fn cron_job_schedules_are_validated(s: &mut Scene) -> Fallible {
    let cron_jobs = s
        .core("cronjobs")
        .replace("/api/v1/", "/apis/batch/v1beta1/");
    let body = |name: &str, spec: Value| {
        let mut spec = spec;
        spec["jobTemplate"] = json!({"spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}});
        json!({"apiVersion": "batch/v1beta1", "kind": "CronJob", "metadata": {"name": name},
            "spec": spec})
    };
    let causes = |reply: &Value| {
        json!([
            reply["reason"],
            reply["message"],
            reply["details"]["causes"]
        ])
    };
    for (label, name, spec) in [
        ("out of range", "a", json!({"schedule": "61 * * * *"})),
        ("four fields", "b", json!({"schedule": "* * * *"})),
        ("a name", "c", json!({"schedule": "@dayly"})),
        ("a step of 0", "d", json!({"schedule": "*/0 * * * *"})),
        ("no unit", "e", json!({"schedule": "@every 5"})),
        ("no schedule", "f", json!({})),
        (
            "policy and limits",
            "g",
            json!({"schedule": "@hourly", "concurrencyPolicy": "Sometimes",
                "startingDeadlineSeconds": -1, "successfulJobsHistoryLimit": -1}),
        ),
        (
            "53 characters",
            &"n".repeat(53),
            json!({"schedule": "@hourly"}),
        ),
    ] {
        let refused = s.post(&cron_jobs, body(name, spec)).await?.expect(422)?;
        s.record(label, causes(&refused.body));
    }
    let fine = json!({"schedule": "15 2-4/2 * jan,MAR mon-fri"});
    s.post(&cron_jobs, body("fine", fine)).await?.expect(201)?;
    let refused = s
        .merge(
            &format!("{cron_jobs}/fine"),
            json!({"spec": {"schedule": "1-2-3 * * * *"}}),
        )
        .await?
        .expect(422)?;
    s.record("an update", causes(&refused.body));
    Ok(())
}
