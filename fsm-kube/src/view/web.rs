//! [`WebView`]: the operator's web view. A page per cluster with each
//! machine's diagram (live counts per state) and a live table of objects,
//! and a page per object (history, compensation, conditions, events).
//!
//! Read-only (`GET` only) and self-contained: the page, its style and its
//! script are in the binary, and the diagrams are drawn here
//! ([`fsm_core::MachineGraph::svg`]). The rows come from the watches of
//! [`object_changes`] and reach browsers as server-sent events: the API
//! is not polled per viewer. The data of sensitive states is never sent.
//!
//! | path | what |
//! | --- | --- |
//! | `/` | the page |
//! | `/api/objects` | every row as JSON (`kind` added) |
//! | `/events` | server-sent events: `snapshot` (every row), then `update` (one row, or its deletion) |
//! | `/objects/{kind}/{namespace}/{name}` | an object's page (`-` for no namespace) |
//! | `/assets/view.css`, `/assets/view.js` | the pages' style and script |
//!
//! # Hostile browsers and clients
//! On the pod's loopback (reached with `kubectl port-forward`, which RBAC
//! guards) the view asks nobody who they are. Reached from beyond the pod,
//! [`WebView::require_kubernetes_access`] lets in only a bearer token of
//! someone the API server allows to list what the view shows
//! ([`super::access`]). Whoever reaches its port, it also guards:
//! - **Names**: an object page's namespace must be a DNS-1123 label and
//!   its name a DNS-1123 subdomain (else 400), in the view's namespace
//!   when it has one (else 404), and both go into API URLs as path
//!   segments ([`crate::records::names`]).
//! - **Host allow-list** (DNS rebinding): a request whose `Host` is not
//!   `localhost`, a loopback address, the address the connection came in
//!   on, or one of [`WebView::allow_hosts`] is refused with 403.
//! - **Headers** on every response: a Content-Security-Policy without
//!   inline script or style ([`CONTENT_SECURITY_POLICY`]),
//!   `X-Frame-Options: DENY`, `X-Content-Type-Options: nosniff`,
//!   `Referrer-Policy: no-referrer`, `Cache-Control: no-store`.
//! - **Caps** ([`ViewLimits`]): open connections (more wait in the
//!   kernel's backlog), requests in progress and event streams; over a
//!   cap, 503 with `Retry-After` (and the connection closed). A stream's
//!   slot is freed when its browser goes away; a connection idle for
//!   [`ViewLimits::idle_timeout`] (one that never sends a request) is
//!   closed.
//! - **Shared reads**: the page of the machines, `/api/objects` and the
//!   events come from the view's watches; an object's page is read once
//!   per [`PAGE_TTL`] whoever asks (and again as soon as a watch reports
//!   the object written), not once per viewer.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::serve::IncomingStream;
use fsm_core::StateRecord;
use fsm_core::text::terminal_safe;
use futures::{Stream, StreamExt};
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::DynamicObject;
use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast};

use super::access::{KubernetesAccess, Verdict, bearer_token};
use super::page;
use crate::records::Watched;
use crate::records::changes::{ObjectChange, object_changes};
use crate::records::names::{is_dns1123_label, is_dns1123_subdomain, path_segment};
use crate::records::object;
pub use crate::records::rows::KindRow;
use crate::records::rows::{self, Row};

/// An object in the view: (kind, namespace, name).
type Key = (String, Option<String>, String);

/// How many updates a slow browser may fall behind before it is sent a
/// fresh snapshot.
const BACKLOG: usize = 1024;

/// How long an object's page, once read, is shown to every viewer
/// without reading it again (unless a watch reports the object written
/// meanwhile).
pub const PAGE_TTL: Duration = Duration::from_secs(2);

/// How many objects' pages are kept at most; past that, pages are read
/// for each viewer.
const PAGE_CACHE_MAX: usize = 256;

/// The `Retry-After` of a 503 over a cap, in seconds.
pub const RETRY_AFTER_SECONDS: u32 = 5;

