//! Watches: a stream of newline-delimited watch events for one resource.
//!
//! A watch starts under the server's lock ([`Watch::start`]): it takes the
//! initial events (the current objects, or the history after the requested
//! `resourceVersion`, or a `410 Expired` error event when the history no
//! longer reaches back) and subscribes to the store's broadcast in the same
//! critical section, so no change is lost or seen twice. It then follows the
//! broadcast ([`Watch::into_stream`]), filtered by namespace and selectors,
//! with periodic `BOOKMARK`s when asked, until `timeoutSeconds`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::Instant;

use crate::cluster::{Cluster, present};
use crate::resources::ResourceDef;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::{EventType, StoreEvent};
use crate::table::{self, IncludeObject};

/// What a client asked to watch.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    /// The resource (and version the events are presented in).
    pub def: Arc<ResourceDef>,
    /// Only this namespace, or all.
    pub namespace: Option<String>,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `resourceVersion`; `None` or `Some(0)` starts with the current objects.
    pub resource_version: Option<u64>,
    /// `sendInitialEvents=true`: the current objects, then an initial-events-end bookmark.
    pub send_initial_events: bool,
    /// `allowWatchBookmarks=true`.
    pub bookmarks: bool,
    /// How long until the server ends the watch.
    pub timeout: Duration,
    /// How often a bookmark is sent when asked for.
    pub bookmark_interval: Duration,
    /// Render objects as Tables (for `kubectl get --watch`).
    pub table: Option<IncludeObject>,
    /// Objects as stored (their stored `apiVersion`, not decoded), for a
    /// watch whose objects are converted afterwards.
    pub as_stored: bool,
}

/// A started watch.
#[derive(Debug)]
pub struct Watch {
    req: WatchRequest,
    pending: VecDeque<Bytes>,
    rx: broadcast::Receiver<Arc<StoreEvent>>,
    seen: u64,
    closed: bool,
    /// Whether a Table event has carried the column definitions: the real
    /// server sends them with the first only (`null` after).
    columns_sent: std::cell::Cell<bool>,
}

