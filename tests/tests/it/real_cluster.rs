//! Built-in workloads on a real one-node cluster (issue 37), where Pods
//! really run: the statuses the real controllers and the kubelet write,
//! which the embedded server only simulates.
//!
//! Runs only when `FSM_REAL_CLUSTER_KUBECONFIG` names the kubeconfig of a
//! cluster started by `scripts/real-cluster/start` (its images, its node);
//! otherwise each test says so and returns. Each test works in a namespace
//! of its own and deletes it.
//!
//! ```sh
//! export FSM_REAL_CLUSTER_KUBECONFIG=$(scripts/real-cluster/start)
//! cargo test -p integration-tests --test it -- real_cluster::
//! ```

use std::time::Duration;

use std::path::PathBuf;

use fsm_kube::dependents::{
    Convergence, Dependent, DependentState, DependentsRuntime, DesiredSet, converge,
};
use integration_tests::TestCluster;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ConfigMap, Event, Namespace, PersistentVolume, PersistentVolumeClaim, Pod, Service,
    ServiceAccount,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The environment variable naming the real cluster's kubeconfig.
const ENV: &str = "FSM_REAL_CLUSTER_KUBECONFIG";
/// The busybox image `scripts/real-cluster/build` assembles and `start`
/// imports (scripts/real-cluster/common.sh, BUSYBOX_IMAGE).
const BUSYBOX: &str = "fsm.local/busybox:1.35";
/// What its httpd serves at `/` (from /var/www).
const PAGE: &str = "fsm busybox";
/// How long a status may take to be reached on a started cluster (a few
/// seconds each here; generous for a loaded machine).
const DEADLINE: Duration = Duration::from_secs(120);

/// The real cluster and a fresh namespace on it, or `None` (said on
/// stderr) when no cluster is named.
async fn cluster(prefix: &str) -> Option<(TestCluster, String)> {
    let path = std::env::var_os(ENV).filter(|p| !p.is_empty())?;
    let cluster = TestCluster::connect(std::path::Path::new(&path))
        .await
        .expect("the real cluster's kubeconfig");
    let ns = cluster
        .create_namespace(prefix)
        .await
        .expect("a namespace on the real cluster");
    Some((cluster, ns))
}

fn skipped(test: &str) {
    eprintln!("{test}: skipped, {ENV} is not set (scripts/real-cluster/start prints it)");
}

/// Polls `check` until it returns `Some`, or panics with `what` after
/// [`DEADLINE`].
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {DEADLINE:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn delete_namespace(cluster: &TestCluster, ns: &str) {
    let api: Api<Namespace> = Api::all(cluster.client());
    let _ = api.delete(ns, &DeleteParams::default()).await;
}

fn httpd_container() -> serde_json::Value {
    json!({
        "name": "httpd",
        "image": BUSYBOX,
        "command": ["httpd", "-f", "-p", "8080", "-h", "/var/www"],
        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
    })
}

fn deployment(name: &str, container: serde_json::Value, progress_deadline: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "progressDeadlineSeconds": progress_deadline,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [container]},
            },
        },
    }))
    .expect("a Deployment")
}

fn job(name: &str, command: &str) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": BUSYBOX, "command": [command]}],
            }},
        },
    }))
    .expect("a Job")
}

/// `GET /` over plain HTTP/1.0 from this machine; the body, if answered.
async fn http_get(addr: &str) -> Option<String> {
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        stream
            .write_all(b"GET / HTTP/1.0\r\nHost: fsm\r\n\r\n")
            .await
            .ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await.ok()?;
        let (head, body) = response.split_once("\r\n\r\n")?;
        if !(head.starts_with("HTTP/1.") && head.contains(" 200 ")) {
            return None;
        }
        Some(body.trim().to_owned())
    };
    tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .ok()
        .flatten()
}

fn condition(conditions: Option<&Vec<serde_json::Value>>, kind: &str) -> Option<(String, String)> {
    conditions?.iter().find(|c| c["type"] == kind).map(|c| {
        (
            c["status"].as_str().unwrap_or_default().to_owned(),
            c["reason"].as_str().unwrap_or_default().to_owned(),
        )
    })
}

