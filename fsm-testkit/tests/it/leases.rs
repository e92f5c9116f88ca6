//! Leader election with `kube-lease-manager` (server-side apply to take a
//! Lease, strategic merge patches to renew and release it) against the
//! server: one leader among contenders, handover once the holder stops
//! renewing. Lease durations are short (2 s) and every wait is bounded.

use crate::common;

use std::time::{Duration, Instant};

use common::within;
use fsm_testkit::ApiServer;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::watch::Receiver;

const LEASE: &str = "leader";

async fn contender(server: &ApiServer, identity: &str) -> LeaseManager {
    LeaseManagerBuilder::new(server.client(), LEASE)
        .with_namespace("default")
        .with_identity(identity)
        .with_duration(2)
        .with_grace(1)
        .build()
        .await
        .unwrap()
}

/// Waits until exactly one of `channels` reports leadership; returns its index.
async fn one_leader(channels: &mut [Receiver<bool>]) -> usize {
    loop {
        let leaders: Vec<usize> = channels
            .iter()
            .enumerate()
            .filter(|(_, c)| *c.borrow())
            .map(|(i, _)| i)
            .collect();
        assert!(leaders.len() <= 1, "two leaders at once: {leaders:?}");
        if let [one] = leaders[..] {
            return one;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn holder(server: &ApiServer) -> (Option<String>, Option<i32>) {
    let leases: Api<Lease> = Api::default_namespaced(server.client());
    let spec = leases.get(LEASE).await.unwrap().spec.unwrap_or_default();
    (spec.holder_identity, spec.lease_transitions)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_contenders_one_leader_then_handover() {
    let server = ApiServer::new();
    let (a, b) = tokio::join!(contender(&server, "a"), contender(&server, "b"));
    let ((rx_a, task_a), (rx_b, task_b)) = tokio::join!(a.watch(), b.watch());
    let mut channels = [rx_a, rx_b];
    let mut tasks = [Some(task_a), Some(task_b)];
    let ids = ["a", "b"];

    let leader = within(10, one_leader(&mut channels)).await;
    assert_eq!(holder(&server).await.0.as_deref(), Some(ids[leader]));

    // Over more than two lease durations the leader renews and keeps the
    // lease; the other never takes it.
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let now: Vec<bool> = channels.iter().map(|c| *c.borrow()).collect();
        assert_eq!(now.iter().filter(|l| **l).count(), 1, "{now:?}");
        assert!(now[leader], "the leader lost the lease while renewing");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, transitions) = holder(&server).await;

    // The leader stops renewing without releasing (it crashed): once the
    // lease expires, the other takes it over.
    if let Some(task) = tasks[leader].take() {
        task.abort();
    }
    let other = 1 - leader;
    let started = Instant::now();
    within(15, async {
        while !*channels[other].borrow() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "taken over before the lease expired: {:?}",
        started.elapsed()
    );
    let (now_holder, now_transitions) = holder(&server).await;
    assert_eq!(now_holder.as_deref(), Some(ids[other]));
    assert!(
        now_transitions > transitions,
        "{now_transitions:?} after {transitions:?}"
    );

    // A graceful release by the new leader frees the lease.
    drop(channels);
    if let Some(task) = tasks[other].take() {
        within(10, task).await.unwrap().unwrap();
    }
    assert_eq!(holder(&server).await.0, None);
}
