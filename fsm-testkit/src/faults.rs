//! Fault injection: errors, latency, dropped watches and `410 Gone`,
//! scripted from tests while an operator runs.
//!
//! Every request is described (verb, resource, namespace, name) before it
//! is served; the faults registered on the server are matched against that
//! description. A matching fault fires by count ([`Fault::times`]) and/or
//! with a seeded probability ([`Fault::probability`]), and then:
//!
//! - [`Fault::error`]: the request is answered with that code and a proper
//!   `Status` (`500 InternalError`, `503 ServiceUnavailable`, `429
//!   TooManyRequests` with `Retry-After`, `409 Conflict`, …) and not served;
//!   with [`Fault::after_serving`] it is served first and its answer lost
//!   (a write that took effect though the client saw an error, as when the
//!   real server times out after storage committed);
//! - [`Fault::latency`]: the request is served after the delay (latencies of
//!   several matching faults add up);
//! - [`Fault::drop_watches`]: the open watches of the request's resource end
//!   (as when a connection to the API server breaks), then the request is
//!   served;
//! - [`Fault::gone`]: a watch request is answered with a single `ERROR`
//!   event `410 Expired` (kube's watcher then lists again).
//!
//! [`Faults::drop_watches`] ends open watches at once.
//!
//! # Expected flow
//! ```no_run
//! # async fn demo() {
//! use fsm_testkit::ApiServer;
//! use fsm_testkit::faults::Fault;
//!
//! let server = ApiServer::new();
//! // One patch of widgets in five fails, reproducibly.
//! let flaky = server.faults().add(
//!     Fault::error(500).verb("patch").resource("widgets").probability(0.2).seed(7),
//! );
//! // … run the operator …
//! println!("{} patches failed", flaky.hits());
//! flaky.remove();
//! server.faults().drop_watches(Some("widgets"));
//! # }
//! ```
//!
//! # Over HTTP
//! The same API is served under `/testkit/faults` (so that another process
//! can script the standalone `fsm-apiserver`):
//!
//! - `POST /testkit/faults` with a fault in JSON (the fields of [`Fault`],
//!   `kind` one of `error`, `latency` with `latencyMs`, `dropWatches`, `gone`), e.g.
//!   `{"kind": "error", "code": 503, "verb": "list", "resource": "configmaps", "times": 2}`,
//!   answers `201 {"id": N}`;
//! - `GET /testkit/faults` lists the faults with their hits;
//! - `DELETE /testkit/faults/N` removes one, `DELETE /testkit/faults` all;
//! - `POST /testkit/faults/drop-watches?resource=widgets` ends open watches
//!   (of every resource without `resource`).
//!
//! Requests under `/testkit/` are neither faulted nor logged.
//!
//! This module is the model (what to inject, which requests match, when a
//! fault fires); the server applies its decisions to requests and serves
//! the HTTP API.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::broadcast;

use crate::log::RequestRecord;
use crate::status::{ApiError, Subject};

/// What a fault does when it fires.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultKind {
    /// Answer with this HTTP code and a `Status`.
    Error {
        /// The HTTP code (and `Status.code`).
        code: u16,
        /// The `Status.message`; a default naming the fault when `None`.
        message: Option<String>,
    },
    /// Serve the request after this delay.
    Latency(Duration),
    /// End the open watches of the request's resource, then serve it.
    DropWatches,
    /// Answer a watch with one `ERROR` event `410 Expired`.
    Gone,
}

/// A fault: what it does, which requests it matches, and when it fires.
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a fault does nothing until added with `Faults::add`"]
pub struct Fault {
    /// What it does.
    pub kind: FaultKind,
    /// The verb matched (`get`, `list`, `watch`, `create`, `update`,
    /// `patch`, `delete`, `deletecollection`); any when `None`.
    pub verb: Option<String>,
    /// The plural resource matched (`widgets`, or `widgets/status` for the
    /// subresource alone); any when `None`.
    pub resource: Option<String>,
    /// The namespace matched; any when `None`.
    pub namespace: Option<String>,
    /// The object name matched; any when `None`.
    pub name: Option<String>,
    /// How many times it fires at most; unlimited when `None`.
    pub times: Option<u64>,
    /// The probability that a matching request fires it (1 when `None`).
    pub probability: Option<f64>,
    /// The seed of its random draws (the server's seed mixed with the
    /// fault's id when `None`).
    pub seed: Option<u64>,
    /// An error fault: serve the request, then answer with the error
    /// instead of the outcome.
    pub after_serving: bool,
}

