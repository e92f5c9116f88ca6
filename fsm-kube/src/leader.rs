//! Leader election with `kube-lease-manager`: run the controller only while
//! this replica holds the Lease, stop it when the lease is lost.

use std::future::Future;
use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};

/// Runs `controller()` while this replica holds the Lease `lease_name` in
/// `namespace`, as `identity`; aborts it when the lease is lost, and starts
/// a fresh one when it is won again. Returns when the lease manager stops.
///
/// # Guarantees
/// At most one replica's controller runs at a time, as far as the Lease
/// says (within its duration and grace). A transition cannot be committed
/// twice even across a handover, since every commit is conditional on the
/// version it was decided from.
///
/// # Errors
/// The lease manager's.
pub async fn run_while_leader<C, Fut>(
    client: Client,
    namespace: &str,
    lease_name: &str,
    identity: &str,
    lease_duration: Duration,
    mut controller: C,
) -> Result<(), LeaseManagerError>
where
    C: FnMut() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let manager = LeaseManagerBuilder::new(client, lease_name)
        .with_namespace(namespace)
        .with_identity(identity)
        .with_duration(lease_duration.as_secs().max(2))
        .with_grace((lease_duration.as_secs().max(2) / 3).max(1))
        .build()
        .await?;
    let (mut channel, task) = manager.watch().await;
    // Aborted when dropped, so that cancelling this future (or the task it
    // runs in) stops the controller too.
    let mut running: Option<AbortOnDrop> = None;
    loop {
        let leading = *channel.borrow_and_update();
        match (leading, running.is_some()) {
            (true, false) => {
                tracing::info!(
                    lease = lease_name,
                    identity,
                    "leading: starting the controller"
                );
                running = Some(AbortOnDrop(tokio::spawn(controller())));
            }
            (false, true) => {
                tracing::warn!(
                    lease = lease_name,
                    identity,
                    "lease lost: stopping the controller"
                );
                running = None;
            }
            _ => {}
        }
        if channel.changed().await.is_err() {
            break;
        }
    }
    drop(running);
    drop(channel);
    match task.await {
        Ok(result) => result.map(|_| ()),
        Err(join) => {
            tracing::error!(error = %join, "lease manager task failed");
            Ok(())
        }
    }
}

/// A spawned task that is aborted when this handle is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
