//! Injectable wall-clock time, so that timeouts and backoff are testable.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

pub use jiff::Timestamp;

use crate::future::BoxFuture;

/// The source of "now" for the engine: entry times, retry deadlines and
/// state timeouts are all measured with it and persisted in the record, so
/// they survive restarts. The engine also waits on it: a handler's
/// `attempt_timeout` ends when [`Clock::sleep`] does.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Timestamp;

    /// A future that completes once `duration` has passed on this clock,
    /// counted from this call. The engine races a handler against it to
    /// enforce the state's `attempt_timeout`.
    ///
    /// The default waits on tokio's timer (real time, or tokio's paused
    /// time under `#[tokio::test(start_paused = true)]`); a clock whose
    /// time is virtual overrides it, as [`ManualClock`] does.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// The system's wall clock; it sleeps on tokio's timer.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that moves only when told to. Clones share the same time.
///
/// Its [`Clock::sleep`] is virtual too: the sleep ends when the clock is
/// moved (by [`ManualClock::advance`], [`ManualClock::set`] or
/// [`ManualClock::advance_to_next_sleep`]) to or past its deadline, never
/// by itself. The [`Harness`](crate::Harness) moves it when a reconcile
/// has nothing else to wait for, so an `attempt_timeout` elapses in
/// virtual time.
///
/// ```
/// use std::time::Duration;
/// use fsm_core::{Clock, ManualClock, Timestamp};
///
/// let t0: Timestamp = "2026-01-01T00:00:00Z".parse()?;
/// let clock = ManualClock::at(t0);
/// clock.advance(Duration::from_secs(90));
/// assert_eq!(clock.now().to_string(), "2026-01-01T00:01:30Z");
///
/// // A sleep ends when the clock reaches its deadline.
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let nap = clock.sleep(Duration::from_secs(30));
/// assert_eq!(clock.next_sleep(), Some("2026-01-01T00:02:00Z".parse().unwrap()));
/// clock.advance_to_next_sleep();
/// nap.await;
/// assert_eq!(clock.now().to_string(), "2026-01-01T00:02:00Z");
/// # });
/// # Ok::<(), jiff::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ManualClock {
    inner: Arc<Mutex<Manual>>,
}

/// A manual clock's time and the sleeps waiting on it.
#[derive(Debug)]
struct Manual {
    now: Timestamp,
    sleepers: Vec<Sleeper>,
    next_id: u64,
}

/// One pending [`ManualSleep`].
#[derive(Debug)]
struct Sleeper {
    id: u64,
    deadline: Timestamp,
    waker: Option<Waker>,
}