/// A Deployment of two httpd pods rolls out (the real controllers set
/// `availableReplicas` once the kubelet reports them ready), and a Service
/// in front of it answers at its ClusterIP (kube-proxy's rules).
#[tokio::test(flavor = "multi_thread")]
async fn deployment_rolls_out_and_its_service_answers() {
    let Some((cluster, ns)) = cluster("real-cluster-web").await else {
        return skipped("deployment_rolls_out_and_its_service_answers");
    };
    let deployments: Api<Deployment> = Api::namespaced(cluster.client(), &ns);
    let services: Api<Service> = Api::namespaced(cluster.client(), &ns);
    deployments
        .create(
            &PostParams::default(),
            &deployment("web", httpd_container(), 600),
        )
        .await
        .expect("create the Deployment");
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }))
    .expect("a Service");
    let service = services
        .create(&PostParams::default(), &service)
        .await
        .expect("create the Service");

    let status = eventually("the Deployment's two available replicas", || async {
        let d = deployments.get("web").await.ok()?;
        let status = d.status?;
        (status.available_replicas == Some(2) && status.updated_replicas == Some(2))
            .then_some(status)
    })
    .await;
    assert_eq!(status.ready_replicas, Some(2));
    let conditions = serde_json::to_value(&status.conditions).expect("conditions");
    let conditions = conditions.as_array();
    assert_eq!(
        condition(conditions, "Available"),
        Some(("True".into(), "MinimumReplicasAvailable".into()))
    );
    assert_eq!(
        condition(conditions, "Progressing"),
        Some(("True".into(), "NewReplicaSetAvailable".into()))
    );

    let ip = service
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a ClusterIP");
    let body = eventually("the Service's answer at its ClusterIP", || {
        let addr = format!("{ip}:80");
        async move { http_get(&addr).await }
    })
    .await;
    assert_eq!(body, PAGE);
    delete_namespace(&cluster, &ns).await;
}

/// A Deployment whose pods exit at once never becomes available: after
/// its progress deadline the controller reports it stuck.
#[tokio::test(flavor = "multi_thread")]
async fn a_deployment_whose_pods_exit_is_reported_stuck() {
    let Some((cluster, ns)) = cluster("real-cluster-stuck").await else {
        return skipped("a_deployment_whose_pods_exit_is_reported_stuck");
    };
    let deployments: Api<Deployment> = Api::namespaced(cluster.client(), &ns);
    // Without a readiness probe a container counts as ready while it runs,
    // and `false` runs for a moment: when the kubelet reports both pods
    // in that moment the rollout is complete (Progressing True,
    // NewReplicaSetAvailable), a deadline no longer applies, and the
    // Deployment is never reported stuck (seen twice in four fresh
    // clusters). A probe that never passes keeps them unready throughout.
    let exits = json!({
        "name": "main",
        "image": BUSYBOX,
        "command": ["false"],
        "readinessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1},
    });
    deployments
        .create(&PostParams::default(), &deployment("stuck", exits, 10))
        .await
        .expect("create the Deployment");
    let status = eventually("the Deployment's ProgressDeadlineExceeded", || async {
        let status = deployments.get("stuck").await.ok()?.status?;
        let conditions = serde_json::to_value(&status.conditions).ok()?;
        (condition(conditions.as_array(), "Progressing")
            == Some(("False".into(), "ProgressDeadlineExceeded".into())))
        .then_some(status)
    })
    .await;
    assert_eq!(status.available_replicas.unwrap_or(0), 0);
    let conditions = serde_json::to_value(&status.conditions).expect("conditions");
    assert_eq!(
        condition(conditions.as_array(), "Available").map(|c| c.0),
        Some("False".into())
    );
    delete_namespace(&cluster, &ns).await;
}

/// A Job running `true` completes, one running `false` fails: the Job
/// controller's conditions from the pods' real exit codes.
#[tokio::test(flavor = "multi_thread")]
async fn jobs_complete_and_fail_on_real_exit_codes() {
    let Some((cluster, ns)) = cluster("real-cluster-jobs").await else {
        return skipped("jobs_complete_and_fail_on_real_exit_codes");
    };
    let jobs: Api<Job> = Api::namespaced(cluster.client(), &ns);
    for (name, command) in [("succeeds", "true"), ("fails", "false")] {
        jobs.create(&PostParams::default(), &job(name, command))
            .await
            .expect("create the Job");
    }
    for (name, kind, reason) in [
        ("succeeds", "Complete", ""),
        ("fails", "Failed", "BackoffLimitExceeded"),
    ] {
        let status = eventually(&format!("Job {name} {kind}"), || async {
            let status = jobs.get(name).await.ok()?.status?;
            let conditions = serde_json::to_value(&status.conditions).ok()?;
            (condition(conditions.as_array(), kind) == Some(("True".into(), reason.into())))
                .then_some(status)
        })
        .await;
        if kind == "Complete" {
            assert_eq!(status.succeeded, Some(1));
            assert!(status.completion_time.is_some());
        } else {
            assert_eq!(status.failed, Some(1));
            assert_eq!(status.succeeded.unwrap_or(0), 0);
        }
    }
    delete_namespace(&cluster, &ns).await;
}

// ------------------------------------------------- claims on real volumes

/// The node's name (scripts/real-cluster/common.sh, NODE_NAME): a local
/// PersistentVolume names it in its node affinity.
const NODE: &str = "fsm-node";

