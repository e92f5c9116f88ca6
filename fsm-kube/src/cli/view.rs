//! `run --view-addr`: the web view of the operator's machine and objects,
//! next to the controller ([`crate::view::web`]).

use std::net::SocketAddr;

use clap::Args;
use fsm_core::Fsm;
use kube::{Client, CustomResourceExt};

use super::{Error, Operator, ViewAuth, ViewGuardArgs};
use crate::KubeResource;
use crate::records::Watched;
use crate::view::web::WebView;

/// A task that is stopped when this is dropped.
pub(super) struct AbortOnDrop(pub(super) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<F, A> Operator<F, A>
where
    F: Fsm,
    F::Resource: KubeResource + CustomResourceExt,
    A: Args + Clone + Send + Sync + 'static,
{
    /// Binds `addr` and serves the web view of the objects in `namespace`
    /// (`None`: all) there, behind `guard`'s host allow-list, caps and
    /// access check ([`ViewGuardArgs::auth_on`]), in
    /// a task of its own; a failure of the view after binding is logged
    /// and does not stop the operator.
    ///
    /// # Errors
    /// [`Error::View`] when `addr` cannot be bound.
    pub(super) async fn serve_view(
        &self,
        client: &Client,
        addr: SocketAddr,
        namespace: Option<String>,
        guard: &ViewGuardArgs,
    ) -> Result<tokio::task::JoinHandle<()>, Error> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|error| Error::View { addr, error })?;
        let auth = guard.auth_on(addr);
        tracing::info!(%addr, ?auth, "serving the web view");
        let mut view = WebView::new(
            client.clone(),
            vec![Watched::of::<F>(self.store)],
            namespace,
        )
        .allow_hosts(guard.allowed_hosts.iter().cloned())
        .limits(guard.limits());
        if auth == ViewAuth::Kubernetes {
            view = view.require_kubernetes_access();
        }
        Ok(tokio::spawn(async move {
            if let Err(error) = view.serve(listener).await {
                tracing::error!(%addr, %error, "the web view stopped");
            }
        }))
    }
}
