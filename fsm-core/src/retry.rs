//! Retry policies: how often a failing handler is tried and how long the
//! engine waits between attempts.

use std::time::Duration;

use crate::random::RandomSource;

/// Whether retry delays are randomised.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Jitter {
    /// The delay is exactly the backoff.
    #[default]
    None,
    /// "Full jitter": the delay is uniform in `[0, backoff]`, which spreads
    /// the retries of many objects that failed together.
    Full,
}

/// Why a [`RetryPolicy`] was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum InvalidRetryPolicy {
    /// `max_attempts` counts the first attempt too, so it is at least 1.
    #[error("max_attempts must be at least 1 (it counts the first attempt)")]
    ZeroAttempts,
    /// A factor below 1 would make delays shrink.
    #[error("factor must be a finite number of at least 1.0, got {0}")]
    Factor(f64),
    /// `max` is the cap of the backoff, so it cannot be below `initial`.
    #[error("max ({max:?}) must not be below initial ({initial:?})")]
    MaxBelowInitial {
        /// The initial delay.
        initial: Duration,
        /// The cap.
        max: Duration,
    },
}

/// How a state's handler is retried after a retryable error.
///
/// `max_attempts` counts every attempt, the first included: with
/// `max_attempts = 3` a handler runs at most three times in a row before the
/// retries are exhausted. After failed attempt `n` (1-based) the engine waits
/// `min(max, initial × factor^(n-1))`, or a uniform delay in `[0, that]` with
/// [`Jitter::Full`].
///
/// A policy is validated when it is built, so an engine never holds an
/// invalid one.
///
/// ```
/// use std::time::Duration;
/// use fsm_core::RetryPolicy;
///
/// let policy = RetryPolicy::new(5, Duration::from_secs(1), 2.0, Duration::from_secs(10))?;
/// assert_eq!(policy.backoff(1), Duration::from_secs(1));
/// assert_eq!(policy.backoff(3), Duration::from_secs(4));
/// assert_eq!(policy.backoff(5), Duration::from_secs(10)); // capped
/// # Ok::<(), fsm_core::InvalidRetryPolicy>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryPolicy {
    max_attempts: u32,
    initial: Duration,
    factor: f64,
    max: Duration,
    jitter: Jitter,
}

impl RetryPolicy {
    /// The policy of states that declare none: 5 attempts, 1 s doubling up to
    /// 5 minutes, no jitter.
    pub const DEFAULT: RetryPolicy = RetryPolicy {
        max_attempts: 5,
        initial: Duration::from_secs(1),
        factor: 2.0,
        max: Duration::from_secs(300),
        jitter: Jitter::None,
    };

    /// A validated policy without jitter.
    ///
    /// # Errors
    /// [`InvalidRetryPolicy`] when `max_attempts` is 0, `factor` is below
    /// 1.0 or not finite, or `max` is below `initial`.
    pub const fn new(
        max_attempts: u32,
        initial: Duration,
        factor: f64,
        max: Duration,
    ) -> Result<RetryPolicy, InvalidRetryPolicy> {
        if max_attempts == 0 {
            return Err(InvalidRetryPolicy::ZeroAttempts);
        }
        if !factor.is_finite() || factor < 1.0 {
            return Err(InvalidRetryPolicy::Factor(factor));
        }
        if max.as_nanos() < initial.as_nanos() {
            return Err(InvalidRetryPolicy::MaxBelowInitial { initial, max });
        }
        Ok(RetryPolicy {
            max_attempts,
            initial,
            factor,
            max,
            jitter: Jitter::None,
        })
    }

    /// The same policy with the given jitter.
    pub const fn with_jitter(mut self, jitter: Jitter) -> RetryPolicy {
        self.jitter = jitter;
        self
    }

    /// How many attempts in a row are allowed, the first included.
    pub const fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The delay after the first failed attempt.
    pub const fn initial(&self) -> Duration {
        self.initial
    }

    /// The growth of the delay per failed attempt.
    pub const fn factor(&self) -> f64 {
        self.factor
    }

    /// The cap of the delay.
    pub const fn max(&self) -> Duration {
        self.max
    }

    /// The jitter applied to delays.
    pub const fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// Whether `failed_attempts` failures in a row use up the policy.
    pub const fn is_exhausted(&self, failed_attempts: u32) -> bool {
        failed_attempts >= self.max_attempts
    }

