//! The rules of a retry policy: its keys merged over the inherited ones
//! and the default, then validated as `RetryPolicy::new` would.

use super::checker::Checker;
use crate::duration;
use crate::model::Policy;
use crate::parse::{JitterArg, RetryArgs};

impl Checker<'_> {
    /// Merges `own` over `inherited` over the default policy and validates
    /// the result, with errors on the keys of `own` (a mistake in an
    /// inherited key is reported where that key is written). `None` when
    /// the merged policy is invalid.
    pub fn policy(&mut self, own: &RetryArgs, inherited: Option<&RetryArgs>) -> Option<Policy> {
        let max_attempts = own
            .max_attempts
            .or_else(|| inherited.and_then(|i| i.max_attempts));
        let initial = own.initial.or_else(|| inherited.and_then(|i| i.initial));
        let factor = own.factor.or_else(|| inherited.and_then(|i| i.factor));
        let max = own.max.or_else(|| inherited.and_then(|i| i.max));
        let jitter = own.jitter.or_else(|| inherited.and_then(|i| i.jitter));

        let policy = Policy {
            max_attempts: max_attempts.map_or(Policy::DEFAULT.max_attempts, |m| *m),
            initial_ms: initial.map_or(Policy::DEFAULT.initial_ms, |d| d.millis),
            factor: factor.map_or(Policy::DEFAULT.factor, |f| f.value),
            max_ms: max.map_or(Policy::DEFAULT.max_ms, |d| d.millis),
            jitter: jitter == Some(JitterArg::Full),
        };
        let mut valid = true;
        if policy.max_attempts == 0 {
            if let Some(m) = &own.max_attempts {
                self.error(
                    m.span(),
                    "`max_attempts` must be at least 1: it counts the first attempt too",
                );
            }
            valid = false;
        }
        if !policy.factor.is_finite() || policy.factor < 1.0 {
            if let Some(f) = &own.factor {
                self.error(
                    f.span,
                    format!(
                        "`factor` must be at least 1.0 (delays never shrink), got {}",
                        policy.factor
                    ),
                );
            }
            valid = false;
        }
        if policy.max_ms < policy.initial_ms {
            // Point at whichever of the two this policy sets itself, `max` first.
            if let Some(span) = own.max.or(own.initial).map(|d| d.span) {
                self.error(
                    span,
                    format!(
                        "`max` (\"{}\") must not be below `initial` (\"{}\"): `max` caps the \
                         backoff",
                        duration::literal(policy.max_ms),
                        duration::literal(policy.initial_ms)
                    ),
                );
            }
            valid = false;
        }
        valid.then_some(policy)
    }
}
