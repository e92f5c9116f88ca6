//! A replica of a sharded operator: hold this replica's shard Lease, and
//! run the controller only while the hold is trusted.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use kube::Client;

use super::{RING_LABEL, ShardGuard};
use crate::leader::{LeaderError, Leadership, run_while_holding};

/// Runs `controller(leadership, guard)` while this replica holds its shard
/// Lease (named [`ShardGuard::shard`], in `lease_namespace`, labelled
/// `operator-fsm.io/shard-ring=<operator>`), renewed as the leader Lease is
/// ([`crate::leader`]); the controller is aborted when the hold lapses
/// and started again when it is won back. Returns when `shutdown`
/// completes: the controller is stopped first, then the Lease given up so
/// that the assigner hands this shard's objects over at once.
///
/// Give both to the reconciler
/// ([`ReconcilerBuilder::leadership`](crate::ReconcilerBuilder::leadership)
/// and [`ReconcilerBuilder::shard`](crate::ReconcilerBuilder::shard)) and
/// watch with [`ShardGuard::watcher_config`].
///
/// ```no_run
/// # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use fsm_kube::shard::{ShardGuard, ShardNames, run_shard_until};
///
/// let guard = ShardGuard::new(ShardNames::new("db-operator")?, "db-operator-shard-0")?;
/// run_shard_until(client, "ops", guard, Duration::from_secs(15),
///     |leadership, guard| async move {
///         // Build the reconciler with both; run the Controller with
///         // guard.watcher_config().
///         # drop((leadership, guard));
///     },
///     async { let _ = tokio::signal::ctrl_c().await; },
/// ).await?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`LeaderError::Forbidden`].
pub async fn run_shard_until<C, Fut, S>(
    client: Client,
    lease_namespace: &str,
    guard: ShardGuard,
    lease_duration: Duration,
    mut controller: C,
    shutdown: S,
) -> Result<(), LeaderError>
where
    C: FnMut(Leadership, ShardGuard) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
    S: Future<Output = ()>,
{
    let labels = BTreeMap::from([(RING_LABEL.to_owned(), guard.names().operator().to_owned())]);
    let shard = guard.shard().to_owned();
    tracing::info!(%shard, namespace = lease_namespace, "sharded: holding this replica's shard Lease");
    run_while_holding(
        client,
        lease_namespace,
        &shard,
        &shard,
        lease_duration,
        labels,
        |leadership| controller(leadership, guard.clone()),
        shutdown,
    )
    .await
}
