//! A CronJob, as 1.20 validates it (`ValidateCronJob`, both versions):
//! its schedule parsed as the CronJob controller parses it (robfig/cron
//! v1, [`Schedule::parse`]; required), `startingDeadlineSeconds` and the
//! history limits not negative, `concurrencyPolicy` one of the three, and
//! a name short enough for its Jobs' (at most 52 characters: the
//! controller appends `-<Unix time>`); its job template as a Job's spec
//! (`validateJobSpec`), without a selector (generated).

use serde_json::Value;

use super::field::{FieldErrors, go_string};
use crate::cron_schedule::Schedule;
use crate::resources::ResourceDef;
use crate::status::Cause;

/// The longest CronJob name 1.20 takes: a DNS-1035 label (63) less the
/// controller's 11-character suffix.
const MAX_NAME: usize = 52;

/// The causes of a CronJob's spec and name.
#[must_use]
pub fn cron_job_causes(_def: &ResourceDef, object: &Value) -> Vec<Cause> {
    let mut e = FieldErrors::new();
    let spec = &object["spec"];
    match spec["schedule"].as_str().unwrap_or("") {
        "" => e.required("spec.schedule", ""),
        schedule => {
            if let Err(error) = Schedule::parse(schedule) {
                e.invalid("spec.schedule", &go_string(schedule), &error.to_string());
            }
        }
    }
    e.nonnegative(
        "spec.startingDeadlineSeconds",
        &spec["startingDeadlineSeconds"],
    );
    // Absent, it is defaulted to Allow first.
    match spec["concurrencyPolicy"].as_str().unwrap_or("Allow") {
        "Allow" | "Forbid" | "Replace" => {}
        "" => e.required("spec.concurrencyPolicy", ""),
        other => e.not_supported(
            "spec.concurrencyPolicy",
            other,
            &["Allow", "Forbid", "Replace"],
        ),
    }
    // The job template: a Job's spec, its selector generated.
    let job = &spec["jobTemplate"]["spec"];
    super::workloads::job_spec(job, "spec.jobTemplate.spec", &mut e);
    if !job["selector"].is_null() {
        e.invalid(
            "spec.jobTemplate.spec.selector",
            &crate::immutable::go_syntax::label_selector(Some(&job["selector"])),
            "`selector` will be auto-generated",
        );
    }
    for limit in ["successfulJobsHistoryLimit", "failedJobsHistoryLimit"] {
        e.nonnegative(&format!("spec.{limit}"), &spec[limit]);
    }
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    if name.len() > MAX_NAME {
        e.invalid(
            "metadata.name",
            &go_string(name),
            "must be no more than 52 characters",
        );
    }
    e.into_causes()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The causes of a CronJob with `spec` and a valid job template.
    fn causes(mut spec: Value, name: &str) -> Vec<(String, String)> {
        let def = ResourceDef::builtin("batch", "v1beta1", "CronJob", "cronjobs", true);
        spec["jobTemplate"] = json!({"spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}});
        cron_job_causes(&def, &json!({"metadata": {"name": name}, "spec": spec}))
            .into_iter()
            .map(|c| (c.field, c.message))
            .collect()
    }

    #[test]
    fn the_job_template_is_a_job_spec() {
        let def = ResourceDef::builtin("batch", "v1beta1", "CronJob", "cronjobs", true);
        let fields: Vec<String> = cron_job_causes(
            &def,
            &json!({"metadata": {"name": "n"}, "spec": {"schedule": "@hourly",
                "jobTemplate": {"spec": {"selector": {"matchLabels": {"a": "b"}},
                    "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}}}),
        )
        .into_iter()
        .map(|c| c.field)
        .collect();
        assert_eq!(
            fields,
            [
                "spec.jobTemplate.spec.template.spec.restartPolicy",
                "spec.jobTemplate.spec.selector"
            ]
        );
    }

    #[test]
    fn the_schedule_is_required_and_parsed_as_the_controller_parses_it() {
        assert_eq!(causes(json!({"schedule": "*/5 * * * *"}), "ok"), []);
        assert_eq!(causes(json!({"schedule": "@every 90s"}), "ok"), []);
        assert_eq!(
            causes(json!({}), "ok"),
            [("spec.schedule".into(), "Required value".into())]
        );
        assert_eq!(
            causes(json!({"schedule": "61 * * * *"}), "ok"),
            [(
                "spec.schedule".into(),
                "Invalid value: \"61 * * * *\": End of range (61) above maximum (59): 61".into()
            )]
        );
        assert_eq!(
            causes(json!({"schedule": "* * * *"}), "ok"),
            [(
                "spec.schedule".into(),
                "Invalid value: \"* * * *\": Expected exactly 5 fields, found 4: * * * *".into()
            )]
        );
    }

    #[test]
    fn policy_deadline_limits_and_name_length() {
        let long = "n".repeat(53);
        let found = causes(
            json!({"schedule": "@hourly", "concurrencyPolicy": "Sometimes",
                "startingDeadlineSeconds": -1, "failedJobsHistoryLimit": -2}),
            &long,
        );
        let fields: Vec<&str> = found.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.startingDeadlineSeconds",
                "spec.concurrencyPolicy",
                "spec.failedJobsHistoryLimit",
                "metadata.name"
            ]
        );
        assert_eq!(
            found[1].1,
            "Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\""
        );
        assert_eq!(causes(json!({"schedule": "@hourly"}), &"n".repeat(52)), []);
    }
}
