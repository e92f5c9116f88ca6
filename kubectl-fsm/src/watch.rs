//! `watch`: a line each time an object's record changes, from watches of
//! the objects and, for the ConfigMap and Secret stores, of their record
//! objects; never by polling.
//!
//! [`Change::of_object`], [`Change::of_record`] and [`Printed`] are pure; [`watch`] does the I/O.

use std::collections::HashMap;
use std::io::Write;

use fsm_core::Timestamp;
use fsm_kube::cli::StoreKind;
use fsm_kube::store::{OWNER_KIND_LABEL, OWNER_UID_LABEL};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::ObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};

use crate::Error;
use crate::records::{self, Row};
use crate::table;
use crate::target::Target;

/// What a watch event says about an object or a record object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The object (namespace, name, UID) may have a new record.
    Object(Option<String>, String, Option<String>),
    /// The object was deleted.
    Deleted(Option<String>, String),
    /// The record object of the object with this UID changed.
    Record(String),
    /// Nothing to act on.
    Nothing,
}

impl Change {
    /// The change an event of the objects' watch is.
    pub fn of_object(event: watcher::Event<impl Resource>) -> Change {
        match event {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                Change::Object(o.meta().namespace.clone(), name(o.meta()), o.meta().uid.clone())
            }
            watcher::Event::Delete(o) => Change::Deleted(o.meta().namespace.clone(), name(o.meta())),
            watcher::Event::Init | watcher::Event::InitDone => Change::Nothing,
        }
    }

    /// The change an event of the record objects' watch is.
    pub fn of_record(event: watcher::Event<impl Resource>) -> Change {
        match event {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => o
                .meta()
                .labels
                .as_ref()
                .and_then(|l| l.get(OWNER_UID_LABEL))
                .map_or(Change::Nothing, |uid| Change::Record(uid.clone())),
            _ => Change::Nothing,
        }
    }
}

fn name(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// What was last printed for each object, so that a line is printed only
/// when something people see changes.
#[derive(Debug, Default)]
pub struct Printed {
    rows: HashMap<(Option<String>, String), Row>,
}

impl Printed {
    /// Whether `row` differs from what was last printed for its object;
    /// records it if so.
    pub fn is_news(&mut self, row: &Row) -> bool {
        let key = (row.namespace.clone(), row.name.clone());
        if self.rows.get(&key) == Some(row) {
            return false;
        }
        self.rows.insert(key, row.clone());
        true
    }

    /// Forgets a deleted object; whether it had been printed.
    pub fn forget(&mut self, namespace: Option<String>, name: String) -> bool {
        self.rows.remove(&(namespace, name)).is_some()
    }
}

/// The watch of the record objects of the target's store, if they are
/// objects of their own.
fn record_changes(
    client: &Client,
    target: &Target,
    namespace: Option<&str>,
) -> Option<futures::stream::BoxStream<'static, Result<Change, watcher::Error>>> {
    let config = watcher::Config::default()
        .labels(&format!("{OWNER_KIND_LABEL}={}", target.resource.kind));
    fn changes<K>(api: Api<K>, config: watcher::Config) -> impl Stream<Item = Result<Change, watcher::Error>>
    where
        K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    {
        watcher(api, config)
            .default_backoff()
            .map(|event| event.map(Change::of_record))
    }
    match target.machine.store {
        StoreKind::ConfigMap => Some(changes(scoped::<ConfigMap>(client, namespace), config).boxed()),
        StoreKind::Secret => Some(changes(scoped::<Secret>(client, namespace), config).boxed()),
        StoreKind::Status | StoreKind::Ephemeral => None,
    }
}

fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Prints a header, then a line ([`table::watch_line`]) whenever the
/// state, attempt, retry time or error of an object in `namespace`
/// (`None`: all) changes, until the watch ends (never, unless the process
/// is stopped). Watch errors are reported on stderr and retried with
/// backoff.
///
/// # Errors
/// The API's errors reading a record, and output errors.
pub async fn watch(
    client: &Client,
    target: &Target,
    namespace: Option<&str>,
    out: &mut (dyn Write + Send),
) -> Result<(), Error> {
    let namespaces = namespace.is_none() && target.resource.namespaced;
    let write = |out: &mut (dyn Write + Send), text: &str| {
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(Error::Output)
    };
    write(out, &table::watch_header(namespaces))?;
    let objects = watcher(target.api(client, namespace), watcher::Config::default())
        .default_backoff()
        .map(|event| event.map(Change::of_object))
        .boxed();
    let mut changes = match record_changes(client, target, namespace) {
        Some(records) => futures::stream::select(objects, records).boxed(),
        None => objects,
    };
    // The objects by UID, for the record objects' changes.
    let mut by_uid: HashMap<String, (Option<String>, String)> = HashMap::new();
    let mut printed = Printed::default();
    while let Some(change) = changes.next().await {
        let (ns, name) = match change {
            Err(error) => {
                eprintln!("watch failed (retrying): {error}");
                continue;
            }
            Ok(Change::Nothing) => continue,
            Ok(Change::Deleted(ns, name)) => {
                if printed.forget(ns.clone(), name.clone()) {
                    let time = Timestamp::now().strftime("%H:%M:%S");
                    let place = ns.filter(|_| namespaces).map(|n| format!("{n} ")).unwrap_or_default();
                    write(out, &format!("{time} {place}{name} <deleted>\n"))?;
                }
                by_uid.retain(|_, v| v.1 != name);
                continue;
            }
            Ok(Change::Object(ns, name, uid)) => {
                if let Some(uid) = uid {
                    by_uid.insert(uid, (ns.clone(), name.clone()));
                }
                (ns, name)
            }
            Ok(Change::Record(uid)) => match by_uid.get(&uid) {
                Some(object) => object.clone(),
                None => continue,
            },
        };
        if let Some(row) = records::row(client, target, ns.as_deref(), &name).await?
            && printed.is_news(&row)
        {
            write(out, &table::watch_line(&row, Timestamp::now(), namespaces))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn row(state: &str, attempt: u32) -> Row {
        Row {
            name: "j1".into(),
            namespace: Some("ns".into()),
            state: Some(state.into()),
            attempt,
            entered_at: None,
            next_attempt_at: None,
            last_error: None,
            compensating: false,
            problem: None,
        }
    }

    #[test]
    fn only_changes_people_see_are_news() {
        let mut printed = Printed::default();
        assert!(printed.is_news(&row("Pending", 0)));
        assert!(!printed.is_news(&row("Pending", 0)));
        assert!(printed.is_news(&row("Pending", 1)));
        assert!(printed.is_news(&row("Done", 0)));
        assert!(printed.forget(Some("ns".into()), "j1".into()));
        assert!(!printed.forget(Some("ns".into()), "j1".into()));
    }

    #[test]
    fn record_objects_name_their_owner_by_uid() {
        let mut cm = ConfigMap::default();
        assert_eq!(Change::of_record(watcher::Event::Apply(cm.clone())), Change::Nothing);
        cm.metadata.labels = Some([(OWNER_UID_LABEL.to_owned(), "u1".to_owned())].into());
        assert_eq!(
            Change::of_record(watcher::Event::Apply(cm)),
            Change::Record("u1".into())
        );
    }
}