/// A directory for a test's volume under the cluster's run directory
/// (where `start` wrote the kubeconfig), created empty; `stop` removes the
/// run directory with it, the test before that.
fn volume_dir(name: &str) -> PathBuf {
    let kubeconfig = PathBuf::from(std::env::var_os(ENV).expect("the cluster's kubeconfig"));
    let dir = kubeconfig
        .parent()
        .expect("the kubeconfig's directory")
        .join("test-volumes")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {dir:?}: {e}"));
    dir
}

/// A ConfigMap in `ns` read back from the server: the dependents' owner.
async fn owner(cluster: &TestCluster, ns: &str) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), ns);
    let owner: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "owner"}})).expect("a ConfigMap");
    api.create(&PostParams::default(), &owner)
        .await
        .expect("create the owner")
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"x": "1"}}))
        .expect("a ConfigMap")
}

/// Claim `data` of class `class`: one ReadWriteOnce MiB.
fn claim(class: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {
            "storageClassName": class,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Mi"}},
        },
    }))
    .expect("a PersistentVolumeClaim")
}

/// A PersistentVolume of class `class` at `dir` on the node: `local`
/// (with the node affinity it requires) or `hostPath`.
fn volume(name: &str, class: &str, dir: &std::path::Path, local: bool) -> PersistentVolume {
    let path = dir.display().to_string();
    let mut spec = json!({
        "storageClassName": class,
        "capacity": {"storage": "1Mi"},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain",
    });
    if local {
        spec["local"] = json!({"path": path});
        spec["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE]},
        ]}]}});
    } else {
        spec["hostPath"] = json!({"path": path, "type": "Directory"});
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec}))
        .expect("a PersistentVolume")
}

/// The claim's state in `converged` is "not ready" for its phase
/// `Pending`, and `after`, which depends on it, waits for it.
fn claim_pending(converged: &Convergence, after: &str) {
    assert_eq!(
        converged.state("claim"),
        Some(&DependentState::NotReady("phase Pending".into())),
        "{}",
        converged.summary()
    );
    assert_eq!(
        converged.state(after),
        Some(&DependentState::Waiting(vec!["claim".into()])),
        "{}",
        converged.summary()
    );
    assert!(!converged.is_ready());
}

/// Converges `set` until it is ready; the last convergence.
async fn converged(
    runtime: &DependentsRuntime,
    owner: &ConfigMap,
    set: &DesiredSet,
) -> Convergence {
    eventually("the set ready", || async {
        let c = converge(runtime, owner, set).await.ok()?;
        c.is_ready().then_some(c)
    })
    .await
}

/// Deletes the namespace, then the cluster-scoped objects (the volume
/// only once its claim is gone: then nothing uses the directory), then
/// the directory.
async fn delete_volume(
    cluster: &TestCluster,
    ns: &str,
    volume: &str,
    class: Option<&str>,
    dir: &std::path::Path,
) {
    delete_namespace(cluster, ns).await;
    let volumes: Api<PersistentVolume> = Api::all(cluster.client());
    let _ = volumes.delete(volume, &DeleteParams::default()).await;
    if let Some(class) = class {
        let classes: Api<StorageClass> = Api::all(cluster.client());
        let _ = classes.delete(class, &DeleteParams::default()).await;
    }
    eventually("the volume deleted", || async {
        matches!(volumes.get_opt(volume).await, Ok(None)).then_some(())
    })
    .await;
    let _ = std::fs::remove_dir_all(dir);
}

/// A claim binds to a static PersistentVolume (a hostPath directory under
/// the cluster's run directory): converged before the volume exists, the
/// built-in readiness of the claim says pending (`phase Pending`) and what
/// depends on it waits; once the volume is created, the real
/// PersistentVolume controller binds them and the same set converges
/// ready.
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_is_pending_then_ready_once_bound_to_a_static_volume() {
    let Some((cluster, ns)) = cluster("real-cluster-claim").await else {
        return skipped("a_claim_is_pending_then_ready_once_bound_to_a_static_volume");
    };
    // A class of this run's own (no StorageClass object: binding is then
    // immediate), so no other volume matches the claim.
    let class = format!("{ns}-static");
    let owner = owner(&cluster, &ns).await;
    let runtime = DependentsRuntime::new(cluster.client()).field_manager("real-cluster-test");
    let set = DesiredSet::builder()
        .dependent(Dependent::new("claim", &claim(&class)))
        .dependent(Dependent::new("after", &config_map("after")).depends_on(["claim"]))
        .build()
        .expect("the set");

    let first = converge(&runtime, &owner, &set).await.expect("converge");
    claim_pending(&first, "after");
    // Nothing binds it while no volume matches.
    tokio::time::sleep(Duration::from_secs(2)).await;
    claim_pending(
        &converge(&runtime, &owner, &set).await.expect("converge"),
        "after",
    );

    let dir = volume_dir(&class);
    let volumes: Api<PersistentVolume> = Api::all(cluster.client());
    volumes
        .create(&PostParams::default(), &volume(&class, &class, &dir, false))
        .await
        .expect("create the PersistentVolume");
    let ready = converged(&runtime, &owner, &set).await;
    assert_eq!(ready.state("claim"), Some(&DependentState::Ready));
    assert_eq!(ready.state("after"), Some(&DependentState::Ready));
    let bound: PersistentVolumeClaim = ready.live.get("claim").expect("the live claim");
    assert_eq!(
        bound.spec.and_then(|s| s.volume_name).as_deref(),
        Some(class.as_str())
    );
    let volume = volumes.get(&class).await.expect("the volume");
    assert_eq!(
        volume.status.and_then(|s| s.phase).as_deref(),
        Some("Bound")
    );
    delete_volume(&cluster, &ns, &class, None, &dir).await;
}

