//! Leader election with a `coordination.k8s.io/v1` Lease: run the
//! controller only while this replica holds the Lease, and let the runtime
//! stop running handlers the moment the hold can no longer be trusted.
//!
//! # How the hold is kept
//! - The holder renews the Lease every [`LeaseTiming::renew_every`] (a
//!   third of the duration by default), each write conditional on the
//!   version it read.
//! - Each successful renewal lets the holder act for
//!   [`LeaseTiming::trusted_for`] (two thirds of the duration) after the
//!   moment the renewal was *sent*, on its monotonic clock: that is its
//!   [`Leadership`].
//! - Another replica takes over only after it has seen the Lease unchanged
//!   for the whole [`LeaseTiming::duration`], on its own clock.
//!
//! So a holder stops acting a third of the duration before anyone else may
//! start, even when it was paused (a long stall, a frozen VM) and resumes
//! with timers due: its deadline is gone when it wakes, without a word from
//! the API server. What no Lease can stop is a pause between the last check
//! and a call already on its way; see the semantics guide on idempotency
//! keys.

mod elector;
mod leadership;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use tokio::time::Instant;

pub use leadership::Leadership;

use elector::Elector;
pub(crate) use elector::Fingerprint;

/// Why leader election stopped.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The API server refused access to the Lease (401/403): the
    /// operator's RBAC lacks `get`, `create` or `update` on `leases`.
    #[error(
        "access to the Lease {name} was refused; grant get, create and update on \
         coordination.k8s.io leases (the CLI's `rbac --leader-elect` prints the Role)"
    )]
    Forbidden {
        /// The Lease's name.
        name: String,
        /// The API's answer.
        #[source]
        source: kube::Error,
    },
}

/// How long a Lease lasts and how its holder keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTiming {
    /// The Lease's `leaseDurationSeconds`: another replica takes over when
    /// it has seen the Lease unchanged this long. Whole seconds, at least 1.
    pub duration: Duration,
    /// How often the holder renews, and a follower looks at most.
    pub renew_every: Duration,
    /// How long after sending a renewal that succeeded the holder acts.
    /// Must stay well under `duration`: the difference is the margin for a
    /// slow answer and for clocks running at slightly different rates.
    pub trusted_for: Duration,
}

impl LeaseTiming {
    /// The timing of a Lease of `duration` (rounded up to whole seconds, at
    /// least one): renewed every third of it, trusted for two thirds.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fsm_kube::leader::LeaseTiming;
    ///
    /// let timing = LeaseTiming::new(Duration::from_secs(15));
    /// assert_eq!(timing.renew_every, Duration::from_secs(5));
    /// assert_eq!(timing.trusted_for, Duration::from_secs(10));
    /// ```
    #[must_use]
    pub fn new(duration: Duration) -> LeaseTiming {
        let whole = duration
            .as_secs()
            .saturating_add(u64::from(duration.subsec_nanos() > 0))
            .max(1);
        let duration = Duration::from_secs(whole);
        LeaseTiming {
            duration,
            renew_every: duration / 3,
            trusted_for: duration * 2 / 3,
        }
    }

    /// `duration` in the Lease's field.
    fn duration_seconds(&self) -> i32 {
        i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX)
    }
}

/// Runs `controller(leadership)` while this replica holds the Lease
/// `lease_name` in `namespace`, as `identity`; aborts it when the hold
/// lapses, and starts a fresh one when the Lease is won again. Never
/// returns unless access to the Lease is refused; see
/// [`run_while_leader_until`] to stop on a signal and hand over at once.
///
/// Give the [`Leadership`] to the reconciler
/// ([`ReconcilerBuilder::leadership`](crate::ReconcilerBuilder::leadership);
/// the operator CLI's [`RunContext::reconciler`](crate::cli::RunContext::reconciler)
/// does it under `--leader-elect`) so that
/// the engine runs no handler once the hold lapses, even in the moments
/// before the controller is aborted.
///
/// A `lease_duration` under 2 s is raised to 2 s.
///
/// # Guarantees
/// At most one replica acts at a time, as far as the Lease and the
/// replicas' clocks say (see the module docs). A transition cannot be
/// committed twice even across a handover, since every commit is
/// conditional on the version it was decided from.
///
/// # Errors
/// [`LeaderError::Forbidden`].
pub async fn run_while_leader<C, Fut>(
    client: Client,
    namespace: &str,
    lease_name: &str,
    identity: &str,
    lease_duration: Duration,
    controller: C,
) -> Result<(), LeaderError>
where
    C: FnMut(Leadership) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    run_while_leader_until(
        client,
        namespace,
        lease_name,
        identity,
        lease_duration,
        controller,
        std::future::pending(),
    )
    .await
}

