//! A Job's defaults: on create, the selector 1.20's strategy generates
//! from the Job's uid (unless `manualSelector`); on every write, 1.20's
//! `SetDefaults_Job` (one completion at a time, 6 retries, the template's
//! labels as the Job's when it has none) and its pod template's.

use serde_json::{Map, Value, json};

use super::apps::{empty_status, workload_template};
use super::{child, object_at, set_absent};
use crate::resources::ResourceDef;

/// The label of a Job's pods and selector naming the Job's uid.
const CONTROLLER_UID: &str = "controller-uid";
/// The label of a Job's pods naming the Job.
const JOB_NAME: &str = "job-name";

/// A new Job: unless it selects its pods itself (`manualSelector: true`),
/// its template labelled with its name and uid, and its selector on the
/// uid.
pub fn job_create(job: &mut Value, _sequence: u64) {
    let name = job
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let uid = job
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let Some(spec) = object_at(job, &["spec"]) else {
        return;
    };
    if spec.get("manualSelector") == Some(&Value::Bool(true)) {
        return;
    }
    if let Some(template) = child(spec, "template")
        && let Some(meta) = child(template, "metadata")
        && let Some(labels) = child(meta, "labels")
    {
        labels.entry(JOB_NAME).or_insert_with(|| json!(name));
        labels.entry(CONTROLLER_UID).or_insert_with(|| json!(uid));
    }
    if let Some(selector) = child(spec, "selector")
        && let Some(match_labels) = child(selector, "matchLabels")
    {
        match_labels
            .entry(CONTROLLER_UID)
            .or_insert_with(|| json!(uid));
    }
}

/// Every write of a Job.
pub fn job(_def: &ResourceDef, job: &mut Value) {
    if let Some(spec) = object_at(job, &["spec"]) {
        if spec.get("completions").is_none_or(Value::is_null)
            && spec.get("parallelism").is_none_or(Value::is_null)
        {
            spec.insert("completions".into(), json!(1));
        }
        set_absent(
            spec,
            &[("parallelism", json!(1)), ("backoffLimit", json!(6))],
        );
    }
    let template_labels = job
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object)
        .filter(|l| !l.is_empty())
        .cloned();
    if let (Some(labels), Some(meta)) = (
        template_labels,
        job.get_mut("metadata").and_then(Value::as_object_mut),
    ) {
        let has_labels = meta
            .get("labels")
            .and_then(Value::as_object)
            .is_some_and(|l| !l.is_empty());
        if !has_labels {
            meta.insert("labels".into(), Value::Object(labels));
        }
    }
    workload_template(job);
    empty_status(job, Value::Object(Map::new()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(mut j: Value) -> Value {
        let def = crate::builtins::registry()
            .get("batch", "v1", "jobs")
            .unwrap()
            .clone();
        job_create(&mut j, 1);
        job(&def, &mut j);
        j
    }

    #[test]
    fn a_jobs_selector_is_generated_from_its_uid() {
        let j = written(json!({"metadata": {"name": "once", "uid": "u-1"},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": []}}}}));
        let labels = json!({"controller-uid": "u-1", "job-name": "once"});
        assert_eq!(
            j["spec"]["selector"],
            json!({"matchLabels": {"controller-uid": "u-1"}})
        );
        assert_eq!(j["spec"]["template"]["metadata"]["labels"], labels);
        assert_eq!(j["metadata"]["labels"], labels);
        assert_eq!(j["spec"]["completions"], 1);
        assert_eq!(j["spec"]["parallelism"], 1);
        assert_eq!(j["spec"]["backoffLimit"], 6);
        assert_eq!(j["status"], json!({}));
    }

    #[test]
    fn a_manual_selector_is_kept_and_parallelism_alone_leaves_completions_unset() {
        let j = written(json!({"metadata": {"name": "m", "uid": "u"}, "spec": {
            "manualSelector": true, "parallelism": 3,
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}}}}));
        assert_eq!(j["spec"]["selector"], json!({"matchLabels": {"a": "b"}}));
        assert!(j["spec"].get("completions").is_none());
        assert_eq!(j["metadata"]["labels"], json!({"a": "b"}));
    }
}