/// With a StorageClass of `volumeBindingMode: WaitForFirstConsumer`, a
/// claim stays pending while a matching local volume exists (the
/// controller says it waits for a consumer), and binds once a Pod using it
/// is scheduled: the set with the Pod converges ready, the Pod ready with
/// the volume really mounted (what it writes is in the directory).
#[tokio::test(flavor = "multi_thread")]
async fn a_wait_for_first_consumer_claim_binds_once_a_pod_uses_it() {
    let Some((cluster, ns)) = cluster("real-cluster-wffc").await else {
        return skipped("a_wait_for_first_consumer_claim_binds_once_a_pod_uses_it");
    };
    let class = format!("{ns}-wffc");
    let classes: Api<StorageClass> = Api::all(cluster.client());
    let storage_class: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": class},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    }))
    .expect("a StorageClass");
    classes
        .create(&PostParams::default(), &storage_class)
        .await
        .expect("create the StorageClass");
    let dir = volume_dir(&class);
    let volumes: Api<PersistentVolume> = Api::all(cluster.client());
    volumes
        .create(&PostParams::default(), &volume(&class, &class, &dir, true))
        .await
        .expect("create the local PersistentVolume");

    let owner = owner(&cluster, &ns).await;
    let runtime = DependentsRuntime::new(cluster.client()).field_manager("real-cluster-test");
    let without_pod = DesiredSet::builder()
        .dependent(Dependent::new("claim", &claim(&class)))
        .dependent(Dependent::new("after", &config_map("after")).depends_on(["claim"]))
        .build()
        .expect("the set");
    claim_pending(
        &converge(&runtime, &owner, &without_pod)
            .await
            .expect("converge"),
        "after",
    );
    // The PersistentVolume controller has seen the claim and decided to
    // wait (its event), and the claim is still pending though a volume
    // matches.
    let events: Api<Event> = Api::namespaced(cluster.client(), &ns);
    eventually("the claim's WaitForFirstConsumer event", || async {
        let listed = events
            .list(&ListParams::default().fields("involvedObject.name=data"))
            .await
            .ok()?;
        listed
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("WaitForFirstConsumer"))
            .then_some(())
    })
    .await;
    claim_pending(
        &converge(&runtime, &owner, &without_pod)
            .await
            .expect("converge"),
        "after",
    );

    // A Pod may only be created once the namespace's ServiceAccount is.
    let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client(), &ns);
    eventually("the namespace's default ServiceAccount", || async {
        accounts.get_opt("default").await.ok().flatten().map(|_| ())
    })
    .await;
    let consumer: Pod = serde_json::from_value(json!({
        "metadata": {"name": "consumer"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "main",
                "image": BUSYBOX,
                "command": ["sh", "-c", "echo written by the pod > /data/from-pod && exec sleep 3600"],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        },
    }))
    .expect("a Pod");
    let with_pod = DesiredSet::builder()
        .dependent(Dependent::new("claim", &claim(&class)))
        .dependent(Dependent::new("consumer", &consumer))
        .dependent(Dependent::new("after", &config_map("after")).depends_on(["claim"]))
        .build()
        .expect("the set");
    let ready = converged(&runtime, &owner, &with_pod).await;
    for key in ["claim", "consumer", "after"] {
        assert_eq!(ready.state(key), Some(&DependentState::Ready), "{key}");
    }
    let bound: PersistentVolumeClaim = ready.live.get("claim").expect("the live claim");
    assert_eq!(
        bound.spec.and_then(|s| s.volume_name).as_deref(),
        Some(class.as_str())
    );
    let written = std::fs::read_to_string(dir.join("from-pod")).expect("the pod's file");
    assert_eq!(written.trim(), "written by the pod");
    delete_volume(&cluster, &ns, &class, Some(&class), &dir).await;
}
