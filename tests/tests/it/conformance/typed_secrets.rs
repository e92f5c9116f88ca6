//! What 1.20 requires of a Secret of each type (`ValidateSecret`), and of
//! a CronJob's job template (a Job's spec, its selector generated; its
//! metadata as Go encodes an empty `ObjectMeta`).

use integration_tests::{Fallible, Reply, Scene};
use serde_json::{Value, json};

/// A write's code and causes.
fn outcome(reply: &Reply) -> Value {
    json!({"code": reply.code, "reason": reply.body["reason"],
           "message": reply.body["message"], "causes": reply.body["details"]["causes"]})
}

/// Each Secret type without what it needs, and with it.
pub async fn secret_types_require_their_keys(s: &mut Scene) -> Fallible {
    let path = s.core("secrets");
    let secret = |name: &str, type_: &str, data: Value| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
               "type": type_, "data": data})
    };
    let cases = [
        ("tls", "kubernetes.io/tls", json!({"a": "Yg=="})),
        ("tls half", "kubernetes.io/tls", json!({"tls.crt": "Yg=="})),
        (
            "tls whole",
            "kubernetes.io/tls",
            json!({"tls.crt": "Yg==", "tls.key": "Yg=="}),
        ),
        (
            "dockerconfigjson",
            "kubernetes.io/dockerconfigjson",
            json!({}),
        ),
        ("dockercfg", "kubernetes.io/dockercfg", json!({"a": "Yg=="})),
        (
            "basic-auth",
            "kubernetes.io/basic-auth",
            json!({"a": "Yg=="}),
        ),
        (
            "basic-auth user",
            "kubernetes.io/basic-auth",
            json!({"username": "Yg=="}),
        ),
        (
            "ssh-auth",
            "kubernetes.io/ssh-auth",
            json!({"ssh-privatekey": ""}),
        ),
        (
            "service-account-token",
            "kubernetes.io/service-account-token",
            json!({}),
        ),
        ("custom", "example.com/anything", json!({})),
    ];
    for (i, (label, type_, data)) in cases.into_iter().enumerate() {
        let reply = s.post(&path, secret(&format!("s{i}"), type_, data)).await?;
        s.record(label, outcome(&reply));
    }
    Ok(())
}

/// A CronJob's job template is a Job's spec.
pub async fn cron_job_templates_are_job_specs(s: &mut Scene) -> Fallible {
    let path = format!("/apis/batch/v1beta1/namespaces/{}/cronjobs", s.ns);
    let cron_job = |name: &str, job: Value| {
        json!({"apiVersion": "batch/v1beta1", "kind": "CronJob", "metadata": {"name": name},
               "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": job}}})
    };
    let containers = json!([{"name": "c", "image": "busybox"}]);
    let created = s
        .post(
            &path,
            cron_job(
                "ok",
                json!({"template": {"spec": {"restartPolicy": "OnFailure",
                                             "containers": containers}}}),
            ),
        )
        .await?
        .expect(201)?;
    s.record("created job template", &created.body["spec"]["jobTemplate"]);
    for (label, job) in [
        (
            "restart always",
            json!({"template": {"spec": {"containers": containers}}}),
        ),
        (
            "negative counts, no containers",
            json!({"backoffLimit": -1, "parallelism": -2,
                   "template": {"spec": {"restartPolicy": "Never"}}}),
        ),
        (
            "a selector",
            json!({"selector": {"matchLabels": {"a": "b"}},
                   "template": {"metadata": {"labels": {"a": "b"}},
                                "spec": {"restartPolicy": "Never", "containers": containers}}}),
        ),
    ] {
        let reply = s.post(&path, cron_job("bad", job)).await?;
        s.record(label, outcome(&reply));
    }
    Ok(())
}
