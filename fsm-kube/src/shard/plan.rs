//! The assigner's decisions, pure: from an object's labels and the shards'
//! health, the one write that brings it closer to the ring's choice.

use std::collections::BTreeMap;

use super::live::ShardHealth;
use super::ring::Ring;

/// What the assigner knows of one object (from its metadata).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectView {
    /// The object's UID: its key on the ring.
    pub uid: String,
    /// Its shard label, if any.
    pub shard: Option<String>,
    /// Its drain label, if any (the shard it is being drained towards).
    pub drain: Option<String>,
    /// Its assignment epoch (0 when never assigned).
    pub epoch: u64,
}

/// One write the assigner makes to an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Move {
    /// Label the object for shard `to` with a greater epoch, removing any
    /// drain label: it is unlabelled (never assigned, or released by its
    /// owner) or its shard is dead (`from`).
    Assign {
        /// The shard it leaves, dead; `None` when it had none.
        from: Option<String>,
        /// The shard it goes to.
        to: String,
        /// The new epoch.
        epoch: u64,
    },
    /// Ask the live owner to let the object go (the drain label), for
    /// shard `to`.
    Drain {
        /// The owner now.
        from: String,
        /// The shard it will go to.
        to: String,
    },
    /// The ring chose the owner again before it let go: remove the drain
    /// label.
    CancelDrain,
}

/// The write that moves `object` towards its shard on `ring`, if any.
/// `health` holds every shard Lease seen; a shard not in it is dead.
///
/// ```
/// use std::collections::BTreeMap;
/// use fsm_kube::shard::{Move, ObjectView, Ring, ShardHealth, decide};
///
/// let ring = Ring::new(["b"]);
/// let health = BTreeMap::from([
///     ("a".to_owned(), ShardHealth::Member),
///     ("b".to_owned(), ShardHealth::Member),
/// ]);
/// let object = ObjectView { uid: "u".into(), shard: Some("a".into()), drain: None, epoch: 1 };
/// // "a" is alive: it must let go first.
/// assert_eq!(
///     decide(&object, &ring, &health),
///     Some(Move::Drain { from: "a".into(), to: "b".into() })
/// );
/// ```
#[must_use]
pub fn decide(
    object: &ObjectView,
    ring: &Ring,
    health: &BTreeMap<String, ShardHealth>,
) -> Option<Move> {
    let target = ring.owner(&object.uid)?;
    let assign = |from: Option<String>| Move::Assign {
        from,
        to: target.to_owned(),
        epoch: object.epoch.saturating_add(1),
    };
    match object.shard.as_deref() {
        None => Some(assign(None)),
        Some(owner) if owner == target => object.drain.is_some().then_some(Move::CancelDrain),
        Some(owner) => match health.get(owner).copied().unwrap_or(ShardHealth::Dead) {
            // Not yet seen renewed (this assigner has just started, or the
            // replica has): within a renewal it is a member, and its
            // objects would only be moved there and back; or dead, and they
            // move at once then.
            ShardHealth::Unconfirmed => None,
            ShardHealth::Dead => Some(assign(Some(owner.to_owned()))),
            // Asked already; waiting for the owner to let go.
            ShardHealth::Member if object.drain.as_deref() == Some(target) => None,
            ShardHealth::Member => Some(Move::Drain {
                from: owner.to_owned(),
                to: target.to_owned(),
            }),
        },
    }
}

/// The ring of the shards that are members (held and seen renewed).
#[must_use]
pub fn ring_of(health: &BTreeMap<String, ShardHealth>, virtual_nodes: usize) -> Ring {
    Ring::with_virtual_nodes(
        health
            .iter()
            .filter(|(_, h)| **h == ShardHealth::Member)
            .map(|(name, _)| name.clone()),
        virtual_nodes,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(shard: Option<&str>, drain: Option<&str>) -> ObjectView {
        ObjectView {
            uid: "0b7e2c4a-uid".to_owned(),
            shard: shard.map(str::to_owned),
            drain: drain.map(str::to_owned),
            epoch: 4,
        }
    }

    fn health(entries: &[(&str, ShardHealth)]) -> BTreeMap<String, ShardHealth> {
        entries.iter().map(|(n, h)| ((*n).to_owned(), *h)).collect()
    }

    use ShardHealth::{Dead, Member, Unconfirmed};

    #[test]
    fn an_unlabelled_object_is_assigned_with_the_next_epoch() {
        let ring = Ring::new(["t"]);
        let h = health(&[("t", Member)]);
        let assign = Move::Assign {
            from: None,
            to: "t".into(),
            epoch: 5,
        };
        assert_eq!(decide(&view(None, None), &ring, &h), Some(assign.clone()));
        // Released by its owner (both labels gone) is the same.
        assert_eq!(decide(&view(None, Some("t")), &ring, &h), Some(assign));
    }

    #[test]
    fn an_object_in_place_is_left_alone_and_a_stale_drain_cancelled() {
        let ring = Ring::new(["t"]);
        let h = health(&[("t", Member)]);
        assert_eq!(decide(&view(Some("t"), None), &ring, &h), None);
        assert_eq!(
            decide(&view(Some("t"), Some("x")), &ring, &h),
            Some(Move::CancelDrain)
        );
    }

    #[test]
    fn a_live_owner_is_drained_once_and_a_dead_one_bypassed() {
        let ring = Ring::new(["t"]);
        let h = health(&[("t", Member), ("o", Member)]);
        assert_eq!(
            decide(&view(Some("o"), None), &ring, &h),
            Some(Move::Drain {
                from: "o".into(),
                to: "t".into()
            })
        );
        // Drained towards another shard before: asked again.
        assert!(matches!(
            decide(&view(Some("o"), Some("x")), &ring, &h),
            Some(Move::Drain { .. })
        ));
        assert_eq!(decide(&view(Some("o"), Some("t")), &ring, &h), None);
        let dead = Move::Assign {
            from: Some("o".into()),
            to: "t".into(),
            epoch: 5,
        };
        let h = health(&[("t", Member), ("o", Dead)]);
        assert_eq!(
            decide(&view(Some("o"), Some("t")), &ring, &h),
            Some(dead.clone())
        );
        // A shard with no Lease at all is dead too.
        let h = health(&[("t", Member)]);
        assert_eq!(decide(&view(Some("o"), None), &ring, &h), Some(dead));
    }

    #[test]
    fn an_unconfirmed_owner_keeps_its_objects_until_it_is_a_member_or_dead() {
        // A new assigner's first looks: "t" seen renewed, "o" not yet.
        let ring = Ring::new(["t"]);
        let h = health(&[("t", Member), ("o", Unconfirmed)]);
        for drain in [None, Some("t"), Some("x")] {
            assert_eq!(decide(&view(Some("o"), drain), &ring, &h), None);
        }
        // Unlabelled objects still go to the members.
        assert!(matches!(
            decide(&view(None, None), &ring, &h),
            Some(Move::Assign { .. })
        ));
    }

    #[test]
    fn without_members_nothing_moves_and_only_members_join_the_ring() {
        let h = health(&[("a", Unconfirmed), ("b", Dead)]);
        let ring = ring_of(&h, 16);
        assert!(ring.is_empty());
        assert_eq!(decide(&view(None, None), &ring, &h), None);
        let h = health(&[("a", Member), ("b", Unconfirmed), ("c", Dead)]);
        assert_eq!(ring_of(&h, 16).shards(), ["a".to_owned()]);
    }
}
