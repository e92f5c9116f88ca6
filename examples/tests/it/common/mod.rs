//! The examples' integration tests: the embedded API server (or the real
//! kube-apiserver named by `FSM_REAL_APISERVER_KUBECONFIG`, see
//! `operator_fsm::testkit::TestCluster::from_env`), the simulated workload
//! controllers (`operator_fsm::testkit::simulation`) and real `Controller`s, polled
//! with a bounded `eventually`. Each test works in a namespace of its own,
//! to which its operators and simulation are scoped.

#![allow(dead_code)]

use std::time::Duration;

use examples::demo::observe::{Kind, read_record};
use kube::{Client, CustomResourceExt};
use operator_fsm::ReconcilerOptions;
use operator_fsm::core::StateRecord;
use operator_fsm::testkit::TestCluster;
use operator_fsm::testkit::simulation::{Simulation, SimulationConfig};
use tokio::task::JoinHandle;

/// How long a wait may take: generous, for a real kube-apiserver on a
/// busy machine.
const DEADLINE: Duration = Duration::from_secs(60);

/// A server with the CRDs, a namespace of the test's own, a simulation and
/// the operators started on it; everything stops when it is dropped.
pub struct Env {
    pub cluster: TestCluster,
    pub client: Client,
    /// The test's namespace.
    pub ns: String,
    simulation: Simulation,
    tasks: Vec<JoinHandle<()>>,
}

impl Env {
    pub async fn new(simulation: SimulationConfig) -> Env {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let cluster = TestCluster::from_env().await.unwrap();
        for crd in [
            examples::mutable_jar::Keycloak::crd(),
            examples::integration::Integration::crd(),
            examples::database::Database::crd(),
            examples::webpage::WebPage::crd(),
        ] {
            cluster.install_crd(&crd).await.unwrap();
        }
        let ns = cluster.create_namespace("examples").await.unwrap();
        let client = cluster.client();
        // The real server here runs no Job or Deployment controllers either
        // (scripts/real-apiserver/start), so the simulation plays them on
        // both: inside the embedded server (a fresh one per test), through
        // the client on the real one.
        let simulation = match cluster.embedded_server() {
            Some(server) => server.simulate(simulation),
            None => Simulation::through(client.clone(), Some(&ns), simulation),
        };
        Env {
            cluster,
            client,
            ns,
            simulation,
            tasks: Vec::new(),
        }
    }

    /// The namespace, as operators' `run_in` take it.
    pub fn scope(&self) -> Option<String> {
        Some(self.ns.clone())
    }

    /// Runs `operator` until the environment is dropped.
    pub fn spawn(&mut self, operator: impl Future<Output = ()> + Send + 'static) {
        self.tasks.push(tokio::spawn(operator));
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.simulation.stop();
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Quick workloads: Jobs finish and Deployments roll out in 200 ms.
pub fn quick_simulation() -> SimulationConfig {
    SimulationConfig {
        job_duration: Duration::from_millis(200),
        rollout_delay: Duration::from_millis(200),
        job_rules: Vec::new(),
    }
}

pub fn options() -> ReconcilerOptions {
    ReconcilerOptions::default()
        .poll_interval(Duration::from_secs(1))
        .error_requeue(Duration::from_millis(100))
}

/// Waits (at most 60 s) until `probe` answers `Some`.
pub async fn eventually<T, Fut>(what: &str, mut probe: impl FnMut() -> Fut) -> T
where
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
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

/// Waits (at most 60 s) until `name` (in the test's namespace) rests in
/// `state` (not compensating, no retry due) and the record satisfies
/// `also`; panics with the last record seen.
pub async fn wait_for(
    env: &Env,
    kind: Kind,
    name: &str,
    state: &str,
    also: impl Fn(&StateRecord) -> bool,
) -> StateRecord {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let mut last = None;
    loop {
        if let Ok(Some(record)) = read_record(&env.client, &env.ns, kind, name).await {
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