/// The view's Content-Security-Policy: its own style, script and event
/// stream, nothing inline, nothing from elsewhere, never framed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// The caps of a [`WebView`] ([`WebView::limits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViewLimits {
    /// Event streams (`/events`, one per open page) at a time; one more
    /// is answered 503.
    pub max_streams: usize,
    /// Other requests in progress at a time; one more is answered 503.
    pub max_requests: usize,
    /// Open connections; further ones wait in the kernel's backlog until
    /// one closes. Keep it above `max_streams + max_requests`.
    pub max_connections: usize,
    /// A connection on which nothing was read or written for this long is
    /// closed (one that never sends a request, an idle keep-alive); event
    /// streams send a keep-alive comment every half of it.
    pub idle_timeout: Duration,
}

impl ViewLimits {
    /// The default of `max_streams` (`run --view-max-streams`).
    pub const DEFAULT_MAX_STREAMS: usize = 64;
    /// The default of `max_requests` (`run --view-max-requests`).
    pub const DEFAULT_MAX_REQUESTS: usize = 32;
    /// The default of `max_connections`.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
    /// The default of `idle_timeout`.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
}

impl Default for ViewLimits {
    fn default() -> Self {
        ViewLimits {
            max_streams: Self::DEFAULT_MAX_STREAMS,
            max_requests: Self::DEFAULT_MAX_REQUESTS,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// Who may ask, and how many at a time.
struct Guard {
    /// Host names allowed besides loopback and the connection's own
    /// address, lowercase; `*` allows any.
    hosts: Vec<String>,
    limits: ViewLimits,
    streams: Arc<Semaphore>,
    requests: Arc<Semaphore>,
}

impl Guard {
    fn new(hosts: Vec<String>, limits: ViewLimits) -> Self {
        Guard {
            hosts: hosts
                .into_iter()
                .map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect(),
            limits,
            streams: Arc::new(Semaphore::new(limits.max_streams)),
            requests: Arc::new(Semaphore::new(limits.max_requests)),
        }
    }
}

/// What an object's page shows, read once for every viewer for
/// [`PAGE_TTL`]: `Err` when the API failed, `None` when the object does
/// not exist.
type PageData = Result<Option<PageParts>, String>;

struct PageParts {
    object: DynamicObject,
    record: Result<StateRecord, String>,
    events: Result<Vec<Event>, String>,
}

/// A read of an object's page that viewers share.
type SharedRead = Arc<tokio::sync::OnceCell<Arc<PageData>>>;

/// What an `update` event carries: an object's new row, or its deletion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Update {
    /// The resource's kind.
    pub kind: String,
    /// The object's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
    /// Its row; `None` when it was deleted.
    pub row: Option<Row>,
}

struct Shared {
    client: Client,
    watched: Vec<Watched>,
    namespace: Option<String>,
    rows: RwLock<BTreeMap<Key, Row>>,
    updates: broadcast::Sender<Update>,
    /// Objects' pages, read at most once per [`PAGE_TTL`].
    pages: Mutex<HashMap<Key, (Instant, SharedRead)>>,
}

/// The web view of the objects of some resources, kept up to date by
/// [`follow`](WebView::follow) and served by [`router`](WebView::router).
///
/// # Expected flow
/// Build it with the resources to show (their machines as
/// [`Watched::of`]), then [`serve`](WebView::serve) it on a listener,
/// bound to loopback unless people elsewhere must see it: it shows the
/// objects' names, states and errors to whoever reaches the port.
///
/// ```no_run
/// # async fn example(client: kube::Client) -> std::io::Result<()> {
/// # use fsm_kube::prelude::*; use kube::CustomResource;
/// # #[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
/// # #[kube(group = "example.io", version = "v1", kind = "Database", namespaced, status = "DatabaseStatus")]
/// # pub struct DatabaseSpec { pub size: u32 }
/// # #[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
/// # pub struct DatabaseStatus { pub fsm: Option<FsmStatus> }
/// # #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
/// # #[fsm(resource = Database)]
/// # pub enum DbState { #[fsm(initial, final, ready)] Ready, #[fsm(failed)] Failed }
/// use fsm_kube::cli::StoreKind;
/// use fsm_kube::records::Watched;
/// use fsm_kube::view::web::WebView;
///
/// let view = WebView::new(client, vec![Watched::of::<DbState>(StoreKind::Status)], None);
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
/// view.serve(listener).await
/// # }
/// ```
#[derive(Clone)]
pub struct WebView {
    shared: Arc<Shared>,
    guard: Arc<Guard>,
    access: Option<Arc<KubernetesAccess>>,
}

impl std::fmt::Debug for WebView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebView")
            .field("watched", &self.shared.watched)
            .field("namespace", &self.shared.namespace)
            .finish_non_exhaustive()
    }
}

