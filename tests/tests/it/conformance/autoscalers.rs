//! HorizontalPodAutoscalers of `autoscaling/v1` as 1.20 serves them: the
//! defaults (one replica at least, 80% CPU, zero status counts, no
//! generation) and validation (the CPU target reported at its internal
//! path, `spec.metrics[0].resource.target.averageUtilization`).

use integration_tests::{Fallible, Scene};
use serde_json::json;

/// A valid autoscaler, an invalid one, an update.
pub async fn autoscalers_of_autoscaling_v1(s: &mut Scene) -> Fallible {
    let path = format!(
        "/apis/autoscaling/v1/namespaces/{}/horizontalpodautoscalers",
        s.ns
    );
    let hpa = |name: &str, spec: serde_json::Value| {
        json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
               "metadata": {"name": name}, "spec": spec})
    };
    let created = s
        .post(
            &path,
            hpa(
                "web",
                json!({"maxReplicas": 5, "scaleTargetRef": {"apiVersion": "apps/v1",
                       "kind": "Deployment", "name": "web"}}),
            ),
        )
        .await?
        .expect(201)?;
    s.record("created", &created);
    let reply = s
        .post(
            &path,
            hpa(
                "bad",
                json!({"maxReplicas": 0, "minReplicas": 3, "scaleTargetRef": {"kind": "", "name": ""},
                       "targetCPUUtilizationPercentage": -1}),
            ),
        )
        .await?;
    s.record("invalid", &reply);
    let updated = s
        .merge(&format!("{path}/web"), json!({"spec": {"maxReplicas": 7}}))
        .await?
        .expect(200)?;
    s.record("updated", &updated);
    Ok(())
}
