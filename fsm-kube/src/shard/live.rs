//! Which shards are alive, judged as the leader elector judges a Lease:
//! on the observer's monotonic clock, from when it last saw the Lease
//! change, never from the times written in it.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use tokio::time::Instant;

use crate::leader::Fingerprint;

/// What the observer knows of one shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardHealth {
    /// Held, and seen renewed within its duration: a member of the ring.
    Member,
    /// Held, but not yet seen renewed by this observer (it, or the
    /// replica, has just started): it may be acting, so its objects stay
    /// where they are until it is a member or dead; not yet given new
    /// objects.
    Unconfirmed,
    /// Released (no holder), deleted, or unchanged for its whole duration:
    /// its holder stopped acting a third of the duration ago at the
    /// latest, so its objects are handed over without a drain.
    Dead,
}

impl ShardHealth {
    /// Whether the shard's holder may still be acting.
    #[must_use]
    pub fn may_act(self) -> bool {
        !matches!(self, ShardHealth::Dead)
    }
}

struct Seen {
    fingerprint: Fingerprint,
    at: Instant,
    renewed: bool,
}

/// Tracks the shard Leases an assigner sees.
#[derive(Default)]
pub(crate) struct LeaseObserver {
    seen: HashMap<String, Seen>,
}

impl LeaseObserver {
    /// Looks at `leases` at `now`: the health of each shard Lease (by
    /// name); `default_duration` stands in for a Lease without one.
    pub(crate) fn observe(
        &mut self,
        leases: &[Lease],
        now: Instant,
        default_duration: Duration,
    ) -> BTreeMap<String, ShardHealth> {
        let mut health = BTreeMap::new();
        let mut present = Vec::with_capacity(leases.len());
        for lease in leases {
            let Some(name) = lease.metadata.name.clone() else {
                continue;
            };
            let spec = lease.spec.clone().unwrap_or_default();
            let fingerprint = Fingerprint::of(&spec);
            let duration = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(default_duration, Duration::from_secs);
            let seen = match self.seen.get_mut(&name) {
                Some(seen) if seen.fingerprint == fingerprint => seen,
                Some(seen) => {
                    *seen = Seen {
                        fingerprint,
                        at: now,
                        renewed: true,
                    };
                    seen
                }
                None => self.seen.entry(name.clone()).or_insert(Seen {
                    fingerprint,
                    at: now,
                    renewed: false,
                }),
            };
            let held = spec
                .holder_identity
                .as_deref()
                .is_some_and(|h| !h.is_empty());
            let state = if !held || now.saturating_duration_since(seen.at) >= duration {
                ShardHealth::Dead
            } else if seen.renewed {
                ShardHealth::Member
            } else {
                ShardHealth::Unconfirmed
            };
            health.insert(name.clone(), state);
            present.push(name);
        }
        self.seen.retain(|name, _| present.contains(name));
        health
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

    use super::*;

    fn lease(name: &str, holder: Option<&str>, renewed_at_second: i64) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                lease_duration_seconds: Some(3),
                renew_time: Some(MicroTime(
                    jiff::Timestamp::from_second(renewed_at_second).unwrap(),
                )),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn a_shard_is_unconfirmed_then_member_then_dead_when_it_stops_changing() {
        let mut observer = LeaseObserver::default();
        let t0 = Instant::now();
        let d = Duration::from_secs(3);
        let first = observer.observe(&[lease("a", Some("a"), 1)], t0, d);
        assert_eq!(first["a"], ShardHealth::Unconfirmed);
        let renewed = observer.observe(&[lease("a", Some("a"), 2)], t0 + Duration::from_secs(1), d);
        assert_eq!(renewed["a"], ShardHealth::Member);
        let quiet = observer.observe(&[lease("a", Some("a"), 2)], t0 + Duration::from_secs(3), d);
        assert_eq!(quiet["a"], ShardHealth::Member);
        let lapsed = observer.observe(&[lease("a", Some("a"), 2)], t0 + Duration::from_secs(4), d);
        assert_eq!(lapsed["a"], ShardHealth::Dead);
        // The timestamps written in the Lease do not matter, only change.
        let back = observer.observe(&[lease("a", Some("a"), 0)], t0 + Duration::from_secs(5), d);
        assert_eq!(back["a"], ShardHealth::Member);
    }

    #[test]
    fn a_released_lease_is_dead_at_once_and_a_deleted_one_is_forgotten() {
        let mut observer = LeaseObserver::default();
        let t0 = Instant::now();
        let d = Duration::from_secs(3);
        observer.observe(&[lease("a", Some("a"), 1), lease("b", Some("b"), 1)], t0, d);
        let health = observer.observe(&[lease("a", None, 2)], t0, d);
        assert_eq!(health["a"], ShardHealth::Dead);
        assert!(!health.contains_key("b"));
        assert_eq!(observer.seen.len(), 1);
    }
}