impl WebView {
    /// A view of the objects of `watched` in `namespace` (`None`: all),
    /// with the default [`ViewLimits`] and no host allowed besides
    /// loopback and the address it is reached at.
    #[must_use]
    pub fn new(client: Client, watched: Vec<Watched>, namespace: Option<String>) -> Self {
        WebView {
            shared: Arc::new(Shared {
                client,
                watched,
                namespace,
                rows: RwLock::new(BTreeMap::new()),
                updates: broadcast::channel(BACKLOG).0,
                pages: Mutex::new(HashMap::new()),
            }),
            guard: Arc::new(Guard::new(Vec::new(), ViewLimits::default())),
            access: None,
        }
    }

    /// Lets in only requests with a bearer token that the API server
    /// authenticates as someone allowed to `list` every resource the view
    /// shows, where it shows them ([`KubernetesAccess`]); others get 401
    /// or 403, and 503 while the API server cannot review. For a view
    /// reached from beyond the pod; the view's client needs `create` on
    /// TokenReviews and SubjectAccessReviews.
    #[must_use]
    pub fn require_kubernetes_access(mut self) -> Self {
        self.access = Some(Arc::new(KubernetesAccess::new(
            self.shared.client.clone(),
            &self.shared.watched,
            self.shared.namespace.clone(),
        )));
        self
    }

    /// Allows requests whose `Host` (without its port) is one of `hosts`
    /// too, case-insensitively: the names the view is reached by through
    /// a Service or an Ingress. `*` allows any host, giving up the
    /// protection against DNS rebinding. Replaces the hosts given before;
    /// call it before [`router`](WebView::router) or
    /// [`serve`](WebView::serve).
    #[must_use]
    pub fn allow_hosts(mut self, hosts: impl IntoIterator<Item = String>) -> Self {
        self.guard = Arc::new(Guard::new(hosts.into_iter().collect(), self.guard.limits));
        self
    }

    /// Caps streams, requests and connections at `limits`; call it before
    /// [`router`](WebView::router) or [`serve`](WebView::serve).
    #[must_use]
    pub fn limits(mut self, limits: ViewLimits) -> Self {
        self.guard = Arc::new(Guard::new(self.guard.hosts.clone(), limits));
        self
    }

    /// How many browsers follow the live updates now.
    pub fn viewers(&self) -> usize {
        self.shared.updates.receiver_count()
    }

