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

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use futures::{Stream, StreamExt};
use kube::Client;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use super::Watched;
use super::changes::{ObjectChange, object_changes};
use super::records::{self, Row};
use super::{object, page};

/// An object in the view: (kind, namespace, name).
type Key = (String, Option<String>, String);

/// How many updates a slow browser may fall behind before it is sent a
/// fresh snapshot.
const BACKLOG: usize = 1024;

/// A row with its kind, as `/api/objects` and the events send it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindRow {
    /// The resource's kind.
    pub kind: String,
    /// The row.
    #[serde(flatten)]
    pub row: Row,
}

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
/// use fsm_kube::view::Watched;
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
    /// A view of the objects of `watched` in `namespace` (`None`: all).
    #[must_use]
    pub fn new(client: Client, watched: Vec<Watched>, namespace: Option<String>) -> Self {
        WebView {
            shared: Arc::new(Shared {
                client,
                watched,
                namespace,
                rows: RwLock::new(BTreeMap::new()),
                updates: broadcast::channel(BACKLOG).0,
            }),
        }
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
                match records::row(&self.shared.client, watched, namespace.as_deref(), &name).await
                {
                    Ok(row) => (namespace, name, row),
                    Err(error) => {
                        tracing::warn!(%kind, %name, %error, "web view: cannot read the record");
                        return;
                    }
                }
            }
        };
        let key = (kind.clone(), namespace.clone(), name.clone());
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

    /// The routes of the view (all `GET`).
    pub fn router(&self) -> Router {
        Router::new()
            .route("/", get(index))
            .route("/api/objects", get(objects))
            .route("/events", get(events))
            .route("/objects/{kind}/{namespace}/{name}", get(object_page))
            .with_state(self.clone())
    }

    /// Follows the objects ([`follow`](WebView::follow)) and serves the
    /// view on `listener` until serving fails.
    ///
    /// # Errors
    /// Serving failed.
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        let follower = tokio::spawn({
            let view = self.clone();
            async move { view.follow().await }
        });
        let served = axum::serve(listener, self.router()).await;
        follower.abort();
        served
    }

    /// The events of one browser: a snapshot, then every update; a fresh
    /// snapshot when it fell behind.
    fn stream(&self) -> impl Stream<Item = SseEvent> + Send + use<> {
        // Subscribe first: nothing that happens after the snapshot is lost.
        let receiver = self.shared.updates.subscribe();
        let view = self.clone();
        let snapshot = snapshot_event(&view.rows());
        futures::stream::once(std::future::ready(snapshot)).chain(futures::stream::unfold(
            (receiver, view),
            |(mut receiver, view)| async move {
                let event = match receiver.recv().await {
                    Ok(update) => SseEvent::default()
                        .event("update")
                        .json_data(&update)
                        .unwrap_or_else(|_| SseEvent::default().comment("unserializable")),
                    Err(broadcast::error::RecvError::Lagged(_)) => snapshot_event(&view.rows()),
                    Err(broadcast::error::RecvError::Closed) => return None,
                };
                Some((event, (receiver, view)))
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

async fn events(
    State(view): State<WebView>,
) -> Sse<impl Stream<Item = Result<SseEvent, std::convert::Infallible>>> {
    Sse::new(view.stream().map(Ok)).keep_alive(KeepAlive::default())
}

async fn object_page(
    State(view): State<WebView>,
    Path((kind, namespace, name)): Path<(String, String, String)>,
) -> Response {
    let Some(watched) = view.shared.watched.iter().find(|w| w.resource.kind == kind) else {
        return not_found(&format!("no resource of kind {kind} here"));
    };
    let namespace = (namespace != "-").then_some(namespace);
    let client = &view.shared.client;
    let record = records::record(client, watched, namespace.as_deref(), &name).await;
    let object = match watched
        .api(client, namespace.as_deref())
        .get_opt(&name)
        .await
    {
        Ok(Some(object)) => object,
        Ok(None) => return not_found(&format!("{kind} {name} not found")),
        Err(error) => return failed(&error),
    };
    // Reading events needs `list` on them, which an operator's role may
    // not grant: the page shows why they are missing instead.
    let events = object::events(client, &object, 20)
        .await
        .map_err(|error| format!("cannot list the events: {error}"));
    let html = page::object(
        watched,
        &object,
        record
            .as_ref()
            .map(|(record, _)| record)
            .map_err(ToString::to_string),
        events.as_deref().map_err(String::as_str),
        jiff::Timestamp::now(),
    );
    Html(html).into_response()
}

fn not_found(message: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{message}\n"),
    )
        .into_response()
}

fn failed(error: &kube::Error) -> Response {
    (
        StatusCode::BAD_GATEWAY,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("the API server failed: {error}\n"),
    )
        .into_response()
}