impl Fault {
    fn new(kind: FaultKind) -> Self {
        Self {
            kind,
            verb: None,
            resource: None,
            namespace: None,
            name: None,
            times: None,
            probability: None,
            seed: None,
            after_serving: false,
        }
    }

    /// Answers matching requests with `code` and a `Status` whose reason
    /// is the code's (`InternalError` for 500, `ServiceUnavailable` for 503…).
    pub fn error(code: u16) -> Self {
        Self::new(FaultKind::Error {
            code,
            message: None,
        })
    }

    /// Delays matching requests by `delay`.
    pub fn latency(delay: Duration) -> Self {
        Self::new(FaultKind::Latency(delay))
    }

    /// Ends the open watches of the resource of a matching request.
    pub fn drop_watches() -> Self {
        Self::new(FaultKind::DropWatches)
    }

    /// Answers matching watch requests with `410 Expired` (the watch verb is
    /// implied).
    pub fn gone() -> Self {
        Self::new(FaultKind::Gone).verb("watch")
    }

    /// Only requests of `verb`.
    pub fn verb(mut self, verb: &str) -> Self {
        self.verb = Some(verb.to_ascii_lowercase());
        self
    }

    /// Only requests on `resource` (plural; `widgets/status` for the status
    /// subresource alone).
    pub fn resource(mut self, resource: &str) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// Only requests in `namespace`.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only requests naming the object `name`.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Fires at most `n` times.
    pub fn times(mut self, n: u64) -> Self {
        self.times = Some(n);
        self
    }

    /// Fires for a matching request with probability `p` (clamped to 0..=1).
    pub fn probability(mut self, p: f64) -> Self {
        self.probability = Some(p.clamp(0.0, 1.0));
        self
    }

    /// Seeds the random draws of [`Fault::probability`].
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// An error fault serves the request first, then answers with the
    /// error: the effect happens, the answer is lost.
    pub fn after_serving(mut self) -> Self {
        self.after_serving = true;
        self
    }

    /// The `Status.message` of an error fault.
    pub fn message(mut self, message: &str) -> Self {
        if let FaultKind::Error { message: m, .. } = &mut self.kind {
            *m = Some(message.into());
        }
        self
    }

    fn matches(&self, r: &RequestRecord) -> bool {
        let resource_ok = match &self.resource {
            None => true,
            Some(want) => match want.split_once('/') {
                Some((res, sub)) => r.resource == res && r.subresource.as_deref() == Some(sub),
                None => r.resource == *want,
            },
        };
        resource_ok
            && !r.resource.is_empty()
            && self.verb.as_ref().is_none_or(|v| *v == r.verb)
            && self
                .namespace
                .as_ref()
                .is_none_or(|n| r.namespace.as_ref() == Some(n))
            && self
                .name
                .as_ref()
                .is_none_or(|n| r.name.as_ref() == Some(n))
            && (self.kind != FaultKind::Gone || r.verb == "watch")
    }
}

#[derive(Debug)]
struct Entry {
    id: u64,
    fault: Fault,
    rng: u64,
    hits: u64,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    entries: Vec<Entry>,
}

/// The faults of a server (see the [module docs](self)). Cloning shares them.
#[derive(Debug, Clone)]
pub struct Faults {
    inner: Arc<Mutex<Inner>>,
    seed: u64,
    drops: broadcast::Sender<Option<String>>,
}

/// A fault added to a server: count its hits, or remove it.
#[derive(Debug, Clone)]
pub struct FaultHandle {
    id: u64,
    faults: Faults,
}

impl FaultHandle {
    /// The fault's id (as the HTTP API names it).
    #[must_use]
    pub fn id(&self) -> u64 {
        self.id
    }

    /// How many times it has fired.
    #[must_use]
    pub fn hits(&self) -> u64 {
        self.faults
            .lock()
            .entries
            .iter()
            .find(|e| e.id == self.id)
            .map_or(0, |e| e.hits)
    }