    /// Every row, by kind, namespace and name.
    pub fn rows(&self) -> Vec<KindRow> {
        self.shared
            .rows
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|((kind, _, _), row)| KindRow {
                kind: kind.clone(),
                row: row.clone(),
            })
            .collect()
    }

    /// Follows the objects of every resource until cancelled: reads an
    /// object's record whenever a watch reports it written, and publishes
    /// its row when it changed. Errors are logged, and the watches retry.
    pub async fn follow(&self) {
        let streams = self.shared.watched.iter().map(|watched| {
            let view = self.clone();
            let watched = watched.clone();
            let changes = object_changes(
                &self.shared.client,
                &watched,
                self.shared.namespace.as_deref(),
            );
            async move {
                let mut changes = std::pin::pin!(changes);
                while let Some(change) = changes.next().await {
                    view.apply(&watched, change).await;
                }
            }
        });
        futures::future::join_all(streams).await;
    }

    async fn apply(
        &self,
        watched: &Watched,
        change: Result<ObjectChange, kube::runtime::watcher::Error>,
    ) {
        let kind = watched.resource.kind.clone();
        let (namespace, name, row) = match change {
            Err(error) => {
                tracing::warn!(%kind, %error, "web view: watch failed; retrying");
                return;
            }
            Ok(ObjectChange::Deleted { namespace, name }) => (namespace, name, None),
            Ok(ObjectChange::Touched { namespace, name }) => {
                match rows::row(&self.shared.client, watched, namespace.as_deref(), &name).await {
                    Ok(row) => (namespace, name, row),
                    Err(error) => {
                        tracing::warn!(%kind, %name, %error, "web view: cannot read the record");
                        return;
                    }
                }
            }
        };
        let key = (kind.clone(), namespace.clone(), name.clone());
        // The object was written: its page is read afresh.
        self.shared
            .pages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
        {
            let mut rows = self
                .shared
                .rows
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let changed = match &row {
                Some(row) => rows.insert(key, row.clone()).as_ref() != Some(row),
                None => rows.remove(&key).is_some(),
            };
            if !changed {
                return;
            }
        }
        // No viewer is not an error.
        let _ = self.shared.updates.send(Update {
            kind,
            namespace,
            name,
            row,
        });
    }

    /// The routes of the view (all `GET`), behind its host allow-list,
    /// its security headers, its caps on requests and streams and, when
    /// required, its access check. The
    /// connection's own address is allowed as a host only when served
    /// with [`Peer`] as connect info, as [`serve`](WebView::serve) does.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/", get(index))
            .route("/api/objects", get(objects))
            .route("/events", get(events))
            .route("/objects/{kind}/{namespace}/{name}", get(object_page))
            .route(page::STYLE_PATH, get(style))
            .route(page::SCRIPT_PATH, get(script))
            .layer(middleware::from_fn_with_state(self.clone(), check_access))
            .layer(middleware::from_fn_with_state(self.clone(), limit_requests))
            .layer(middleware::from_fn_with_state(self.clone(), check_host))
            .layer(middleware::from_fn(security_headers))
            .with_state(self.clone())
    }

    /// Follows the objects ([`follow`](WebView::follow)) and serves the
    /// view on `listener` until serving fails, with at most
    /// [`ViewLimits::max_connections`] connections open.
    ///
    /// # Errors
    /// Serving failed.
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        let follower = tokio::spawn({
            let view = self.clone();
            async move { view.follow().await }
        });
        let listener = CappedListener {
            inner: listener,
            connections: Arc::new(Semaphore::new(self.guard.limits.max_connections)),
            idle_timeout: self.guard.limits.idle_timeout,
        };
        let served = axum::serve(
            listener,
            self.router().into_make_service_with_connect_info::<Peer>(),
        )
        .await;
        follower.abort();
        served
    }

    /// What an object's page shows, read once for every viewer asking
    /// within [`PAGE_TTL`] (and while it is being read).
    async fn page_data(&self, watched: &Watched, key: Key) -> Arc<PageData> {
        let read = {
            let mut pages = self
                .shared
                .pages
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            pages.retain(|_, (at, _)| now.duration_since(*at) < PAGE_TTL);
            match pages.get(&key) {
                Some((_, read)) => read.clone(),
                None => {
                    let read = SharedRead::default();
                    if pages.len() < PAGE_CACHE_MAX {
                        pages.insert(key.clone(), (now, read.clone()));
                    }
                    read
                }
            }
        };
        let client = &self.shared.client;
        let (_, namespace, name) = key;
        read.get_or_init(|| async move {
            Arc::new(read_page(client, watched, namespace.as_deref(), &name).await)
        })
        .await
        .clone()
    }

    /// The events of one browser: a snapshot, then every update; a fresh
    /// snapshot when it fell behind. `permit` is its slot among the
    /// streams, freed when the stream is dropped (its browser went away).
    fn stream(&self, permit: OwnedSemaphorePermit) -> impl Stream<Item = SseEvent> + Send + use<> {
        // Subscribe first: nothing that happens after the snapshot is lost.
        let receiver = self.shared.updates.subscribe();
        let view = self.clone();
        let snapshot = snapshot_event(&view.rows());
        futures::stream::once(std::future::ready(snapshot)).chain(futures::stream::unfold(
            (receiver, view, permit),
            |(mut receiver, view, permit)| async move {
                let event = match receiver.recv().await {
                    Ok(update) => SseEvent::default()
                        .event("update")
                        .json_data(&update)
                        .unwrap_or_else(|_| SseEvent::default().comment("unserializable")),
                    Err(broadcast::error::RecvError::Lagged(_)) => snapshot_event(&view.rows()),
                    Err(broadcast::error::RecvError::Closed) => return None,
                };
                Some((event, (receiver, view, permit)))
            },
        ))
    }
}