impl ManualClock {
    /// A clock standing at `t`.
    pub fn at(t: Timestamp) -> Self {
        ManualClock {
            inner: Arc::new(Mutex::new(Manual {
                now: t,
                sleepers: Vec::new(),
                next_id: 0,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Manual> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves the clock forward by `d` (saturating at the largest timestamp),
    /// ending the sleeps it passes.
    pub fn advance(&self, d: Duration) {
        let mut manual = self.lock();
        manual.now = add(manual.now, d);
        let due = manual.due();
        drop(manual);
        due.into_iter().for_each(Waker::wake);
    }

    /// Sets the clock to `t`, forwards or backwards, ending the sleeps whose
    /// deadline it reaches.
    pub fn set(&self, t: Timestamp) {
        let mut manual = self.lock();
        manual.now = t;
        let due = manual.due();
        drop(manual);
        due.into_iter().for_each(Waker::wake);
    }

    /// The earliest deadline of the pending sleeps that is still ahead of
    /// the clock, if any.
    pub fn next_sleep(&self) -> Option<Timestamp> {
        let manual = self.lock();
        manual
            .sleepers
            .iter()
            .map(|s| s.deadline)
            .filter(|d| *d > manual.now)
            .min()
    }

    /// Moves the clock to [`ManualClock::next_sleep`] and ends that sleep;
    /// returns the new time, or `None` (the clock unmoved) when no sleep is
    /// pending.
    pub fn advance_to_next_sleep(&self) -> Option<Timestamp> {
        let next = self.next_sleep()?;
        let mut manual = self.lock();
        // Never backwards, even if another clone moved it meanwhile.
        manual.now = manual.now.max(next);
        let now = manual.now;
        let due = manual.due();
        drop(manual);
        due.into_iter().for_each(Waker::wake);
        Some(now)
    }
}

impl Manual {
    /// Takes the wakers of the sleeps whose deadline has come.
    fn due(&mut self) -> Vec<Waker> {
        let now = self.now;
        self.sleepers
            .iter_mut()
            .filter(|s| s.deadline <= now)
            .filter_map(|s| s.waker.take())
            .collect()
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
        self.lock().now
    }

    /// Ends when the clock is moved to `now + duration` or later.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        let mut manual = self.lock();
        let id = manual.next_id;
        manual.next_id += 1;
        let deadline = add(manual.now, duration);
        manual.sleepers.push(Sleeper {
            id,
            deadline,
            waker: None,
        });
        drop(manual);
        Box::pin(ManualSleep {
            clock: self.inner.clone(),
            id,
            deadline,
        })
    }
}

/// A sleep on a [`ManualClock`]; it leaves the clock's list when dropped.
struct ManualSleep {
    clock: Arc<Mutex<Manual>>,
    id: u64,
    deadline: Timestamp,
}

impl Future for ManualSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut manual = self.clock.lock().unwrap_or_else(PoisonError::into_inner);
        if manual.now >= self.deadline {
            return Poll::Ready(());
        }
        match manual.sleepers.iter_mut().find(|s| s.id == self.id) {
            Some(sleeper) => sleeper.waker = Some(cx.waker().clone()),
            None => manual.sleepers.push(Sleeper {
                id: self.id,
                deadline: self.deadline,
                waker: Some(cx.waker().clone()),
            }),
        }
        Poll::Pending
    }
}

impl Drop for ManualSleep {
    fn drop(&mut self) {
        let mut manual = self.clock.lock().unwrap_or_else(PoisonError::into_inner);
        manual.sleepers.retain(|s| s.id != self.id);
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

    fn poll_once(f: &mut BoxFuture<'static, ()>) -> Poll<()> {
        let mut cx = Context::from_waker(Waker::noop());
        f.as_mut().poll(&mut cx)
    }

    #[test]
    fn a_manual_sleep_ends_only_when_the_clock_reaches_its_deadline() {
        let clock = ManualClock::default();
        let mut nap = clock.sleep(Duration::from_secs(30));
        assert_eq!(poll_once(&mut nap), Poll::Pending);
        clock.advance(Duration::from_secs(29));
        assert_eq!(poll_once(&mut nap), Poll::Pending);
        assert_eq!(
            clock.next_sleep(),
            Some(add(Timestamp::UNIX_EPOCH, Duration::from_secs(30)))
        );
        clock.advance(Duration::from_secs(1));
        assert_eq!(poll_once(&mut nap), Poll::Ready(()));
    }

    #[test]
    fn advancing_to_the_next_sleep_takes_the_earliest_and_dropped_sleeps_leave() {
        let clock = ManualClock::default();
        let mut long = clock.sleep(Duration::from_secs(60));
        let short = clock.sleep(Duration::from_secs(10));
        assert_eq!(
            clock.advance_to_next_sleep(),
            Some(add(Timestamp::UNIX_EPOCH, Duration::from_secs(10)))
        );
        drop(short);
        assert_eq!(poll_once(&mut long), Poll::Pending);
        drop(long);
        assert_eq!(clock.next_sleep(), None);
        assert_eq!(clock.advance_to_next_sleep(), None);
        assert_eq!(
            clock.now(),
            add(Timestamp::UNIX_EPOCH, Duration::from_secs(10))
        );
    }

    #[test]
    fn add_saturates() {
        assert_eq!(add(Timestamp::MAX, Duration::from_secs(1)), Timestamp::MAX);
    }
}
