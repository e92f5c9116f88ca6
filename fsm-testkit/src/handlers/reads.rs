//! The read verbs over HTTP: get, list and watch (as JSON or as a
//! server-side table).

use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};

use super::json;
use super::query::{flag, list_query, read_options};
use super::request::ObjectRequest;
use crate::cluster::{ReadAt, parse_resource_version};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::state::Shared;
use crate::status::ApiError;
use crate::table;
use crate::watch::{Watch, WatchRequest};

/// Marks the response of a watch (a long-lived stream), so that a listener
/// going away can end it.
#[derive(Debug, Clone, Copy)]
pub struct WatchResponse;

/// How long a read at a `resourceVersion` newer than the server's waits
/// for it before `504 Timeout` (the real server's watch cache waits 3 s).
const TOO_LARGE_WAIT: Duration = Duration::from_secs(3);

/// Waits until the store has reached `wanted` (`NotOlderThan`), at most
/// [`TOO_LARGE_WAIT`], as the real server's watch cache does.
///
/// # Errors
/// [`ApiError::ResourceVersionTooLarge`] when it does not arrive.
async fn wait_for_revision(shared: &Shared, at: ReadAt) -> Result<(), ApiError> {
    let ReadAt::NotOlderThan(wanted) = at else {
        return Ok(());
    };
    let deadline = tokio::time::Instant::now() + TOO_LARGE_WAIT;
    loop {
        let current = shared.cluster().store.revision();
        if current >= wanted {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ApiError::ResourceVersionTooLarge(wanted, current));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `GET` of an object: at a `resourceVersion` not older than the one
/// asked for (waiting for it), as JSON or a table.
pub(super) async fn get(r: &ObjectRequest<'_>) -> Result<Response, ApiError> {
    if let Some(rv) = r.query.get("resourceVersion").filter(|rv| !rv.is_empty()) {
        match parse_resource_version(rv)? {
            0 => {}
            n => wait_for_revision(r.shared, ReadAt::NotOlderThan(n)).await?,
        }
    }
    let stored = r.current()?;
    let obj = r.served(stored).await?;
    let Some(include) = r.table else {
        return Ok(json(StatusCode::OK, &obj));
    };
    let rv = obj["metadata"]["resourceVersion"]
        .as_str()
        .map(String::from);
    let t = table::render(&r.def, &[obj], rv.as_deref(), include, r.now);
    Ok(json(StatusCode::OK, &t))
}

/// `GET` of a collection: a page of a list, as JSON or a table.
pub(super) async fn list(r: &ObjectRequest<'_>) -> Result<Response, ApiError> {
    let query = list_query(&r.query)?;
    wait_for_revision(r.shared, query.at).await?;
    let list = match &r.conversion {
        Some(c) => {
            let stored =
                r.shared
                    .cluster()
                    .list_as_stored(&c.storage, r.namespace.as_deref(), &query)?;
            c.list_to_served(&r.def, stored).await?
        }
        None => r
            .shared
            .cluster()
            .list(&r.def, r.namespace.as_deref(), &query)?,
    };
    let Some(include) = r.table else {
        return Ok(json(StatusCode::OK, &list));
    };
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let mut t = table::render(
        &r.def,
        &items,
        list["metadata"]["resourceVersion"].as_str(),
        include,
        r.now,
    );
    if let Some(c) = list["metadata"].get("continue") {
        t["metadata"]["continue"] = c.clone();
    }
    Ok(json(StatusCode::OK, &t))
}

/// `GET ?watch=true` of a collection: a stream of events.
pub(super) async fn watch(r: &ObjectRequest<'_>) -> Result<Response, ApiError> {
    let q = &r.query;
    let mut selector = q.get("fieldSelector").cloned().unwrap_or_default();
    if let Some(n) = &r.name {
        if !selector.is_empty() {
            selector.push(',');
        }
        selector.push_str(&format!("metadata.name={n}"));
    }
    let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?;
    let fields = FieldSelector::parse(&selector)?;
    let resource_version = match read_options(q, true).read_at()? {
        ReadAt::Latest => q
            .get("resourceVersion")
            .filter(|rv| !rv.is_empty())
            .map(|_| 0),
        ReadAt::NotOlderThan(n) | ReadAt::Exact(n) => Some(n),
    };
    let timeout = match q.get("timeoutSeconds") {
        Some(t) => Duration::from_secs(
            t.parse()
                .map_err(|_| ApiError::BadRequest(format!("invalid timeoutSeconds {t:?}")))?,
        ),
        None => r.shared.config.default_watch_timeout,
    };
    // A table's cells are rendered from what is stored (not converted).
    let conversion = r.conversion.clone().filter(|_| r.table.is_none());
    let req = WatchRequest {
        def: if conversion.is_some() {
            r.stored_def()
        } else {
            r.def.clone()
        },
        namespace: r.namespace.clone(),
        labels,
        fields,
        resource_version,
        send_initial_events: flag(q, "sendInitialEvents"),
        bookmarks: flag(q, "allowWatchBookmarks"),
        timeout,
        bookmark_interval: r.shared.config.bookmark_interval,
        table: r.table,
        as_stored: conversion.is_some(),
    };
    if let Some(c) = &conversion {
        c.wait_until_converting(r.shared, &r.def).await;
    }
    let watch = Watch::start(&r.shared.cluster(), req)?;
    let body = match conversion {
        Some(c) => Body::from_stream(c.watch_to_served(r.def.clone(), watch.into_stream())),
        None => Body::from_stream(watch.into_stream()),
    };
    let mut response = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response();
    response.extensions_mut().insert(WatchResponse);
    Ok(response)
}