fn snapshot_event(rows: &[KindRow]) -> SseEvent {
    SseEvent::default()
        .event("snapshot")
        .json_data(rows)
        .unwrap_or_else(|_| SseEvent::default().comment("unserializable"))
}

async fn index(State(view): State<WebView>) -> Html<String> {
    Html(page::index(&view.shared.watched, &view.rows()))
}

async fn objects(State(view): State<WebView>) -> axum::Json<Vec<KindRow>> {
    axum::Json(view.rows())
}

async fn events(State(view): State<WebView>) -> Response {
    let Ok(permit) = view.guard.streams.clone().try_acquire_owned() else {
        tracing::debug!(
            max = view.guard.limits.max_streams,
            "web view: an event stream over the cap refused"
        );
        return over_cap("too many event streams");
    };
    Sse::new(view.stream(permit).map(Ok::<_, std::convert::Infallible>))
        .keep_alive(
            KeepAlive::default().interval(
                (view.guard.limits.idle_timeout / 2)
                    .clamp(Duration::from_millis(100), Duration::from_secs(15)),
            ),
        )
        .into_response()
}

async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        page::STYLE,
    )
        .into_response()
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        page::SCRIPT,
    )
        .into_response()
}

async fn object_page(
    State(view): State<WebView>,
    Path((kind, namespace, name)): Path<(String, String, String)>,
) -> Response {
    // Checked before anything is read: a name is put into API URLs.
    if !is_dns1123_subdomain(&name) {
        return plain(
            StatusCode::BAD_REQUEST,
            "an object's name is a DNS-1123 subdomain (lowercase letters, digits, '-' and '.')",
        );
    }
    if namespace != "-" && !is_dns1123_label(&namespace) {
        return plain(
            StatusCode::BAD_REQUEST,
            "a namespace is a DNS-1123 label (lowercase letters, digits and '-'), or '-' for none",
        );
    }
    let Some(watched) = view.shared.watched.iter().find(|w| w.resource.kind == kind) else {
        return not_found(&format!("no resource of kind {kind} here"));
    };
    let namespace = (namespace != "-").then_some(namespace);
    // A view of one namespace shows nothing of the others.
    if let Some(own) = &view.shared.namespace
        && watched.resource.namespaced
        && namespace.as_ref() != Some(own)
    {
        return not_found(&format!("{kind} {name} not found"));
    }
    let key = (kind.clone(), namespace, name.clone());
    let data = view.page_data(watched, key).await;
    let parts = match data.as_ref() {
        Ok(Some(parts)) => parts,
        Ok(None) => return not_found(&format!("{kind} {name} not found")),
        Err(error) => return failed(error),
    };
    let html = page::object(
        watched,
        &parts.object,
        parts.record.as_ref().map_err(String::clone),
        parts.events.as_deref().map_err(String::as_str),
        jiff::Timestamp::now(),
    );
    Html(html).into_response()
}

/// Reads what an object's page shows: the object (one GET), its record
/// (from the object, or one GET of its record object) and the Events
/// about it (one list).
async fn read_page(
    client: &Client,
    watched: &Watched,
    namespace: Option<&str>,
    name: &str,
) -> PageData {
    let object = match watched
        .api(client, namespace)
        .get_opt(&path_segment(name))
        .await
    {
        Ok(Some(object)) => object,
        Ok(None) => return Ok(None),
        Err(error) => return Err(error.to_string()),
    };
    let record = rows::record_of(client, watched, &object)
        .await
        .map(|(record, _)| record)
        .map_err(|error| error.to_string());
    // Reading events needs `list` on them, which an operator's role may
    // not grant: the page shows why they are missing instead.
    let events = object::events(client, &object, 20)
        .await
        .map_err(|error| format!("cannot list the events: {error}"));
    Ok(Some(PageParts {
        object,
        record,
        events,
    }))
}

fn plain(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{message}\n"),
    )
        .into_response()
}

fn not_found(message: &str) -> Response {
    plain(StatusCode::NOT_FOUND, message)
}

