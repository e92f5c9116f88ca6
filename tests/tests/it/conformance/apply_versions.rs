//! Server-side apply where 1.20 and later versions differ: a Service port
//! without `protocol` (a key of the ports' list) is refused by 1.20 with
//! a 500 (its structured-merge-diff did not default key fields yet);
//! later versions, as the embedded server, default it to `TCP`. A
//! container port without `protocol` applies on both.

use integration_tests::{Fallible, Scene};
use serde_json::json;

use super::known;

/// What an apply of ports without `protocol` answers.
pub async fn apply_of_ports_without_protocol(s: &mut Scene) -> Fallible {
    let service = format!("{}/web?fieldManager=m", s.core("services"));
    let reply = s
        .patch(
            &service,
            "application/apply-patch+yaml",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                   "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]}}),
        )
        .await?;
    s.record_known(
        "Service port without protocol",
        json!({"code": reply.code, "ports": reply.body["spec"]["ports"]}),
        known::VERSION_APPLY_PORT_WITHOUT_PROTOCOL,
    );
    let deployment = format!(
        "/apis/apps/v1/namespaces/{}/deployments/web?fieldManager=m",
        s.ns
    );
    let reply = s
        .patch(
            &deployment,
            "application/apply-patch+yaml",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                   "spec": {"selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "web"}},
                                         "spec": {"containers": [{"name": "c", "image": "nginx:1",
                                                  "ports": [{"containerPort": 80}]}]}}}}),
        )
        .await?
        .expect(201)?;
    s.record(
        "container port without protocol",
        &reply.body["spec"]["template"]["spec"]["containers"][0]["ports"],
    );
    Ok(())
}
