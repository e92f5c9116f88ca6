//! Injectable wall-clock time, so that timeouts and backoff are testable.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

pub use jiff::Timestamp;

/// The source of "now" for the engine: entry times, retry deadlines and
/// state timeouts are all measured with it and persisted in the record, so
/// they survive restarts.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that moves only when told to. Clones share the same time.
///
/// ```
/// use std::time::Duration;
/// use fsm_core::{Clock, ManualClock, Timestamp};
///
/// let t0: Timestamp = "2026-01-01T00:00:00Z".parse()?;
/// let clock = ManualClock::at(t0);
/// clock.advance(Duration::from_secs(90));
/// assert_eq!(clock.now().to_string(), "2026-01-01T00:01:30Z");
/// # Ok::<(), jiff::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ManualClock {
    now: Arc<Mutex<Timestamp>>,
}

impl ManualClock {
    /// A clock standing at `t`.
    pub fn at(t: Timestamp) -> Self {
        ManualClock {
            now: Arc::new(Mutex::new(t)),
        }
    }

    /// Moves the clock forward by `d` (saturating at the largest timestamp).
    pub fn advance(&self, d: Duration) {
        let mut now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
        *now = add(*now, d);
    }

    /// Sets the clock to `t`, forwards or backwards.
    pub fn set(&self, t: Timestamp) {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner) = t;
    }
}

impl Default for ManualClock {
    /// A clock at the Unix epoch.
    fn default() -> Self {
        ManualClock::at(Timestamp::UNIX_EPOCH)
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `t + d`, saturating at the largest representable timestamp.
pub(crate) fn add(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

/// How long from `from` until `to`, zero when `to` is not later.
pub(crate) fn until(from: Timestamp, to: Timestamp) -> Duration {
    Duration::try_from(to.duration_since(from)).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_clones_share_time() {
        let a = ManualClock::default();
        let b = a.clone();
        a.advance(Duration::from_secs(5));
        assert_eq!(b.now(), add(Timestamp::UNIX_EPOCH, Duration::from_secs(5)));
    }

    #[test]
    fn until_is_never_negative() {
        let t0 = Timestamp::UNIX_EPOCH;
        let t1 = add(t0, Duration::from_secs(3));
        assert_eq!(until(t0, t1), Duration::from_secs(3));
        assert_eq!(until(t1, t0), Duration::ZERO);
    }

    #[test]
    fn add_saturates() {
        assert_eq!(add(Timestamp::MAX, Duration::from_secs(1)), Timestamp::MAX);
    }
}