fn failed(error: &str) -> Response {
    plain(
        StatusCode::BAD_GATEWAY,
        &format!("the API server failed: {error}"),
    )
}

fn over_cap(message: &str) -> Response {
    let mut response = plain(StatusCode::SERVICE_UNAVAILABLE, message);
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
    // The connection is closed too: a client over a cap does not keep a
    // connection's slot.
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// At most [`ViewLimits::max_requests`] requests in progress; an event
/// stream counts here only until it starts (then as a stream).
async fn limit_requests(State(view): State<WebView>, request: Request, next: Next) -> Response {
    let Ok(_permit) = view.guard.requests.clone().try_acquire_owned() else {
        tracing::debug!(
            max = view.guard.limits.max_requests,
            "web view: a request over the cap refused"
        );
        return over_cap("too many requests in progress");
    };
    next.run(request).await
}

/// With [`WebView::require_kubernetes_access`], lets in only a request
/// whose bearer token is let in by [`KubernetesAccess`]: 401 (with
/// `WWW-Authenticate: Bearer`) without a token or for one the API server
/// does not authenticate, 403 for an identity not allowed, 503 when the
/// API server cannot review it.
async fn check_access(State(view): State<WebView>, request: Request, next: Next) -> Response {
    let Some(access) = &view.access else {
        return next.run(request).await;
    };
    let unauthorized = |message: &str| {
        let mut response = plain(StatusCode::UNAUTHORIZED, message);
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"operator-fsm view\""),
        );
        response
    };
    let Some(token) = bearer_token(request.headers()) else {
        return unauthorized(
            "this view needs a Kubernetes bearer token (Authorization: Bearer TOKEN) of someone who may list what it shows",
        );
    };
    match access.check(token).await {
        Ok(Verdict::Allowed { .. }) => next.run(request).await,
        Ok(Verdict::Unauthenticated { reason }) => {
            tracing::debug!(%reason, "web view: a token the API server does not authenticate refused");
            unauthorized("the API server does not authenticate this token")
        }
        Ok(Verdict::Denied { user, lacks }) => {
            tracing::debug!(%user, %lacks, "web view: a user not allowed refused");
            plain(
                StatusCode::FORBIDDEN,
                &terminal_safe(&format!("{user} may not {lacks}")),
            )
        }
        Err(error) => {
            tracing::warn!(%error, "web view: a token could not be reviewed; refused");
            let mut response = plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "the API server could not review the token; try again",
            );
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
            response
        }
    }
}

/// Refuses (403) a request whose `Host` is not allowed ([`host_allowed`]).
async fn check_host(State(view): State<WebView>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.as_str().to_owned()));
    let local = request
        .extensions()
        .get::<ConnectInfo<Peer>>()
        .and_then(|info| info.0.local)
        .map(|addr| addr.ip());
    match host {
        Some(host) if host_allowed(&host, local, &view.guard.hosts) => next.run(request).await,
        host => {
            tracing::debug!(?host, "web view: a request for a host not allowed refused");
            plain(
                StatusCode::FORBIDDEN,
                "this Host is not allowed: reach the view as localhost, or add the name with --view-allowed-host",
            )
        }
    }
}

/// Whether a request with `Host: host` may be answered: `localhost`, a
/// loopback address, `local` (the address the connection came in on), or
/// one of `allowed` (lowercase; `*` allows any); the port is ignored. A
/// page of a name that merely resolves to the view (DNS rebinding) names
/// itself in `Host`, and is refused.
fn host_allowed(host: &str, local: Option<IpAddr>, allowed: &[String]) -> bool {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((ip, port)) if port.is_empty() || port.starts_with(':') => ip,
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            Some(_) => return false,
            None => host,
        }
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name.is_empty() {
        return false;
    }
    if name == "localhost" || allowed.iter().any(|a| a == "*" || *a == name) {
        return true;
    }
    match name.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback() || Some(ip) == local,
        Err(_) => false,
    }
}

/// The headers every response of the view carries.
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// A connection to the view: where it came from and the address it came
/// in on (the view allows that address as a `Host`). Its connect info
/// when served by [`WebView::serve`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The address the connection came in on (`None` when the system
    /// would not say).
    pub local: Option<SocketAddr>,
    /// The client's address.
    pub remote: SocketAddr,
}

