//! A tower layer that logs a `kube::Client`'s own requests exactly as the
//! server describes them, so the driver can subtract what it asked from the
//! server's request log and keep what the operator asked (the workload
//! simulation inside the server asks nothing).

use std::sync::Arc;
use std::task::{Context, Poll};

use fsm_testkit::RequestLog;
use fsm_testkit::internals::{describe, route};
use futures::future::BoxFuture;
use http::{Request, Response};
use tower::{Layer, Service};

/// Logs every request of the wrapped service into a [`RequestLog`].
#[derive(Clone, Debug)]
pub struct CountingLayer {
    log: Arc<RequestLog>,
}

impl CountingLayer {
    /// A layer logging into `log`.
    #[must_use]
    pub fn new(log: Arc<RequestLog>) -> Self {
        CountingLayer { log }
    }
}

impl<S> Layer<S> for CountingLayer {
    type Service = Counting<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Counting {
            inner,
            log: self.log.clone(),
        }
    }
}

/// The service [`CountingLayer`] builds.
#[derive(Clone, Debug)]
pub struct Counting<S> {
    inner: S,
    log: Arc<RequestLog>,
}

impl<S, B, R> Service<Request<B>> for Counting<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let (parts, body) = request.into_parts();
        let mut record = describe(&parts, &route::parse(parts.uri.path()));
        let future = self.inner.call(Request::from_parts(parts, body));
        let log = self.log.clone();
        Box::pin(async move {
            let response = future.await?;
            record.code = response.status().as_u16();
            log.record(record);
            Ok(response)
        })
    }
}

/// A client from `KUBECONFIG`-style `config` whose requests are logged in
/// `log`.
///
/// # Errors
/// The client's error.
pub fn counted_client(
    config: kube::Config,
    log: Arc<RequestLog>,
) -> Result<kube::Client, kube::Error> {
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&CountingLayer::new(log))
        .build())
}
