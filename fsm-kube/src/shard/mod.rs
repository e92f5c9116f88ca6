//! Sharded mode: N replicas share the objects of one kind, each object
//! reconciled by one replica at a time, over Kubernetes itself (Leases and
//! labels, as kubernetes-controller-sharding does).
//!
//! # The protocol
//! - **Shards.** Each replica holds its own shard Lease
//!   (`coordination.k8s.io/v1`, labelled
//!   `operator-fsm.io/shard-ring=<operator>`), renewed like the leader
//!   Lease ([`crate::leader`]): it acts only while its hold is trusted,
//!   two thirds of the duration after its last renewal was sent
//!   ([`run_shard_until`]).
//! - **Ring.** Objects are placed by consistent hashing of their UID with
//!   virtual nodes ([`Ring`]) over the *member* shards: Leases held and
//!   seen renewed within their duration by the assigner's own clock
//!   ([`ShardHealth`]). A shard joining takes about 1/N of the objects;
//!   one leaving hands over only its own.
//! - **Assigner.** Every replica runs one ([`Assigner`]); it acts only in
//!   the replica holding the Lease `<operator>-sharder` (leader
//!   election). At every tick it compares each object's label
//!   `shard.operator-fsm.io/<operator>` with the ring ([`decide`]):
//!   - no shard label (new, or let go by its owner): label it for its
//!     shard, with a greater epoch (annotation
//!     `epoch.shard.operator-fsm.io/<operator>`);
//!   - its shard is dead (Lease released, deleted, or unchanged for its
//!     whole duration): label it for its new shard directly; the dead
//!     owner stopped acting when its trusted period ended, a third of the
//!     duration before;
//!   - its shard is alive: set the drain label
//!     `drain.operator-fsm.io/<operator>=<new shard>` and wait.
//!
//!   Every write is a merge patch carrying the `resourceVersion` the
//!   decision was made from: a conflict leaves the object for the next
//!   look, so a stale cache cannot make a wrong write.
//! - **Drain.** The owner's reconciler, before anything else, asks its
//!   [`ShardGuard`]: an object labelled for another shard is refused; one
//!   carrying the drain label is let go — no handler runs, and the shard
//!   and drain labels are removed in one conditional patch. kube's
//!   `Controller` never runs two reconciles of one object at once, so the
//!   owner's in-flight reconcile of that object has ended. Only then,
//!   seeing the object unlabelled, does the assigner label it for the new
//!   shard. The owner remembers the epoch it let go of: a stale copy still
//!   in its cache (labelled for it, same epoch) is refused; a later
//!   assignment back to it carries a greater epoch and runs.
//! - **Stopping.** On SIGTERM a replica stops its controller, then gives
//!   its shard Lease up: the assigner sees it released and moves its
//!   objects at its next look. After a crash the Lease lapses.
//! - **A replica that was paused** past its Lease (a frozen VM) finds its
//!   hold gone by its own clock and runs nothing; its controller is
//!   aborted, and started afresh (a new watch, a new cache) only once it
//!   renews its Lease again. Its objects may have been moved meanwhile: a
//!   copy of one in a cache not yet updated is the case the next point
//!   covers.
//! - **Last line of defence.** Every record write stays conditional on
//!   the version it was decided from, as without sharding.
//!
//! Cost: one label write per object per move (two more for a drain:
//! the drain label, the release), and one metadata watch of the kind in
//! the assigner.

mod assigner;
mod guard;
mod live;
mod names;
mod plan;
mod replica;
mod ring;

pub use assigner::{Assigner, AssignerOptions};
pub use guard::{Refusal, ShardGuard, Verdict};
pub use live::ShardHealth;
pub use names::{RING_LABEL, ShardNames};
pub use plan::{Move, ObjectView, decide, ring_of};
pub use replica::run_shard_until;
pub use ring::{DEFAULT_VIRTUAL_NODES, Ring};

/// A sharding setting that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// A name that must be a label value is not one.
    #[error("the {what} {value:?} cannot be used for sharding: {reason}")]
    InvalidName {
        /// What the name names.
        what: &'static str,
        /// The name.
        value: String,
        /// Why it is refused.
        reason: &'static str,
    },
}