impl Watch {
    /// Starts a watch; must be called under the lock that guards `cluster`.
    ///
    /// # Errors
    /// [`ApiError::BadRequest`] for unsupported field selectors.
    pub fn start(cluster: &Cluster, mut req: WatchRequest) -> Result<Self, ApiError> {
        req.fields = req.fields.resolve(&req.def)?;
        let store = &cluster.store;
        let mut w = Self {
            rx: store.subscribe(),
            seen: store.revision(),
            pending: VecDeque::new(),
            closed: false,
            columns_sent: std::cell::Cell::new(false),
            req,
        };
        let from = w.req.resource_version.filter(|rv| *rv > 0);
        match from {
            Some(rv) if !w.req.send_initial_events => match store.events_since(rv) {
                Ok(events) => {
                    for e in events {
                        if let Some(line) = w.render(&e) {
                            w.pending.push_back(line);
                        }
                    }
                }
                Err(too_old) => {
                    let gone = ApiError::Gone(format!(
                        "too old resource version: {} ({})",
                        too_old.requested, too_old.oldest
                    ));
                    w.pending.push_back(error_event(&gone));
                    w.closed = true;
                }
            },
            _ => {
                let gr = w.req.def.group_resource();
                for o in store.list(&gr, w.req.namespace.as_deref()) {
                    if w.matches(&o) {
                        let obj = w.object(&o);
                        w.pending.push_back(line("ADDED", obj));
                    }
                }
                if w.req.send_initial_events && w.req.bookmarks {
                    let mut b = w.bookmark();
                    b["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
                    w.pending.push_back(line("BOOKMARK", b));
                }
            }
        }
        Ok(w)
    }

    fn matches(&self, o: &Value) -> bool {
        self.req.labels.matches(o) && self.req.fields.matches(o)
    }

    fn object(&self, o: &Value) -> Value {
        let presented = if self.req.as_stored {
            o.clone()
        } else {
            present(&self.req.def, o)
        };
        match self.req.table {
            Some(include) => {
                let mut t = table::render(
                    &self.req.def,
                    std::slice::from_ref(&presented),
                    presented["metadata"]["resourceVersion"].as_str(),
                    include,
                    jiff::Timestamp::now(),
                );
                if self.columns_sent.replace(true) {
                    t["columnDefinitions"] = Value::Null;
                }
                t
            }
            None => presented,
        }
    }

    fn bookmark(&self) -> Value {
        json!({
            "kind": self.req.def.kind,
            "apiVersion": self.req.def.api_version(),
            "metadata": {"resourceVersion": self.seen.to_string()},
        })
    }

    /// The event line this watcher sends for a store event, if any.
    fn render(&self, e: &StoreEvent) -> Option<Bytes> {
        if e.resource != self.req.def.group_resource() {
            return None;
        }
        // From a version the server has not reached yet, only the changes
        // after it (the real watch cache skips those up to it).
        if self
            .req
            .resource_version
            .is_some_and(|rv| !self.req.send_initial_events && e.revision <= rv)
        {
            return None;
        }
        if let Some(ns) = &self.req.namespace
            && *ns != e.namespace
        {
            return None;
        }
        let now = self.matches(&e.object);
        let before = e.previous.as_ref().is_some_and(|p| self.matches(p));
        let kind = match e.kind {
            EventType::Added if now => EventType::Added,
            EventType::Modified if now && before => EventType::Modified,
            EventType::Modified if now => EventType::Added,
            EventType::Modified if before => EventType::Deleted,
            EventType::Deleted if before || now => EventType::Deleted,
            _ => return None,
        };
        if e.kind == EventType::Modified
            && kind == EventType::Deleted
            && let Some(previous) = &e.previous
        {
            // Leaving the selection: the real server sends the last state
            // that matched, at the revision of the change.
            let mut last = (**previous).clone();
            last["metadata"]["resourceVersion"] = json!(e.revision.to_string());
            return Some(line(kind.as_str(), self.object(&last)));
        }
        let stored_as_presented = self.req.table.is_none()
            && e.object.get("apiVersion").and_then(Value::as_str)
                == Some(self.req.def.api_version().as_str());
        if stored_as_presented || (self.req.as_stored && self.req.table.is_none()) {
            // The common case: every watcher of this version sends the same bytes.
            return Some(encoded_line(kind.as_str(), e.encoded()));
        }
        Some(line(kind.as_str(), self.object(&e.object)))
    }

    /// The events as newline-delimited JSON, ending at the timeout, when the
    /// server goes away, or when this watcher falls too far behind.
    pub fn into_stream(self) -> impl Stream<Item = Result<Bytes, std::convert::Infallible>> + Send {
        let deadline = Instant::now() + self.req.timeout;
        let interval = self.req.bookmark_interval.max(Duration::from_millis(10));
        // The real server also sends a bookmark 2 s before the watch's end,
        // so that the client watches again from a fresh version.
        let regular = Instant::now() + interval;
        let next_bookmark = deadline
            .checked_sub(BOOKMARK_BEFORE_END)
            .filter(|t| *t > Instant::now())
            .map_or(regular, |before_end| before_end.min(regular));
        futures::stream::unfold(
            (self, deadline, next_bookmark),
            move |(mut w, deadline, mut next_bookmark)| async move {
                loop {
                    if let Some(l) = w.pending.pop_front() {
                        return Some((Ok(l), (w, deadline, next_bookmark)));
                    }
                    if w.closed {
                        return None;
                    }
                    tokio::select! {
                        received = w.rx.recv() => match received {
                            Ok(e) => {
                                w.seen = w.seen.max(e.revision);
                                if let Some(l) = w.render(&e) {
                                    w.pending.push_back(l);
                                }
                            }
                            Err(RecvError::Lagged(n)) => {
                                tracing::warn!(missed = n, "watcher fell behind; closing its watch");
                                w.closed = true;
                            }
                            Err(RecvError::Closed) => w.closed = true,
                        },
                        () = tokio::time::sleep_until(next_bookmark), if w.req.bookmarks => {
                            next_bookmark = Instant::now() + interval;
                            let b = w.bookmark();
                            w.pending.push_back(line("BOOKMARK", b));
                        }
                        () = tokio::time::sleep_until(deadline) => w.closed = true,
                    }
                }
            },
        )
    }
}

/// How long before a watch's end the real server sends it a bookmark.
const BOOKMARK_BEFORE_END: Duration = Duration::from_secs(2);

fn encoded_line(kind: &str, object: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(object.len() + 32);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

/// The `ERROR` event that ends a watch with `error` (its `Status`).
pub fn error_event(error: &ApiError) -> Bytes {
    line("ERROR", error.to_status())
}

fn line(kind: &str, object: Value) -> Bytes {
    let mut text = json!({"type": kind, "object": object}).to_string();
    text.push('\n');
    Bytes::from(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn req(c: &Cluster, rv: Option<u64>) -> WatchRequest {
        WatchRequest {
            def: c.registry.get("", "v1", "configmaps").unwrap(),
            namespace: Some("default".into()),
            labels: LabelSelector::parse("app=web").unwrap(),
            fields: FieldSelector::default(),
            resource_version: rv,
            send_initial_events: false,
            bookmarks: false,
            timeout: Duration::from_secs(5),
            bookmark_interval: Duration::from_secs(60),
            table: None,
            as_stored: false,
        }
    }

    fn cm(name: &str, app: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "labels": {"app": app}}})
    }