/// As [`run_while_leader`], until `shutdown` completes (a SIGTERM, say):
/// then this replica stops acting, aborts its controller, and gives the
/// Lease up if it holds it, so that another replica takes over at its next
/// look (within a third of the duration) instead of waiting the whole
/// duration out, as after a crash. Returns `Ok` once that is done.
///
/// ```no_run
/// # async fn demo(client: kube::Client) -> Result<(), fsm_kube::leader::LeaderError> {
/// use std::time::Duration;
/// use fsm_kube::leader::run_while_leader_until;
///
/// run_while_leader_until(
///     client,
///     "ops",
///     "db-operator-leader",
///     "db-operator-0",
///     Duration::from_secs(15),
///     |leadership| async move {
///         // Build the reconciler with `leadership` and run the Controller.
///         # drop(leadership);
///     },
///     async {
///         let _ = tokio::signal::ctrl_c().await;
///     },
/// )
/// .await
/// # }
/// ```
///
/// # Errors
/// [`LeaderError::Forbidden`], while running. Giving the Lease up on the
/// way out is best effort: a failure is logged, and the Lease then expires
/// as after a crash.
pub async fn run_while_leader_until<C, Fut, S>(
    client: Client,
    namespace: &str,
    lease_name: &str,
    identity: &str,
    lease_duration: Duration,
    controller: C,
    shutdown: S,
) -> Result<(), LeaderError>
where
    C: FnMut(Leadership) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
    S: Future<Output = ()>,
{
    run_while_holding(
        client,
        namespace,
        lease_name,
        identity,
        lease_duration,
        BTreeMap::new(),
        controller,
        shutdown,
    )
    .await
}

/// As [`run_while_leader_until`], with `labels` written on the Lease (a
/// shard Lease carries its ring's label, for the assigner to list).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_while_holding<C, Fut, S>(
    client: Client,
    namespace: &str,
    lease_name: &str,
    identity: &str,
    lease_duration: Duration,
    labels: BTreeMap<String, String>,
    mut controller: C,
    shutdown: S,
) -> Result<(), LeaderError>
where
    C: FnMut(Leadership) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
    S: Future<Output = ()>,
{
    let timing = LeaseTiming::new(lease_duration.max(Duration::from_secs(2)));
    let (hold, mut leadership) = Leadership::channel(identity);
    let api: Api<Lease> = Api::namespaced(client, namespace);
    let mut elector = Elector::new(api, lease_name, identity, timing).with_labels(labels);
    let ended = {
        let elect = elector.run(&hold);
        tokio::pin!(elect);
        tokio::pin!(shutdown);
        // Aborted when dropped, so that cancelling this future (or the task
        // it runs in) stops the controller too.
        let mut running: Option<AbortOnDrop> = None;
        loop {
            match (leadership.is_held(), running.is_some()) {
                (true, false) => {
                    tracing::info!(
                        lease = lease_name,
                        identity,
                        "leading: starting the controller"
                    );
                    running = Some(AbortOnDrop(tokio::spawn(controller(leadership.clone()))));
                }
                (false, true) => {
                    tracing::warn!(
                        lease = lease_name,
                        identity,
                        "the Lease is no longer held: stopping the controller"
                    );
                    running = None;
                }
                _ => {}
            }
            let lapses = leadership.deadline().filter(|d| *d > Instant::now());
            tokio::select! {
                // First: when the elector stops, its error must not be lost
                // to the closed channel it leaves behind.
                biased;
                result = &mut elect => break result,
                () = &mut shutdown => {
                    // Stop acting before anything else: a handler still
                    // running sees the hold gone at its next check.
                    hold.release();
                    drop(running.take());
                    break Ok(());
                }
                alive = leadership.changed() => {
                    if !alive {
                        break Ok(());
                    }
                }
                () = sleep_until(lapses) => {}
            }
        }
    };
    if ended.is_ok() {
        match elector.release().await {
            Ok(()) => tracing::info!(
                lease = lease_name,
                identity,
                "stopped; the Lease is free for another replica"
            ),
            Err(error) => tracing::warn!(
                lease = lease_name,
                identity,
                %error,
                "stopped; the Lease could not be given up and expires on its own"
            ),
        }
    }
    ended
}

/// Sleeps until `deadline`; forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// A spawned task that is aborted when this handle is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
