//! Injectable randomness for jitter, so that delays are testable.

use std::sync::atomic::{AtomicU64, Ordering};

/// A source of uniformly distributed random numbers.
///
/// The engine draws from it only to jitter retry delays. Tests inject a
/// [`SeededRandom`] (repeatable) or their own implementation.
pub trait RandomSource: Send + Sync {
    /// A uniformly distributed 64-bit value.
    fn next_u64(&self) -> u64;

    /// A uniformly distributed value in `[0, 1]`.
    fn unit_interval(&self) -> f64 {
        // 53 random bits map onto every representable step of [0, 1].
        (self.next_u64() >> 11) as f64 / ((1u64 << 53) - 1) as f64
    }
}

/// A small, fast, seedable generator (SplitMix64), safe to share between
/// threads. Not for cryptography.
///
/// ```
/// use fsm_core::{RandomSource, SeededRandom};
///
/// let a = SeededRandom::new(7);
/// let b = SeededRandom::new(7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// ```
#[derive(Debug)]
pub struct SeededRandom {
    state: AtomicU64,
}

impl SeededRandom {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        SeededRandom {
            state: AtomicU64::new(seed),
        }
    }

    /// A generator seeded from the system clock and the process id, for
    /// production use.
    pub fn from_entropy() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Self::new(nanos ^ (u64::from(std::process::id()) << 32))
    }
}

impl Default for SeededRandom {
    fn default() -> Self {
        Self::from_entropy()
    }
}

impl RandomSource for SeededRandom {
    fn next_u64(&self) -> u64 {
        let mut z = self
            .state
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let a = SeededRandom::new(42);
        let b = SeededRandom::new(42);
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs[0], xs[1]);
    }

    #[test]
    fn unit_interval_stays_in_range() {
        let r = SeededRandom::new(1);
        for _ in 0..10_000 {
            let x = r.unit_interval();
            assert!((0.0..=1.0).contains(&x), "{x}");
        }
    }
}
