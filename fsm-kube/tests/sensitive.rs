//! A `sensitive` state's data never appears in logs, events, metrics,
//! conditions or error messages: only in the Secret that stores it. On the
//! embedded API server, or the real kube-apiserver named by
//! `FSM_REAL_APISERVER_KUBECONFIG`.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fsm_kube::prelude::*;
use fsm_kube::{FsmReconciler, SecretStore};
use fsm_testkit::TestCluster;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::{Controller, watcher};
use kube::{CustomResource, CustomResourceExt};
use prometheus_client::registry::Registry;

const PASSWORD: &str = "hunter2-very-secret";

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "test.operator-fsm.io",
    version = "v1",
    kind = "Vault",
    namespaced
)]
#[kube(status = "VaultStatus")]
struct VaultSpec {
    size: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
struct VaultStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fsm: Option<FsmStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    conditions: Option<Vec<Condition>>,
}

#[derive(Debug, thiserror::Error)]
enum VaultError {
    #[error("the vault is sealed")]
    Sealed,
}
impl Classify for VaultError {
    fn class(&self) -> ErrorClass {
        ErrorClass::retry_after(Duration::from_millis(20))
    }
}

struct Ctx {
    sealed_once: Mutex<bool>,
}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Vault, context = Ctx, error = VaultError)]
enum VaultState {
    #[fsm(initial, handler = generate, next(Holding))]
    Pending,
    #[fsm(sensitive, handler = hand_over, next(Open))]
    Holding { password: String },
    #[fsm(final, ready)]
    Open,
    #[fsm(failed)]
    Failed,
}

async fn generate(_: &mut Step<'_, VaultState>) -> Result<Transition<VaultState>, VaultError> {
    Ok(Transition::next(VaultState::Holding {
        password: PASSWORD.to_owned(),
    }))
}

async fn hand_over(
    cx: &mut Step<'_, VaultState>,
    password: &str,
) -> Result<Transition<VaultState>, VaultError> {
    assert_eq!(password, PASSWORD);
    let mut sealed = cx.context().sealed_once.lock().unwrap();
    if !*sealed {
        *sealed = true;
        return Err(VaultError::Sealed);
    }
    Ok(Transition::next(VaultState::Open))
}

/// Everything the process logs, at the most verbose level of our crates.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sensitive_data_stays_in_the_secret() {
    let logs = Captured::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_env_filter("fsm_core=trace,fsm_kube=trace,kube_runtime=debug")
        .with_writer(move || writer.clone())
        .try_init()
        .unwrap();

    let cluster = TestCluster::from_env().await.unwrap();
    cluster.install_crd(&Vault::crd()).await.unwrap();
    let ns = cluster
        .create_namespace("fsm-kube-sensitive")
        .await
        .unwrap();
    let client = cluster.client();

    let mut registry = Registry::default();
    let metrics = FsmMetrics::new(&mut registry);
    let fsm =
        FsmReconciler::<VaultState>::builder(client.clone(), SecretStore::new(client.clone()))
            .metrics(metrics)
            .build();
    let ctx = Arc::new(Ctx {
        sealed_once: Mutex::new(false),
    });
    let controller = tokio::spawn(
        Controller::new(
            Api::<Vault>::namespaced(client.clone(), &ns),
            watcher::Config::default(),
        )
        .run(fsm.reconcile(), fsm.error_policy(), ctx)
        .for_each(|_| async {}),
    );
    let vaults: Api<Vault> = Api::namespaced(client.clone(), &ns);
    vaults
        .create(
            &PostParams::default(),
            &Vault::new("v", VaultSpec { size: 1 }),
        )
        .await
        .unwrap();

    // Generous: on the real server this runs right after the other suites,
    // while its controllers still clean up their namespaces.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let vault = loop {
        let v = vaults.get("v").await.unwrap();
        let ready = v
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        if ready {
            break v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the vault never opened"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // The condition is written within the commit; the metrics are counted
    // once the reconcile returns, a moment later.
    let opened =
        r#"operator_fsm_transitions_total{machine="VaultState",from="Holding",to="Open"} 1"#;
    while !encode_metrics(&registry).unwrap().contains(opened) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the transition to Open was never counted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    controller.abort();

    // Nothing runs on deletion, so the runtime added no finalizer.
    assert!(vault.metadata.finalizers.as_ref().is_none_or(Vec::is_empty));

    // The Secret holds the data, as it should.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let record = secrets
        .get(&record_object_name_for::<VaultState>("v"))
        .await
        .unwrap();
    let text = String::from_utf8(record.data.unwrap()["record"].0.clone()).unwrap();
    assert!(text.contains("\"state\":\"Open\""), "{text}");

    // Nowhere else.
    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("Holding"),
        "the logs did cover the sensitive state"
    );
    assert!(!logs.contains(PASSWORD), "a log line carries the password");
    let status = serde_json::to_string(&vault.status).unwrap();
    assert!(!status.contains(PASSWORD));
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &ns);
    let events =
        serde_json::to_string(&events.list(&ListParams::default()).await.unwrap().items).unwrap();
    assert!(
        events.contains("the vault is sealed"),
        "the retry was reported: {events}"
    );
    assert!(!events.contains(PASSWORD));
    let metrics = encode_metrics(&registry).unwrap();
    assert!(metrics.contains("operator_fsm_retries_total"), "{metrics}");
    assert!(
        metrics.contains(
            r#"operator_fsm_transitions_total{machine="VaultState",from="Holding",to="Open"} 1"#
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"operator_fsm_objects{machine="VaultState",state="Open"} 1"#),
        "{metrics}"
    );
    assert!(!metrics.contains(PASSWORD));
}

/// The registry's metrics in the Prometheus text format.
fn encode_metrics(
    registry: &prometheus_client::registry::Registry,
) -> Result<String, std::fmt::Error> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)?;
    Ok(text)
}
