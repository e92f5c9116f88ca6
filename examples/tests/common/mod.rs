//! The examples' integration tests: the embedded API server, the workload
//! simulator and real `Controller`s, polled with a bounded `eventually`.

#![allow(dead_code)]

use std::time::Duration;

use examples::demo::observe::{Kind, read_record};
use examples::sim::{SimulatorConfig, WorkloadSimulator};
use examples::support::install_crd;
use fsm_core::StateRecord;
use fsm_kube::ReconcilerOptions;
use fsm_testkit::ApiServer;
use kube::{Client, CustomResourceExt};
use tokio::task::JoinHandle;

pub const NS: &str = "default";

/// A server with the CRDs, a simulator and the operators started on it;
/// everything stops when it is dropped.
pub struct Env {
    pub server: ApiServer,
    pub client: Client,
    tasks: Vec<JoinHandle<()>>,
}

impl Env {
    pub async fn new(simulator: SimulatorConfig) -> Env {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let server = ApiServer::new();
        let client = server.client();
        for crd in [
            examples::mutable_jar::Keycloak::crd(),
            examples::integration::Integration::crd(),
            examples::database::Database::crd(),
        ] {
            install_crd(&client, &crd).await.unwrap();
        }
        let simulator = WorkloadSimulator::new(client.clone(), simulator).spawn();
        Env {
            server,
            client,
            tasks: vec![simulator],
        }
    }

    /// Runs `operator` until the environment is dropped.
    pub fn spawn(&mut self, operator: impl Future<Output = ()> + Send + 'static) {
        self.tasks.push(tokio::spawn(operator));
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Quick workloads: Jobs finish and Deployments roll out in 200 ms.
pub fn quick_simulator() -> SimulatorConfig {
    SimulatorConfig {
        job_duration: Duration::from_millis(200),
        rollout_duration: Duration::from_millis(200),
        tick: Duration::from_millis(50),
        job_rules: Vec::new(),
    }
}

pub fn options() -> ReconcilerOptions {
    ReconcilerOptions {
        poll_interval: Duration::from_secs(1),
        error_requeue: Duration::from_millis(100),
        ..ReconcilerOptions::default()
    }
}

/// Waits (at most 30 s) until `probe` answers `Some`.
pub async fn eventually<T, Fut>(what: &str, mut probe: impl FnMut() -> Fut) -> T
where
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (at most 30 s) until `name` rests in `state` (not compensating, no
/// retry due) and the record satisfies `also`; panics with the last record
/// seen.
pub async fn wait_for(
    client: &Client,
    kind: Kind,
    name: &str,
    state: &str,
    also: impl Fn(&StateRecord) -> bool,
) -> StateRecord {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut last = None;
    loop {
        if let Ok(Some(record)) = read_record(client, NS, kind, name).await {
            if record.state == state
                && !record.is_unwinding()
                && record.next_attempt_at.is_none()
                && also(&record)
            {
                return record;
            }
            last = Some(record);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {} {name} in {state}; last record: {last:#?}",
            kind.name()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