impl Connected<IncomingStream<'_, CappedListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, CappedListener>) -> Self {
        *stream.remote_addr()
    }
}

/// A TCP listener that holds at most a number of connections open: it
/// accepts the next one only when one closed; and closes a connection idle
/// for [`ViewLimits::idle_timeout`].
pub struct CappedListener {
    inner: tokio::net::TcpListener,
    connections: Arc<Semaphore>,
    idle_timeout: Duration,
}

impl std::fmt::Debug for CappedListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CappedListener")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl axum::serve::Listener for CappedListener {
    type Io = CappedStream;
    type Addr = Peer;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        // The semaphore is never closed; without a permit the connection
        // is served anyway rather than never.
        let permit = self.connections.clone().acquire_owned().await.ok();
        loop {
            match self.inner.accept().await {
                Ok((io, remote)) => {
                    let peer = Peer {
                        local: io.local_addr().ok(),
                        remote,
                    };
                    return (
                        CappedStream {
                            io,
                            _permit: permit,
                            idle_timeout: self.idle_timeout,
                            idle: Box::pin(tokio::time::sleep(self.idle_timeout)),
                        },
                        peer,
                    );
                }
                Err(error) => {
                    // Out of file descriptors and the like: wait, as
                    // axum's own listener does.
                    tracing::warn!(%error, "web view: cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        let local = self.inner.local_addr()?;
        Ok(Peer {
            local: Some(local),
            remote: local,
        })
    }
}

/// A connection of a [`CappedListener`], holding its slot until closed;
/// reading from it fails (so it is closed) once nothing was read or
/// written for its idle timeout.
pub struct CappedStream {
    io: tokio::net::TcpStream,
    _permit: Option<OwnedSemaphorePermit>,
    idle_timeout: Duration,
    idle: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl CappedStream {
    /// Something was read or written: the idle timeout starts again.
    fn touch(&mut self) {
        let deadline = tokio::time::Instant::now() + self.idle_timeout;
        self.idle.as_mut().reset(deadline);
    }
}

impl std::fmt::Debug for CappedStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CappedStream")
            .field("io", &self.io)
            .finish_non_exhaustive()
    }
}

impl tokio::io::AsyncRead for CappedStream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::future::Future as _;
        match std::pin::Pin::new(&mut self.io).poll_read(cx, buf) {
            std::task::Poll::Ready(read) => {
                self.touch();
                std::task::Poll::Ready(read)
            }
            std::task::Poll::Pending => {
                if self.idle.as_mut().poll(cx).is_ready() {
                    tracing::debug!("web view: an idle connection closed");
                    std::task::Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "idle connection",
                    )))
                } else {
                    std::task::Poll::Pending
                }
            }
        }
    }
}

impl tokio::io::AsyncWrite for CappedStream {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let written = std::pin::Pin::new(&mut self.io).poll_write(cx, buf);
        if let std::task::Poll::Ready(Ok(n)) = &written
            && *n > 0
        {
            self.touch();
        }
        written
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let written = std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if let std::task::Poll::Ready(Ok(n)) = &written
            && *n > 0
        {
            self.touch();
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_the_connections_address_and_allowed_names_are_hosts() {
        let local: Option<IpAddr> = "10.0.0.7".parse().ok();
        let allowed = vec!["view.example.io".to_owned()];
        for host in [
            "localhost",
            "localhost:8090",
            "LOCALHOST.",
            "127.0.0.1",
            "127.0.0.1:8090",
            "[::1]",
            "[::1]:8090",
            "10.0.0.7:8090",
            "view.example.io",
            "View.Example.IO:443",
        ] {
            assert!(host_allowed(host, local, &allowed), "{host}");
        }
        for host in [
            "evil.example.com",
            "evil.example.com:8090",
            "10.0.0.8",
            "localhost.evil.example.com",
            "[::1]x",
            "localhost:80x",
            "",
            ":8090",
            "0.0.0.0",
        ] {
            assert!(!host_allowed(host, local, &allowed), "{host}");
        }
        assert!(host_allowed("anything:1", None, &["*".to_owned()]));
    }
}
