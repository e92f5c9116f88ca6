//! `run --shards`: hold this replica's shard Lease and run the operator's
//! main function while it is held; run the assigner while this replica
//! holds `<operator>-sharder`; on SIGTERM stop both and give the Leases up.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clap::Args;
use fsm_core::Fsm;
use kube::{Client, CustomResourceExt};

use super::run::{default_identity, lease_namespace, termination};
use super::{BoxError, Error, Operator, RunArgs, RunContext, RunOutcome};
use crate::KubeResource;
use crate::leader::{LeaseTiming, run_while_leader_until};
use crate::shard::{Assigner, AssignerOptions, ShardGuard, ShardNames, run_shard_until};

impl<F, A> Operator<F, A>
where
    F: Fsm,
    F::Resource: KubeResource + CustomResourceExt,
    A: Args + Clone + Send + Sync + 'static,
{
    pub(super) async fn run_sharded<R, Fut>(
        &self,
        args: &RunArgs<A>,
        client: &Client,
        context: &RunContext<F, A>,
        mut run: R,
    ) -> Result<(), Error>
    where
        R: FnMut(RunContext<F, A>) -> Fut + Send + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: RunOutcome,
    {
        let names = ShardNames::new(&self.name)?;
        let shard = args.shard.shard_lease.clone().unwrap_or_else(|| {
            let host = default_identity(
                &self.name,
                std::env::var("POD_NAME").ok(),
                std::env::var("HOSTNAME").ok(),
            );
            names.default_shard_lease(&host)
        });
        let guard = ShardGuard::new(names.clone(), &shard)?.with_metrics(context.metrics.clone());
        let lease_namespace = lease_namespace(args, client);
        let duration = Duration::from_secs(args.leader.lease_duration);
        tracing::info!(%shard, namespace = %lease_namespace, "sharded mode");
        let assigner = Assigner::new::<F::Resource>(
            client.clone(),
            args.namespace.as_deref(),
            &lease_namespace,
            names.clone(),
            duration,
        )
        .metrics(context.metrics.clone())
        .options(AssignerOptions {
            tick: LeaseTiming::new(duration)
                .renew_every
                .min(Duration::from_secs(1)),
            ..AssignerOptions::default()
        });

        // One stop for both Leases: a signal, the main function failing,
        // or either Lease refused.
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let until_stopped = || {
            let mut stopped = stopped.clone();
            async move {
                let _ = stopped.wait_for(|s| *s).await;
            }
        };
        let failure = Arc::new(Mutex::new(None::<BoxError>));
        let failed = Arc::new(tokio::sync::Notify::new());
        let assigning = async {
            let result = run_while_leader_until(
                client.clone(),
                &lease_namespace,
                &names.assigner_lease(),
                &shard,
                duration,
                move |leadership| assigner.clone().run(leadership),
                until_stopped(),
            )
            .await;
            let _ = stop.send(true);
            result
        };
        let replica = async {
            let result = run_shard_until(
                client.clone(),
                &lease_namespace,
                guard,
                duration,
                |leadership, guard| {
                    let main = run(RunContext {
                        leadership: Some(leadership),
                        shard: Some(guard),
                        ..context.clone()
                    });
                    let (failure, failed) = (failure.clone(), failed.clone());
                    async move {
                        if let Err(error) = main.await.into_result() {
                            *failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
                            failed.notify_one();
                        }
                    }
                },
                until_stopped(),
            )
            .await;
            let _ = stop.send(true);
            result
        };
        let signal = async {
            tokio::select! {
                () = termination() => {}
                () = failed.notified() => {}
                () = until_stopped() => {}
            }
            let _ = stop.send(true);
        };
        let ((), assigned, replicated) = tokio::join!(signal, assigning, replica);
        assigned.map_err(Error::LeaderElection)?;
        replicated.map_err(Error::LeaderElection)?;
        let error = failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        error.map_or(Ok(()), |error| Err(Error::Controller(error)))
    }
}
