//! `run`: connect, serve the metrics and health, run the operator's main function
//! (while this replica holds the Lease, under `--leader-elect`) until it
//! returns or the process is asked to stop.

use std::future::Future;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use clap::Args;
use fsm_core::Fsm;
use kube::CustomResourceExt;
use prometheus_client::registry::Registry;

use super::view::AbortOnDrop;
use super::{BoxError, Error, Operator, RunArgs, RunContext, RunOutcome, connect};
use crate::admission::{Admission, admission_router};
use crate::http::webhook::{WebhookError, WebhookTls};
use crate::{KubeResource, metrics::FsmMetrics};

impl<F, A> Operator<F, A>
where
    F: Fsm,
    F::Resource: KubeResource + CustomResourceExt,
    A: Args + Clone + Send + Sync + 'static,
{
    pub(super) async fn run<R, Fut>(&self, args: RunArgs<A>, mut run: R) -> Result<(), Error>
    where
        R: FnMut(RunContext<F, A>) -> Fut + Send + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: RunOutcome,
    {
        // Before connecting: a webhook that cannot start fails at once.
        let webhook = self.webhook_listener(&args).await?;
        let client = connect(&args.connect).await?;
        let mut registry = Registry::default();
        let metrics = FsmMetrics::new(&mut registry);
        let health = crate::http::Health::new();
        let listing = tokio::spawn(super::readiness::hold_until_listed::<F::Resource>(
            client.clone(),
            args.namespace.clone(),
            health.hold(super::readiness::NOT_LISTED),
        ));
        let context = RunContext {
            client: client.clone(),
            namespace: args.namespace.clone(),
            metrics,
            leadership: None,
            shard: None,
            args: args.operator.clone(),
            health: health.clone(),
            store: self.store,
            options: self.options.clone(),
            machine: PhantomData,
        };
        let metrics_server = args.http_addr.map(|addr| {
            tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
            let registry = Arc::new(registry);
            tokio::spawn(async move {
                crate::http::serve(addr, registry, health)
                    .await
                    .map_err(|error| Error::Metrics { addr, error })
            })
        });
        let webhook = webhook.map(|(addr, listener, tls)| {
            let routes = self.webhook_routes(&args, &context);
            tokio::spawn(async move {
                crate::http::webhook::serve_router(listener, &tls, routes)
                    .await
                    .map_err(|source| Error::Webhook(WebhookError::Serve { addr, source }))
            })
        });
        let view = match args.view_addr {
            Some(addr) => Some(
                self.serve_view(&client, addr, args.namespace.clone(), &args.view_guard)
                    .await?,
            ),
            None => None,
        };
        let controller = async {
            if args.shard.shards {
                self.run_sharded(&args, &client, &context, run).await
            } else if args.leader.leader_elect {
                let leader = &args.leader;
                let lease_name = leader
                    .lease_name
                    .clone()
                    .unwrap_or_else(|| format!("{}-leader", self.name));
                let lease_namespace = lease_namespace(&args, &client);
                let identity = leader.identity.clone().unwrap_or_else(|| {
                    default_identity(
                        &self.name,
                        std::env::var("POD_NAME").ok(),
                        std::env::var("HOSTNAME").ok(),
                    )
                });
                tracing::info!(lease = %lease_name, namespace = %lease_namespace, %identity, "leader election");
                // A main function that fails stops the replica (giving the
                // Lease up) and makes `run` fail, as without leader election.
                let failure = Arc::new(std::sync::Mutex::new(None::<BoxError>));
                let failed = Arc::new(tokio::sync::Notify::new());
                let shutdown = {
                    let failed = failed.clone();
                    async move {
                        tokio::select! {
                            () = termination() => {}
                            () = failed.notified() => {}
                        }
                    }
                };
                crate::leader::run_while_leader_until(
                    client.clone(),
                    &lease_namespace,
                    &lease_name,
                    &identity,
                    Duration::from_secs(leader.lease_duration),
                    |leadership| {
                        let main = run(RunContext {
                            leadership: Some(leadership),
                            ..context.clone()
                        });
                        let (failure, failed) = (failure.clone(), failed.clone());
                        async move {
                            if let Err(error) = main.await.into_result() {
                                *failure.lock().unwrap_or_else(PoisonError::into_inner) =
                                    Some(error);
                                failed.notify_one();
                            }
                        }
                    },
                    shutdown,
                )
                .await
                .map_err(Error::LeaderElection)?;
                let error = failure
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                error.map_or(Ok(()), |error| Err(Error::Controller(error)))
            } else {
                tokio::select! {
                    outcome = run(context.clone()) => outcome.into_result().map_err(Error::Controller),
                    () = termination() => Ok(()),
                }
            }
        };
        let _view = view.map(AbortOnDrop);
        let mut servers: Vec<_> = metrics_server.into_iter().chain(webhook).collect();
        let result = if servers.is_empty() {
            controller.await
        } else {
            let result = tokio::select! {
                result = controller => result,
                (served, _, _) = futures::future::select_all(servers.iter_mut()) => match served {
                    Ok(Err(error)) => Err(error),
                    // A server only stops with an error, or when its task
                    // is cancelled or panics.
                    Ok(Ok(())) | Err(_) => Ok(()),
                },
            };
            for server in &servers {
                server.abort();
            }
            result
        };
        listing.abort();
        result
    }
}

