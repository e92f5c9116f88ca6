//! The claim binder end to end, in the embedded server and through a
//! client: the same outcomes.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use super::{Simulation, SimulationConfig};
use crate::ApiServer;

fn volume(name: &str, size: &str, class: &str) -> PersistentVolume {
    serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": class, "hostPath": {"path": format!("/data/{name}")}}}))
    .expect("a valid PersistentVolume")
}

fn claim(name: &str, size: &str, class: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                 "resources": {"requests": {"storage": size}}}}))
    .expect("a valid PersistentVolumeClaim")
}

/// The claim's phase and volume once `done` holds of it (at most 10 s).
async fn claim_when(
    claims: &Api<PersistentVolumeClaim>,
    name: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let mut last = Value::Null;
    for _ in 0..200 {
        last = serde_json::to_value(claims.get(name).await.expect("the claim")).expect("JSON");
        if done(&last) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name}: never happened, last {last}");
}

fn bound(claim: &Value) -> bool {
    claim["status"]["phase"] == "Bound"
}

/// Two volumes, a claim that fits the smaller and one that fits neither.
async fn binds_the_smallest_fitting_volume(server: &ApiServer) {
    let client = server.client();
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client, "default");
    let pp = PostParams::default();
    for (name, size) in [("big", "5Gi"), ("small", "1Gi")] {
        volumes
            .create(&pp, &volume(name, size, ""))
            .await
            .expect("created");
    }
    claims
        .create(&pp, &claim("fits", "500Mi", ""))
        .await
        .expect("created");
    claims
        .create(&pp, &claim("huge", "50Gi", ""))
        .await
        .expect("created");
    let fits = claim_when(&claims, "fits", bound).await;
    assert_eq!(fits["spec"]["volumeName"], "small");
    assert_eq!(fits["status"]["capacity"], json!({"storage": "1Gi"}));
    assert_eq!(
        fits["metadata"]["annotations"],
        json!({"pv.kubernetes.io/bind-completed": "yes",
               "pv.kubernetes.io/bound-by-controller": "yes"})
    );
    let small = serde_json::to_value(volumes.get("small").await.expect("small")).expect("JSON");
    assert_eq!(small["status"]["phase"], "Bound");
    assert_eq!(small["spec"]["claimRef"]["uid"], fits["metadata"]["uid"]);
    let big = volumes.get("big").await.expect("big");
    assert_eq!(
        big.status.and_then(|s| s.phase).as_deref(),
        Some("Available")
    );
    let huge = claims.get("huge").await.expect("huge");
    assert_eq!(
        huge.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
}

/// A claim of a `WaitForFirstConsumer` class binds once a Pod mounts it.
async fn waits_for_a_pod(server: &ApiServer) {
    let client = server.client();
    let pp = PostParams::default();
    let classes: Api<StorageClass> = Api::all(client.clone());
    let class = serde_json::from_value(json!({"metadata": {"name": "local"},
        "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}))
    .expect("a valid StorageClass");
    classes.create(&pp, &class).await.expect("created");
    Api::<PersistentVolume>::all(client.clone())
        .create(&pp, &volume("local-1", "1Gi", "local"))
        .await
        .expect("created");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    claims
        .create(&pp, &claim("data", "1Gi", "local"))
        .await
        .expect("created");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let waiting = claims.get("data").await.expect("data");
    assert_eq!(waiting.spec.and_then(|s| s.volume_name), None, "no Pod yet");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "user"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}],
                 "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}}))
    .expect("a valid Pod");
    Api::<Pod>::namespaced(client, "default")
        .create(&pp, &pod)
        .await
        .expect("created");
    let data = claim_when(&claims, "data", bound).await;
    assert_eq!(data["spec"]["volumeName"], "local-1");
}

#[tokio::test]
async fn the_embedded_simulation_binds_claims() {
    let server = ApiServer::new();
    let sim = server.simulate(SimulationConfig::default());
    binds_the_smallest_fitting_volume(&server).await;
    waits_for_a_pod(&server).await;
    sim.stop();
}

#[tokio::test]
async fn the_simulation_through_a_client_binds_claims() {
    let server = ApiServer::new();
    let sim = Simulation::through(
        server.client(),
        Some("default"),
        SimulationConfig::default(),
    );
    binds_the_smallest_fitting_volume(&server).await;
    waits_for_a_pod(&server).await;
    sim.stop();
}

#[tokio::test]
async fn nothing_binds_without_a_simulation() {
    let server = ApiServer::new();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(server.client(), "default");
    Api::<PersistentVolume>::all(server.client())
        .create(&PostParams::default(), &volume("v", "1Gi", ""))
        .await
        .expect("created");
    claims
        .create(&PostParams::default(), &claim("c", "1Gi", ""))
        .await
        .expect("created");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let c = claims.get("c").await.expect("c");
    assert_eq!(c.spec.and_then(|s| s.volume_name), None);
}