    fn parse(b: &Bytes) -> Value {
        serde_json::from_slice(b).unwrap()
    }

    #[test]
    fn encoded_lines_match_serialized_lines() {
        let o = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        let fast = encoded_line("MODIFIED", o.to_string().as_bytes());
        assert_eq!(parse(&fast), parse(&line("MODIFIED", o)));
        assert!(fast.ends_with(b"\n"));
    }

    #[tokio::test]
    async fn selector_transitions_become_added_and_deleted() {
        let mut c = Cluster::new(100, 64, 1);
        let def = c.registry.get("", "v1", "configmaps").unwrap();
        let now = jiff::Timestamp::now();
        let start = c.store.revision();
        let w = Watch::start(&c, req(&c, Some(start))).unwrap();
        let a = c
            .create(&def, "default", cm("a", "web"), false, now)
            .unwrap();
        c.create(&def, "default", cm("b", "db"), false, now)
            .unwrap();
        let mut moved = a.clone();
        moved["metadata"]["labels"]["app"] = json!("db");
        c.update(
            &def,
            "default",
            "a",
            moved,
            crate::cluster::Part::Main,
            false,
            now,
        )
        .unwrap();
        let mut s = Box::pin(w.into_stream());
        let first = parse(&s.next().await.unwrap().unwrap());
        assert_eq!(first["type"], "ADDED");
        assert_eq!(first["object"]["metadata"]["name"], "a");
        let second = parse(&s.next().await.unwrap().unwrap());
        assert_eq!(
            second["type"], "DELETED",
            "leaving the selection reads as DELETED"
        );
        assert_eq!(
            second["object"]["metadata"]["labels"]["app"], "web",
            "with the last state that matched"
        );
        assert_eq!(
            second["object"]["metadata"]["resourceVersion"],
            c.store.revision().to_string()
        );
    }

    #[tokio::test]
    async fn too_old_version_is_an_expired_error_event() {
        let mut c = Cluster::new(2, 64, 1);
        let def = c.registry.get("", "v1", "configmaps").unwrap();
        for i in 0..5 {
            c.create(
                &def,
                "default",
                cm(&format!("c{i}"), "web"),
                false,
                jiff::Timestamp::now(),
            )
            .unwrap();
        }
        let w = Watch::start(&c, req(&c, Some(1))).unwrap();
        let mut s = Box::pin(w.into_stream());
        let e = parse(&s.next().await.unwrap().unwrap());
        assert_eq!(e["type"], "ERROR");
        assert_eq!(e["object"]["code"], 410);
        assert_eq!(e["object"]["reason"], "Expired");
        assert!(s.next().await.is_none(), "the watch ends after the error");
    }