    /// Removes the fault; `false` when it was already removed.
    pub fn remove(&self) -> bool {
        self.faults.remove(self.id)
    }
}

/// What the faults decided for one request.
#[derive(Debug, Default)]
pub(crate) struct Injection {
    /// Serve after this delay.
    pub latency: Duration,
    /// Answer with this instead of serving.
    pub answer: Option<Answer>,
    /// Serve first, then answer with [`Injection::answer`] all the same.
    pub serve_first: bool,
}

/// An answer a fault puts in place of the server's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// This error, as a `Status`.
    Error(ApiError),
    /// A watch whose one event is an `ERROR` `410 Expired`.
    ExpiredWatch,
}

impl Answer {
    /// The error of an expired watch's one event.
    pub(crate) fn expired() -> ApiError {
        ApiError::Gone("too old resource version (injected fault)".into())
    }
}

/// splitmix64: a small, seedable generator (no dependency).
fn next_random(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

impl Faults {
    /// No faults; random draws seeded from `seed`.
    #[must_use]
    pub(crate) fn new(seed: u64) -> Self {
        let (drops, _) = broadcast::channel(64);
        Self {
            inner: Arc::new(Mutex::new(Inner::default())),
            seed,
            drops,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a fault; it applies to requests from now on.
    pub fn add(&self, fault: Fault) -> FaultHandle {
        let mut inner = self.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        let rng = fault
            .seed
            .unwrap_or_else(|| self.seed ^ id.wrapping_mul(0xA076_1D64_78BD_642F));
        inner.entries.push(Entry {
            id,
            fault,
            rng,
            hits: 0,
        });
        FaultHandle {
            id,
            faults: self.clone(),
        }
    }

    /// Removes the fault `id`; `false` when there is none.
    pub fn remove(&self, id: u64) -> bool {
        let mut inner = self.lock();
        let before = inner.entries.len();
        inner.entries.retain(|e| e.id != id);
        inner.entries.len() != before
    }

    /// Removes every fault.
    pub fn clear(&self) {
        self.lock().entries.clear();
    }

    /// The faults, with their ids and hits.
    #[must_use]
    pub fn list(&self) -> Vec<(u64, Fault, u64)> {
        self.lock()
            .entries
            .iter()
            .map(|e| (e.id, e.fault.clone(), e.hits))
            .collect()
    }

    /// Ends the open watches of `resource` (plural), or of every resource.
    pub fn drop_watches(&self, resource: Option<&str>) {
        // No open watch is not an error.
        let _ = self.drops.send(resource.map(String::from));
    }

    /// Decides what happens to a request described by `record`.
    #[must_use]
    pub(crate) fn intercept(&self, record: &RequestRecord) -> Injection {
        let mut injection = Injection::default();
        let mut drop = false;
        {
            let mut inner = self.lock();
            for e in &mut inner.entries {
                if !e.fault.matches(record) || e.fault.times.is_some_and(|t| e.hits >= t) {
                    continue;
                }
                if let Some(p) = e.fault.probability
                    && next_random(&mut e.rng) >= p
                {
                    continue;
                }
                match &e.fault.kind {
                    FaultKind::Latency(d) => injection.latency += *d,
                    FaultKind::DropWatches => drop = true,
                    FaultKind::Error { code, message } if injection.answer.is_none() => {
                        injection.answer = Some(Answer::Error(injected_error(
                            *code,
                            message.as_deref(),
                            record,
                        )));
                        injection.serve_first = e.fault.after_serving;
                    }
                    FaultKind::Gone if injection.answer.is_none() => {
                        injection.answer = Some(Answer::ExpiredWatch);
                    }
                    // A second answering fault does not fire.
                    FaultKind::Error { .. } | FaultKind::Gone => continue,
                }
                e.hits += 1;
            }
        }
        if drop {
            self.drop_watches(Some(&record.resource));
        }
        injection
    }

    /// Completes when the open watches of `resource` are dropped (by
    /// [`Faults::drop_watches`] or a [`Fault::drop_watches`] firing); a
    /// watch of `resource` ends then.
    pub(crate) fn watches_dropped(
        &self,
        resource: &str,
    ) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.drops.subscribe();
        let resource = resource.to_string();
        async move {
            loop {
                match rx.recv().await {
                    Ok(None) => return,
                    Ok(Some(r)) if r == resource => return,
                    Ok(Some(_)) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => {
                        futures::future::pending::<()>().await;
                    }
                }
            }
        }
    }
}

/// The error an error fault answers a request described by `r` with.
fn injected_error(code: u16, message: Option<&str>, r: &RequestRecord) -> ApiError {
    let message = message.map_or_else(
        || {
            format!(
                "injected fault: {} {} {}",
                r.verb,
                r.resource,
                r.name.as_deref().unwrap_or_default()
            )
            .trim_end()
            .to_string()
        },
        String::from,
    );
    ApiError::Other {
        code,
        message,
        subject: Some(Subject::new(
            &r.group,
            &r.resource,
            r.name.as_deref().unwrap_or_default(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(verb: &str, resource: &str, name: Option<&str>) -> RequestRecord {
        RequestRecord {
            verb: verb.into(),
            group: String::new(),
            resource: resource.into(),
            subresource: None,
            namespace: Some("default".into()),
            name: name.map(String::from),
            path: String::new(),
            code: 0,
        }
    }

    #[test]
    fn counted_faults_stop_firing() {
        let f = Faults::new(1);
        let h = f.add(
            Fault::error(500)
                .verb("get")
                .resource("configmaps")
                .times(2),
        );
        let r = record("get", "configmaps", Some("a"));
        assert!(f.intercept(&r).answer.is_some());
        assert!(
            f.intercept(&record("list", "configmaps", None))
                .answer
                .is_none()
        );
        assert!(f.intercept(&r).answer.is_some());
        assert!(f.intercept(&r).answer.is_none());
        assert_eq!(h.hits(), 2);
        assert!(h.remove());
        assert!(!h.remove());
    }

    #[test]
    fn probability_is_seeded_and_roughly_right() {
        let draws = |seed| {
            let f = Faults::new(0);
            f.add(
                Fault::latency(Duration::from_millis(1))
                    .probability(0.25)
                    .seed(seed),
            );
            let r = record("get", "pods", None);
            (0..400)
                .map(|_| !f.intercept(&r).latency.is_zero())
                .collect::<Vec<_>>()
        };
        assert_eq!(draws(3), draws(3));
        let fired = draws(3).iter().filter(|x| **x).count();
        assert!((60..140).contains(&fired), "{fired}");
    }

    #[test]
    fn names_namespaces_and_subresources_narrow_the_match() {
        let f = Faults::new(1);
        f.add(Fault::error(409).resource("widgets/status").name("w"));
        let mut r = record("patch", "widgets", Some("w"));
        assert!(f.intercept(&r).answer.is_none());
        r.subresource = Some("status".into());
        assert!(f.intercept(&r).answer.is_some());
        r.name = Some("other".into());
        assert!(f.intercept(&r).answer.is_none());
        assert!(Fault::gone().matches(&record("watch", "pods", None)));
        assert!(
            !Fault::gone()
                .verb("get")
                .matches(&record("get", "pods", None))
        );
    }

    #[test]
    fn after_serving_is_an_error_that_serves_first() {
        let f = Faults::new(1);
        f.add(Fault::error(500).verb("create").after_serving());
        let injection = f.intercept(&record("create", "configmaps", None));
        assert!(injection.serve_first);
        assert_eq!(
            injection.answer,
            Some(Answer::Error(ApiError::Other {
                code: 500,
                message: "injected fault: create configmaps".into(),
                subject: Some(Subject::new("", "configmaps", "")),
            }))
        );
        let plain = f.intercept(&record("update", "configmaps", None));
        assert!(!plain.serve_first && plain.answer.is_none());
    }

    #[tokio::test]
    async fn dropping_watches_ends_those_of_the_resource() {
        let f = Faults::new(1);
        let widgets = f.watches_dropped("widgets");
        let pods = f.watches_dropped("pods");
        f.drop_watches(Some("widgets"));
        widgets.await;
        let everything = f.watches_dropped("pods");
        assert!(
            futures::FutureExt::now_or_never(pods).is_none(),
            "another resource's watches stay"
        );
        f.drop_watches(None);
        everything.await;
    }
}
