//! [`object_changes`]: which objects may have a new record, from watches of
//! the objects and, for the ConfigMap and Secret stores, of their record
//! objects; never by polling.
//!
//! [`Change::of_object`] and [`Change::of_record`] are pure.

use std::collections::HashMap;

use futures::{Stream, StreamExt};
use kube::api::{DynamicObject, ObjectMeta};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};

use super::watched::Watched;
use crate::store::{OWNER_KIND_LABEL, OWNER_UID_LABEL, RecordPlace};

/// An object whose record may have changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObjectChange {
    /// The object, or its record object, was written: read its record.
    Touched {
        /// Its namespace (`None`: cluster-scoped).
        namespace: Option<String>,
        /// Its name.
        name: String,
    },
    /// The object is gone.
    Deleted {
        /// Its namespace (`None`: cluster-scoped).
        namespace: Option<String>,
        /// Its name.
        name: String,
    },
}

/// What one watch event says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The object (namespace, name, UID) was written.
    Object(Option<String>, String, Option<String>),
    /// The object was deleted.
    Deleted(Option<String>, String),
    /// The record object of the object with this UID was written.
    Record(String),
    /// Nothing to act on.
    Nothing,
}

impl Change {
    /// The change an event of the objects' watch is.
    pub fn of_object(event: watcher::Event<impl Resource>) -> Change {
        match event {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => Change::Object(
                o.meta().namespace.clone(),
                name(o.meta()),
                o.meta().uid.clone(),
            ),
            watcher::Event::Delete(o) => {
                Change::Deleted(o.meta().namespace.clone(), name(o.meta()))
            }
            watcher::Event::Init | watcher::Event::InitDone => Change::Nothing,
        }
    }

    /// The change an event of the record objects' watch is: the record of
    /// the object its [`OWNER_UID_LABEL`] names.
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

fn record_changes(
    api: Api<DynamicObject>,
    kind: &str,
) -> impl Stream<Item = Result<Change, watcher::Error>> + Send + 'static {
    let config = watcher::Config::default().labels(&format!("{OWNER_KIND_LABEL}={kind}"));
    watcher(api, config)
        .default_backoff()
        .map(|event| event.map(Change::of_record))
}

/// The objects of `target` in `namespace` (`None`: all) whose record may
/// have changed, as the watches report them: every object once when the
/// watch starts, then each write of an object or of its record object,
/// and each deletion. Watch errors are passed on; the watches retry with
/// backoff.
pub fn object_changes(
    client: &Client,
    target: &Watched,
    namespace: Option<&str>,
) -> impl Stream<Item = Result<ObjectChange, watcher::Error>> + Send + use<> {
    let objects = watcher(target.api(client, namespace), watcher::Config::default())
        .default_backoff()
        .map(|event| event.map(Change::of_object))
        .boxed();
    let kind = &target.resource.kind;
    let changes = match target.machine.store.place() {
        RecordPlace::Object(record_kind) => futures::stream::select(
            objects,
            record_changes(record_kind.api(client.clone(), namespace), kind),
        )
        .boxed(),
        RecordPlace::Status | RecordPlace::Memory => objects,
    };
    // The objects by UID, for the record objects' changes.
    let mut by_uid: HashMap<String, (Option<String>, String)> = HashMap::new();
    changes.filter_map(move |change| {
        let out = match change {
            Err(error) => Some(Err(error)),
            Ok(Change::Nothing) => None,
            Ok(Change::Deleted(namespace, name)) => {
                by_uid.retain(|_, object| *object != (namespace.clone(), name.clone()));
                Some(Ok(ObjectChange::Deleted { namespace, name }))
            }
            Ok(Change::Object(namespace, name, uid)) => {
                if let Some(uid) = uid {
                    by_uid.insert(uid, (namespace.clone(), name.clone()));
                }
                Some(Ok(ObjectChange::Touched { namespace, name }))
            }
            Ok(Change::Record(uid)) => by_uid
                .get(&uid)
                .cloned()
                .map(|(namespace, name)| Ok(ObjectChange::Touched { namespace, name })),
        };
        std::future::ready(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn record_objects_name_their_owner_by_uid() {
        let mut cm = ConfigMap::default();
        assert_eq!(
            Change::of_record(watcher::Event::Apply(cm.clone())),
            Change::Nothing
        );
        cm.metadata.labels = Some([(OWNER_UID_LABEL.to_owned(), "u1".to_owned())].into());
        assert_eq!(
            Change::of_record(watcher::Event::Apply(cm)),
            Change::Record("u1".into())
        );
    }

    #[test]
    fn objects_are_named_by_their_events() {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("o1".into());
        cm.metadata.namespace = Some("ns".into());
        cm.metadata.uid = Some("u1".into());
        assert_eq!(
            Change::of_object(watcher::Event::InitApply(cm.clone())),
            Change::Object(Some("ns".into()), "o1".into(), Some("u1".into()))
        );
        assert_eq!(
            Change::of_object(watcher::Event::Delete(cm)),
            Change::Deleted(Some("ns".into()), "o1".into())
        );
        assert_eq!(
            Change::of_object(watcher::Event::<ConfigMap>::InitDone),
            Change::Nothing
        );
    }
}
