//! [`Leadership`]: whether this replica may still act, from a local,
//! monotonic deadline that each successful Lease renewal moves on.

use std::sync::Arc;
use std::time::Duration;

use fsm_core::{Authority, AuthorityLost};
use tokio::sync::watch;
use tokio::time::Instant;

/// This replica's hold on the Lease, as the runtime consults it.
///
/// It is held until a deadline computed on this process's monotonic clock:
/// the moment the last successful renewal was *sent*, plus the trusted part
/// of the lease duration (see [`LeaseTiming`](super::LeaseTiming)). Other
/// replicas take the Lease over only after the whole duration has passed
/// since they last saw it change, which is later. So a replica that stops
/// for a while (a long pause, a frozen VM) and resumes finds its deadline
/// gone at once, and stops running handlers before another replica starts,
/// without waiting to hear from the API server.
///
/// It is an [`Authority`]: give it to the reconciler
/// (`FsmReconciler::builder(..).leadership(..)`, or `RunContext::reconciler`
/// under `run --leader-elect`) and the engine asks it before every
/// handler and after every checkpoint.
///
/// ```
/// use fsm_kube::leader::Leadership;
///
/// // Outside leader election (tests, a single replica) nothing is held.
/// let never = Leadership::never("db-operator-0");
/// assert!(!never.is_held());
/// assert!(never.remaining().is_none());
/// ```
#[derive(Clone)]
pub struct Leadership {
    deadline: watch::Receiver<Option<Instant>>,
    identity: Arc<str>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("identity", &self.identity)
            .field("remaining", &self.remaining())
            .finish()
    }
}

impl Leadership {
    /// A leadership and the sender that moves its deadline (the elector's).
    pub(crate) fn channel(identity: &str) -> (DeadlineSender, Leadership) {
        let (sender, deadline) = watch::channel(None);
        (
            DeadlineSender(sender),
            Leadership {
                deadline,
                identity: Arc::from(identity),
            },
        )
    }

    /// A leadership that is never held (for tests of code that takes one).
    #[must_use]
    pub fn never(identity: &str) -> Leadership {
        Leadership::channel(identity).1
    }

    /// Whether this replica holds the Lease now, by its own clock.
    #[must_use]
    pub fn is_held(&self) -> bool {
        self.remaining().is_some()
    }

    /// How long the hold lasts without another renewal; `None` when it is
    /// not held.
    #[must_use]
    pub fn remaining(&self) -> Option<Duration> {
        let deadline = (*self.deadline.borrow())?;
        let now = Instant::now();
        (deadline > now).then(|| deadline - now)
    }

    /// The deadline itself, if any (for waiting on it).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        *self.deadline.borrow()
    }

    /// The identity this replica holds the Lease as.
    #[must_use]
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Waits until the elector moves the deadline (a renewal, an
    /// acquisition or a loss). `false` once the elector is gone.
    pub(crate) async fn changed(&mut self) -> bool {
        self.deadline.changed().await.is_ok()
    }
}

impl Authority for Leadership {
    fn check(&self) -> Result<(), AuthorityLost> {
        if self.is_held() {
            Ok(())
        } else {
            Err(AuthorityLost::new(format!(
                "{} no longer holds the Lease (no renewal within its trusted time)",
                self.identity
            )))
        }
    }
}

/// The elector's side: moves the deadline.
#[derive(Debug)]
pub(crate) struct DeadlineSender(watch::Sender<Option<Instant>>);

impl DeadlineSender {
    /// Held until `deadline`.
    pub(crate) fn hold_until(&self, deadline: Instant) {
        self.0.send_replace(Some(deadline));
    }

    /// Not held (lost, or never won).
    pub(crate) fn release(&self) {
        if self.0.borrow().is_some() {
            self.0.send_replace(None);
        }
    }

    /// The current deadline.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        *self.0.borrow()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn held_until_the_deadline_on_the_monotonic_clock() {
        let (sender, leadership) = Leadership::channel("a");
        assert!(!leadership.is_held());
        assert!(leadership.check().is_err());
        sender.hold_until(Instant::now() + Duration::from_secs(2));
        assert!(leadership.is_held());
        assert_eq!(leadership.remaining(), Some(Duration::from_secs(2)));
        assert!(leadership.check().is_ok());
        // A pause longer than the deadline: nobody had to say anything.
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(!leadership.is_held());
        let lost = leadership.check().unwrap_err();
        assert!(
            lost.reason().contains("a no longer holds the Lease"),
            "{lost}"
        );
    }

    #[tokio::test]
    async fn a_release_is_seen_by_every_clone() {
        let (sender, leadership) = Leadership::channel("a");
        let mut watcher = leadership.clone();
        sender.hold_until(Instant::now() + Duration::from_secs(60));
        assert!(watcher.changed().await);
        assert!(watcher.is_held());
        sender.release();
        assert!(watcher.changed().await);
        assert!(!leadership.is_held());
        drop(sender);
        assert!(!watcher.changed().await, "the elector is gone");
    }
}