    #[tokio::test]
    async fn initial_events_end_with_a_marked_bookmark() {
        let mut c = Cluster::new(100, 64, 1);
        let def = c.registry.get("", "v1", "configmaps").unwrap();
        c.create(
            &def,
            "default",
            cm("a", "web"),
            false,
            jiff::Timestamp::now(),
        )
        .unwrap();
        let mut r = req(&c, Some(1));
        r.send_initial_events = true;
        r.bookmarks = true;
        r.timeout = Duration::from_millis(50);
        let w = Watch::start(&c, r).unwrap();
        let events: Vec<Value> = w.into_stream().map(|b| parse(&b.unwrap())).collect().await;
        assert_eq!(events[0]["type"], "ADDED");
        assert_eq!(events[1]["type"], "BOOKMARK");
        assert_eq!(
            events[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
        assert_eq!(
            events[1]["object"]["metadata"]["resourceVersion"],
            c.store.revision().to_string()
        );
    }

    #[tokio::test]
    async fn a_watch_from_a_future_version_starts_after_it() {
        let mut c = Cluster::new(100, 64, 1);
        let def = c.registry.get("", "v1", "configmaps").unwrap();
        let future = c.store.revision() + 2;
        let mut r = req(&c, Some(future));
        r.timeout = Duration::from_millis(50);
        let w = Watch::start(&c, r).unwrap();
        for name in ["a", "b", "c"] {
            c.create(
                &def,
                "default",
                cm(name, "web"),
                false,
                jiff::Timestamp::now(),
            )
            .unwrap();
        }
        let events: Vec<Value> = w.into_stream().map(|b| parse(&b.unwrap())).collect().await;
        let names: Vec<&Value> = events
            .iter()
            .map(|e| &e["object"]["metadata"]["name"])
            .collect();
        assert_eq!(names, [&json!("c")], "{events:?}");
    }

    #[tokio::test]
    async fn table_events_carry_the_columns_once() {
        let mut c = Cluster::new(100, 64, 1);
        let def = c.registry.get("", "v1", "configmaps").unwrap();
        for name in ["a", "b"] {
            c.create(
                &def,
                "default",
                cm(name, "web"),
                false,
                jiff::Timestamp::now(),
            )
            .unwrap();
        }
        let mut r = req(&c, None);
        r.table = Some(IncludeObject::None);
        r.timeout = Duration::from_millis(50);
        let w = Watch::start(&c, r).unwrap();
        let events: Vec<Value> = w.into_stream().map(|b| parse(&b.unwrap())).collect().await;
        assert_eq!(events.len(), 2);
        assert_eq!(events[0]["object"]["kind"], "Table");
        assert!(events[0]["object"]["columnDefinitions"].is_array());
        assert!(events[1]["object"]["columnDefinitions"].is_null());
        assert_eq!(events[1]["object"]["rows"][0]["cells"][0], "b");
    }

    #[tokio::test(start_paused = true)]
    async fn a_bookmark_comes_two_seconds_before_the_end() {
        let c = Cluster::new(100, 64, 1);
        let mut r = req(&c, None);
        r.bookmarks = true;
        r.bookmark_interval = Duration::from_secs(60);
        r.timeout = Duration::from_secs(12);
        let start = Instant::now();
        let w = Watch::start(&c, r).unwrap();
        let mut s = Box::pin(w.into_stream());
        let e = parse(&s.next().await.unwrap().unwrap());
        assert_eq!(e["type"], "BOOKMARK");
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        assert!(s.next().await.is_none(), "then the watch ends");
    }

    #[tokio::test(start_paused = true)]
    async fn bookmarks_and_timeout() {
        let c = Cluster::new(100, 64, 1);
        let mut r = req(&c, None);
        r.bookmarks = true;
        r.bookmark_interval = Duration::from_millis(900);
        r.timeout = Duration::from_millis(2500);
        let rev = c.store.revision();
        let w = Watch::start(&c, r).unwrap();
        let events: Vec<Value> = w.into_stream().map(|b| parse(&b.unwrap())).collect().await;
        // 2 s before the end (0.5 s), then every 0.9 s: 1.4 s, 2.3 s.
        assert_eq!(events.len(), 3, "{events:?}");
        for e in events {
            assert_eq!(e["type"], "BOOKMARK");
            assert_eq!(e["object"]["metadata"]["resourceVersion"], rev.to_string());
        }
    }
}
