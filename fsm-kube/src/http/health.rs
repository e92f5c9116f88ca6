//! The operator's health: `/healthz` (the process answers) and `/readyz`
//! (nothing holds readiness back), served next to `/metrics` by
//! [`serve`](super::serve).
//!
//! Readiness is a set of holds: each [`NotReady`] guard names a reason the
//! operator is not ready yet, and `/readyz` answers 200 once none is alive.
//! `run` (the CLI) holds readiness until the operator's resource has been
//! listed once, and [`Health::ready_when_synced`] holds it until a
//! controller's watch has synced.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How often [`Health::ready_when_synced`] looks at its store again.
const SYNC_POLL: Duration = Duration::from_millis(200);

/// Whether the operator is ready: clone it freely, every clone sees the
/// same holds.
///
/// ```
/// use fsm_kube::http::Health;
///
/// let health = Health::new();
/// assert!(health.is_ready());
/// let hold = health.hold("the watch has not synced");
/// assert_eq!(health.not_ready_reasons(), ["the watch has not synced"]);
/// drop(hold);
/// assert!(health.is_ready());
/// ```
#[derive(Clone, Debug, Default)]
pub struct Health {
    holds: Arc<Holds>,
}

#[derive(Debug, Default)]
struct Holds {
    next: AtomicU64,
    reasons: Mutex<BTreeMap<u64, String>>,
}

impl Health {
    /// Ready, with nothing held back.
    #[must_use]
    pub fn new() -> Self {
        Health::default()
    }

    /// Holds readiness back, for `reason`, until the returned guard is
    /// dropped (or [`NotReady::release`]d).
    #[must_use = "readiness is held only while the guard lives"]
    pub fn hold(&self, reason: impl Into<String>) -> NotReady {
        let id = self.holds.next.fetch_add(1, Ordering::Relaxed);
        self.reasons().insert(id, reason.into());
        NotReady {
            holds: self.holds.clone(),
            id,
        }
    }

    /// Whether nothing holds readiness back.
    pub fn is_ready(&self) -> bool {
        self.reasons().is_empty()
    }

    /// Why the operator is not ready, oldest hold first; empty when ready.
    pub fn not_ready_reasons(&self) -> Vec<String> {
        self.reasons().values().cloned().collect()
    }

    /// Holds readiness back until `store` (a controller's,
    /// `Controller::store()`) has its first complete list of objects. The
    /// hold is released too when the store's writer is dropped without
    /// syncing (the controller stopped, as when a replica loses the Lease:
    /// it is then a ready follower again).
    ///
    /// Spawns a task on the current tokio runtime.
    pub fn ready_when_synced<K>(&self, store: kube::runtime::reflector::Store<K>)
    where
        K: kube::runtime::reflector::Lookup + Clone + Send + Sync + 'static,
        K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
    {
        let hold = self.hold("the controller's watch has not synced yet");
        tokio::spawn(async move {
            // kube-runtime 5's readiness signal wakes only the waiter that
            // polled it last (a oneshot receiver shared behind a mutex), and
            // the controller waits on it too: poll again now and then
            // rather than wait for a wake-up that may go to the controller.
            loop {
                match tokio::time::timeout(SYNC_POLL, store.wait_until_ready()).await {
                    Ok(Ok(())) => break,
                    Ok(Err(_)) => {
                        tracing::debug!("the controller stopped before its watch synced");
                        break;
                    }
                    Err(_) => {}
                }
            }
            hold.release();
        });
    }

    fn reasons(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, String>> {
        self.holds
            .reasons
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// One reason the operator is not ready, for as long as it lives
/// ([`Health::hold`]).
#[derive(Debug)]
pub struct NotReady {
    holds: Arc<Holds>,
    id: u64,
}

impl NotReady {
    /// Releases the hold (the same as dropping it).
    pub fn release(self) {}
}

impl Drop for NotReady {
    fn drop(&mut self) {
        self.holds
            .reasons
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
    }
}

/// The routes `GET /healthz` (200 `ok` while the process serves) and
/// `GET /readyz` (200 `ok`, or 503 with the reasons, one a line).
pub fn health_router(health: Health) -> axum::Router {
    use axum::http::StatusCode;
    use axum::routing::get;

    axum::Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let reasons = health.not_ready_reasons();
                async move {
                    if reasons.is_empty() {
                        (StatusCode::OK, "ok\n".to_owned())
                    } else {
                        let mut body = String::from("not ready:\n");
                        for reason in reasons {
                            body.push_str(&format!("- {reason}\n"));
                        }
                        (StatusCode::SERVICE_UNAVAILABLE, body)
                    }
                }
            }),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_waits_for_every_hold() {
        let health = Health::new();
        let first = health.hold("first");
        let second = health.clone().hold("second");
        assert_eq!(health.not_ready_reasons(), ["first", "second"]);
        first.release();
        assert!(!health.is_ready());
        assert_eq!(health.not_ready_reasons(), ["second"]);
        drop(second);
        assert!(health.is_ready());
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_that_syncs_or_whose_writer_goes_releases_its_hold() {
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::runtime::reflector::store;
        use kube::runtime::watcher::Event;

        let health = Health::new();
        let (reader, mut writer) = store::<ConfigMap>();
        health.ready_when_synced(reader);
        assert!(!health.is_ready());
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        wait_until(|| health.is_ready()).await;

        let (reader, writer) = store::<ConfigMap>();
        health.ready_when_synced(reader);
        assert!(!health.is_ready());
        drop(writer);
        wait_until(|| health.is_ready()).await;
    }

    /// Lets the spawned task run until `condition` holds (on tokio's
    /// paused clock, which moves on whenever every task waits).
    async fn wait_until(condition: impl Fn() -> bool) {
        for _ in 0..1_000 {
            if condition() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the condition never held");
    }
}