    /// The backoff after failed attempt number `failed_attempts` (1-based),
    /// before jitter: `min(max, initial × factor^(failed_attempts-1))`.
    pub fn backoff(&self, failed_attempts: u32) -> Duration {
        let exponent = failed_attempts.saturating_sub(1);
        let initial = self.initial.as_secs_f64();
        let max = self.max.as_secs_f64();
        // powi saturates to infinity for large exponents; min() then caps it.
        let exponent = i32::try_from(exponent).unwrap_or(i32::MAX);
        let secs = (initial * self.factor.powi(exponent)).min(max);
        if secs >= max {
            self.max
        } else {
            Duration::from_secs_f64(secs)
        }
    }

    /// The delay to wait after failed attempt `failed_attempts`, with jitter
    /// drawn from `random` when the policy asks for it.
    pub fn delay(&self, failed_attempts: u32, random: &dyn RandomSource) -> Duration {
        let backoff = self.backoff(failed_attempts);
        match self.jitter {
            Jitter::None => backoff,
            Jitter::Full => backoff.mul_f64(random.unit_interval()).min(backoff),
        }
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SeededRandom;
    use proptest::prelude::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn refuses_invalid_policies() {
        assert_eq!(
            RetryPolicy::new(0, secs(1), 2.0, secs(2)),
            Err(InvalidRetryPolicy::ZeroAttempts)
        );
        assert_eq!(
            RetryPolicy::new(1, secs(1), 0.5, secs(2)),
            Err(InvalidRetryPolicy::Factor(0.5))
        );
        assert!(matches!(
            RetryPolicy::new(1, secs(1), f64::NAN, secs(2)),
            Err(InvalidRetryPolicy::Factor(_))
        ));
        assert_eq!(
            RetryPolicy::new(1, secs(5), 2.0, secs(2)),
            Err(InvalidRetryPolicy::MaxBelowInitial {
                initial: secs(5),
                max: secs(2)
            })
        );
    }

    #[test]
    fn backoff_grows_geometrically_and_is_capped() {
        let p = RetryPolicy::new(10, secs(1), 3.0, secs(20)).unwrap();
        let delays: Vec<_> = (1..=5).map(|n| p.backoff(n)).collect();
        assert_eq!(delays, [secs(1), secs(3), secs(9), secs(20), secs(20)]);
        assert_eq!(p.backoff(u32::MAX), secs(20));
    }

    #[test]
    fn factor_one_is_a_constant_delay() {
        let p = RetryPolicy::new(3, secs(2), 1.0, secs(2)).unwrap();
        assert_eq!(p.backoff(1), secs(2));
        assert_eq!(p.backoff(7), secs(2));
    }

    #[test]
    fn exhaustion_counts_the_first_attempt() {
        let p = RetryPolicy::new(3, secs(1), 2.0, secs(4)).unwrap();
        assert!(!p.is_exhausted(2));
        assert!(p.is_exhausted(3));
    }

    #[test]
    fn no_jitter_is_exact() {
        let p = RetryPolicy::new(3, secs(1), 2.0, secs(4)).unwrap();
        assert_eq!(p.delay(2, &SeededRandom::new(3)), secs(2));
    }

    proptest! {
        #[test]
        fn full_jitter_stays_within_the_backoff(
            seed in any::<u64>(),
            attempt in 1u32..64,
            initial_ms in 1u64..10_000,
            factor in 1.0f64..10.0,
            extra_ms in 0u64..1_000_000,
        ) {
            let initial = Duration::from_millis(initial_ms);
            let max = initial + Duration::from_millis(extra_ms);
            let p = RetryPolicy::new(100, initial, factor, max).unwrap().with_jitter(Jitter::Full);
            let backoff = p.backoff(attempt);
            prop_assert!(backoff <= max);
            prop_assert!(backoff >= initial.min(max));
            let delay = p.delay(attempt, &SeededRandom::new(seed));
            prop_assert!(delay <= backoff);
        }

        #[test]
        fn backoff_never_decreases(attempt in 1u32..200, factor in 1.0f64..5.0) {
            let p = RetryPolicy::new(1000, Duration::from_millis(10), factor, Duration::from_secs(60)).unwrap();
            prop_assert!(p.backoff(attempt) <= p.backoff(attempt + 1));
        }
    }
}