impl<F, A> Operator<F, A>
where
    F: Fsm,
    F::Resource: KubeResource + CustomResourceExt,
    A: Args + Clone + Send + Sync + 'static,
{
    /// With `--webhook-addr`: the webhooks' certificate, read, and their
    /// address, bound (they then serve in a task of their own whether or
    /// not this replica leads: the API server calls any replica behind the
    /// Service): the conversion when the resource has several versions,
    /// and the admission the machine's states declare.
    ///
    /// # Errors
    /// [`Error::NoConversion`] for an operator with one version whose
    /// machine declares no admission rule: nothing to serve;
    /// [`Error::Webhook`]: the certificate cannot be read or used, the
    /// address cannot be bound.
    pub(super) async fn webhook_listener(
        &self,
        args: &RunArgs<A>,
    ) -> Result<Option<(SocketAddr, tokio::net::TcpListener, WebhookTls)>, Error> {
        let (Some(addr), Some(dir)) = (args.webhook.webhook_addr, &args.webhook.webhook_cert_dir)
        else {
            return Ok(None);
        };
        let versions = self.versions();
        if !versions.has_spokes() && !F::machine().declares_admission_rules() {
            return Err(Error::NoConversion {
                version: versions.hub_api_version(),
            });
        }
        let tls = WebhookTls::from_dir(dir)?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| WebhookError::Bind { addr, source })?;
        tracing::info!(
            %addr,
            versions = %versions.api_versions().join(", "),
            routes = if versions.has_spokes() {
                "POST /convert, POST /validate"
            } else {
                "POST /validate"
            },
            "serving the webhooks (TLS)"
        );
        Ok(Some((addr, listener, tls)))
    }

    /// The webhooks' routes: the conversion (with several versions) and
    /// the admission, `.status.fsm` guarded for `--operator-user`.
    fn webhook_routes(&self, args: &RunArgs<A>, context: &RunContext<F, A>) -> axum::Router {
        let versions = self.versions();
        let mut admission = Admission::<F>::new(self.store).client(context.client.clone());
        for user in &args.webhook.operator_user {
            admission = admission.operator_user(user.clone());
        }
        if args.webhook.operator_user.is_empty() {
            tracing::warn!(
                "no --operator-user: the admission webhook does not guard .status.fsm \
                 (it cannot tell the operator's writes from others')"
            );
        }
        let routes = if versions.has_spokes() {
            crate::http::webhook::router(versions, Some(context.metrics.clone()))
        } else {
            axum::Router::new()
        };
        routes.merge(admission_router(admission))
    }
}

/// Completes on SIGTERM (what Kubernetes sends a pod it stops) or Ctrl-C:
/// `run` then stops, giving the Lease up when it holds one.
pub(super) async fn termination() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = terminate.recv() => tracing::info!("SIGTERM: stopping"),
                    _ = tokio::signal::ctrl_c() => tracing::info!("interrupted: stopping"),
                }
                return;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops gracefully");
            }
        }
    }
    match tokio::signal::ctrl_c().await {
        Ok(()) => tracing::info!("interrupted: stopping"),
        // Nothing to listen to: never stop on a signal then.
        Err(_) => std::future::pending().await,
    }
}

/// The Leases' namespace: `--lease-namespace`, else `$POD_NAMESPACE`, else
/// `--namespace`, else the kubeconfig's.
pub(super) fn lease_namespace<A: Args>(args: &RunArgs<A>, client: &kube::Client) -> String {
    args.leader
        .lease_namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .or_else(|| args.namespace.clone())
        .unwrap_or_else(|| client.default_namespace().to_owned())
}

/// This replica's identity in the Lease: the pod's name, else the host's,
/// else `<operator>-<pid>`.
pub(super) fn default_identity(
    operator: &str,
    pod: Option<String>,
    host: Option<String>,
) -> String {
    pod.filter(|s| !s.is_empty())
        .or_else(|| host.filter(|s| !s.is_empty()))
        .unwrap_or_else(|| format!("{operator}-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_falls_back_from_pod_to_host_to_pid() {
        assert_eq!(
            default_identity("op", Some("op-7d9f".into()), Some("node".into())),
            "op-7d9f"
        );
        assert_eq!(
            default_identity("op", Some(String::new()), Some("node".into())),
            "node"
        );
        assert_eq!(
            default_identity("op", None, None),
            format!("op-{}", std::process::id())
        );
    }
}
