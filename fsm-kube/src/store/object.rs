//! `ConfigMapStore` and `SecretStore`: the record in an object of its own
//! beside the custom resource (named by [`record_object_name`]), owned by
//! it (so garbage collection removes it with the resource), read from a
//! watch cache.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use fsm_core::{BoxFuture, Commit, DecodeError, Fsm, Loaded, RawRecord, StoreError, Version};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::{ByteString, NamespaceResourceScope};
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::OnceCell;

use super::kind::{RecordObjectKind, RecordPlace, StoreKind};
use super::{KubeStore, Target, namespace_of, report_corrupt_conditions, size, store_error};
use crate::KubeResource;
use crate::cache::{ABSENT, WrittenCache};

/// The label every record object carries, so the store watches only those.
pub const MANAGED_BY_LABEL: (&str, &str) = ("app.kubernetes.io/managed-by", "operator-fsm");
/// The label naming the object a record belongs to (its name, shortened
/// to 63 characters with a hash when longer, as label values must be).
pub const OWNER_LABEL: &str = "operator-fsm.io/owner";
/// The label naming the kind of the object a record belongs to.
pub const OWNER_KIND_LABEL: &str = "operator-fsm.io/owner-kind";
/// The label holding the UID of the object a record belongs to: a record
/// object of another UID is a predecessor's (stale), even once its owner
/// reference is gone.
pub const OWNER_UID_LABEL: &str = "operator-fsm.io/owner-uid";
/// The key of the record in the object's data.
pub const RECORD_KEY: &str = "record";

/// The most characters an object name (a DNS-1123 subdomain) may have.
const NAME_LIMIT: usize = 253;
/// The most characters a label value may have.
const LABEL_VALUE_LIMIT: usize = 63;
/// The most characters one dot-separated part of a name may have (the
/// real API server does not require it of object names; the part of the
/// kind keeps to it all the same).
const NAME_PART_LIMIT: usize = 63;

/// FNV-1a (64 bits) of `parts`, each followed by a zero byte: stable
/// across platforms, releases and processes, as a name must be.
fn fnv1a(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

/// The top 40 bits of the hash of `parts`, as 10 lowercase hex digits.
fn short_hash(parts: &[&str]) -> String {
    format!("{:010x}", fnv1a(parts) >> 24)
}

/// The longest prefix of `text` of at most `max` bytes that ends on a
/// character boundary.
fn truncate(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `kind` as one part of a name: lowercase, characters other than
/// `[a-z0-9-]` replaced by `-`, at most 63 characters, no `-` at either
/// end.
fn kind_part(kind: &str) -> String {
    let mapped: String = kind
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = mapped.trim_matches('-');
    truncate(trimmed, NAME_PART_LIMIT)
        .trim_end_matches('-')
        .to_owned()
}

/// The name of the record object of the object named `name`, of kind
/// `kind` in API group `group` (`""` for the core group), whose machine is
/// named `machine` (the state enum's name, [`fsm_core::Machine::name`]).
///
/// # Guarantees
/// - The name is `<name>.<kind>.fsm-<hash>`: `<kind>` is the kind in
///   lowercase, `<hash>` 10 hex digits of a hash (FNV-1a, top 40 bits) of
///   the group, kind and machine. Two kinds (another group or another
///   kind) or two machines on one kind get different names; the API
///   version does not count, so records survive a new version of the CRD.
/// - It is deterministic, starts with `name` and is a DNS-1123 subdomain
///   of at most 253 characters whenever `name` is one: when `name` is too
///   long to keep whole, it is cut and followed by `.<hash of name>` (10
///   hex digits), so that two long names still differ.
///
/// ```
/// use fsm_kube::store::record_object_name;
///
/// let name = record_object_name("db1", "example.io", "Database", "DbState");
/// assert!(name.starts_with("db1.database.fsm-"), "{name}");
/// assert_ne!(name, record_object_name("db1", "other.io", "Database", "DbState"));
/// assert_ne!(name, record_object_name("db1", "example.io", "Database", "BackupState"));
/// ```
pub fn record_object_name(name: &str, group: &str, kind: &str, machine: &str) -> String {
    let discriminator = short_hash(&[group, kind, machine]);
    let kind = kind_part(kind);
    let suffix = if kind.is_empty() {
        format!(".fsm-{discriminator}")
    } else {
        format!(".{kind}.fsm-{discriminator}")
    };
    if name.len() + suffix.len() <= NAME_LIMIT {
        return format!("{name}{suffix}");
    }
    let tag = short_hash(&[name]);
    let room = NAME_LIMIT - suffix.len() - 1 - tag.len();
    let prefix = truncate(name, room).trim_end_matches(['-', '.']);
    if prefix.is_empty() {
        format!("{tag}{suffix}")
    } else {
        format!("{prefix}.{tag}{suffix}")
    }
}

/// [`record_object_name`] for an object named `name` of machine `F`'s
/// resource.
pub fn record_object_name_for<F>(name: &str) -> String
where
    F: Fsm,
    F::Resource: Resource<DynamicType = ()>,
{
    record_object_name(
        name,
        &F::Resource::group(&()),
        &F::Resource::kind(&()),
        F::machine().name(),
    )
}

/// The name record objects had before [`record_object_name`]:
/// `<name>-fsm`, the same for every kind and machine. The stores still
/// read a record there when it belongs to the object (see
/// [`ObjectStore`]).
pub fn legacy_record_object_name(name: &str) -> String {
    format!("{name}-fsm")
}

/// `value` as a label value: itself when it has at most 63 characters,
/// else cut and followed by `-<hash of value>` (10 hex digits).
pub(crate) fn label_value(value: &str) -> String {
    if value.len() <= LABEL_VALUE_LIMIT {
        return value.to_owned();
    }
    let tag = short_hash(&[value]);
    let prefix = truncate(value, LABEL_VALUE_LIMIT - 1 - tag.len())
        .trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    if prefix.is_empty() {
        tag
    } else {
        format!("{prefix}-{tag}")
    }
}

/// Whether the record object of `meta` belongs to the object of UID `uid`:
/// its [`OWNER_UID_LABEL`] names it, or (without that label) one of its
/// owner references does.
pub(crate) fn belongs_to(meta: &ObjectMeta, uid: &str) -> bool {
    if let Some(owner) = meta.labels.as_ref().and_then(|l| l.get(OWNER_UID_LABEL)) {
        return owner == uid;
    }
    meta.owner_references
        .iter()
        .flatten()
        .any(|reference| reference.uid == uid)
}

/// Whether the legacy record object of `meta` belongs to the object of UID
/// `uid`, of kind `kind` in group `group`: an owner reference says so.
pub(crate) fn legacy_belongs_to(meta: &ObjectMeta, uid: &str, group: &str, kind: &str) -> bool {
    meta.owner_references.iter().flatten().any(|reference| {
        let reference_group = reference
            .api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group);
        reference.uid == uid && reference.kind == kind && reference_group == group
    })
}

/// A kind of object that can hold a record as text: ConfigMap or Secret.
pub trait RecordObject:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// A new object holding `text` under [`RECORD_KEY`].
    fn with_record(metadata: ObjectMeta, text: String) -> Self;
    /// The record text, if the object holds one (`Err` when it is not
    /// UTF-8).
    fn record_text(&self) -> Option<Result<String, String>>;

    /// The [`StoreKind`] of an [`ObjectStore`] of these objects, if one
    /// describes it (`None`, the default, for a type of one's own: the
    /// command line then cannot say where its records are).
    fn store_kind() -> Option<StoreKind>
    where
        Self: Sized,
    {
        None
    }
}

impl RecordObject for ConfigMap {
    fn with_record(metadata: ObjectMeta, text: String) -> Self {
        ConfigMap {
            metadata,
            data: Some(BTreeMap::from([(RECORD_KEY.to_owned(), text)])),
            ..ConfigMap::default()
        }
    }
    fn record_text(&self) -> Option<Result<String, String>> {
        self.data.as_ref()?.get(RECORD_KEY).cloned().map(Ok)
    }
    fn store_kind() -> Option<StoreKind> {
        Some(StoreKind::ConfigMap)
    }
}

impl RecordObject for Secret {
    fn with_record(metadata: ObjectMeta, text: String) -> Self {
        Secret {
            metadata,
            data: Some(BTreeMap::from([(
                RECORD_KEY.to_owned(),
                ByteString(text.into_bytes()),
            )])),
            type_: Some("Opaque".to_owned()),
            ..Secret::default()
        }
    }
    fn record_text(&self) -> Option<Result<String, String>> {
        let bytes = self.data.as_ref()?.get(RECORD_KEY)?;
        Some(String::from_utf8(bytes.0.clone()).map_err(|e| e.to_string()))
    }
    fn store_kind() -> Option<StoreKind> {
        Some(StoreKind::Secret)
    }
}

/// Keeps records in objects of kind `O` beside the resource, named by
/// [`record_object_name`].
///
/// # Expected flow
/// The first use starts a watch of the labelled record objects; loads read
/// that cache (and the runtime's own last commits, while the watch lags), so
/// a reconcile makes no GET. A commit creates the object (labelled, owned
/// by the resource through a controller reference that blocks the owner's
/// deletion in the foreground) or replaces it with its `resourceVersion` as
/// a precondition. Conditions go to the resource's status, written only
/// when they change.
///
/// # Guarantees
/// - A record object belongs to the object whose UID its
///   [`OWNER_UID_LABEL`] (or, without it, its owner reference) names. One
///   of another UID is a predecessor's that garbage collection has not
///   removed yet (the object was deleted and re-created under its name):
///   a load treats it as absent, so the new object starts over, and the
///   next commit replaces it (over its `resourceVersion`).
/// - Records written under the legacy name (`<name>-fsm`,
///   [`legacy_record_object_name`]) are read once: when the object has no
///   record object of the new name, a legacy one whose owner reference is
///   the object's (its UID, kind and group) is loaded; the next commit
///   creates the new object and deletes the legacy one (over its
///   `resourceVersion`).
///
/// # Assumptions
/// The resource is namespaced; the operator may list, watch, create, update
/// and delete `O` in that namespace, and update the resource's
/// `finalizers` subresource (`blockOwnerDeletion` needs it where the
/// `OwnerReferencesPermissionEnforcement` admission plugin is on).
pub struct ObjectStore<O: RecordObject> {
    client: Client,
    namespace: Option<String>,
    cache: OnceCell<Store<O>>,
    written: WrittenCache,
    kind: PhantomData<fn() -> O>,
}

impl RecordObjectKind {
    /// The record objects of type `O` (core API group, version `v1`).
    pub const fn of<O: RecordObject + k8s_openapi::Resource>() -> Self {
        RecordObjectKind::new(O::KIND, O::URL_PATH_SEGMENT, text_of::<O>)
    }
}

/// `object`'s record text, read as `O`.
fn text_of<O: RecordObject>(object: kube::api::DynamicObject) -> Option<Result<String, String>> {
    match object.try_parse::<O>() {
        Ok(typed) => typed.record_text(),
        Err(error) => Some(Err(error.to_string())),
    }
}

impl<O: RecordObject + k8s_openapi::Resource> ObjectStore<O> {
    /// Where this store keeps records: an object of type `O` beside the
    /// resource.
    pub const PLACE: RecordPlace = RecordPlace::Object(RecordObjectKind::of::<O>());
}

/// The record in a ConfigMap beside the resource: state users must not
/// edit through the status.
pub type ConfigMapStore = ObjectStore<ConfigMap>;

/// The record in a Secret beside the resource: for `sensitive` state data.
pub type SecretStore = ObjectStore<Secret>;

impl<O: RecordObject> ObjectStore<O> {
    /// A store that talks to the API through `client`.
    pub fn new(client: Client) -> Self {
        ObjectStore {
            client,
            namespace: None,
            cache: OnceCell::new(),
            written: WrittenCache::default(),
            kind: PhantomData,
        }
    }

    /// A store for an operator that watches one namespace only: it watches
    /// record objects in `namespace` alone, so a namespaced Role suffices.
    /// Objects of other namespaces are refused with an error.
    pub fn namespaced(client: Client, namespace: impl Into<String>) -> Self {
        ObjectStore {
            namespace: Some(namespace.into()),
            ..Self::new(client)
        }
    }

    /// Checks that the store may hold records in `namespace`.
    fn covers(&self, namespace: &str) -> Result<(), StoreError> {
        match &self.namespace {
            Some(own) if own != namespace => Err(StoreError::Backend(
                format!("this store watches namespace {own} only; the object is in {namespace}")
                    .into(),
            )),
            _ => Ok(()),
        }
    }

    /// The watch cache of record objects, started on first use.
    async fn cache(&self) -> Result<&Store<O>, StoreError> {
        self.cache
            .get_or_try_init(|| async {
                let (reader, writer) = reflector::store();
                let selector = format!("{}={}", MANAGED_BY_LABEL.0, MANAGED_BY_LABEL.1);
                let stream = watcher(
                    match &self.namespace {
                        Some(ns) => Api::<O>::namespaced(self.client.clone(), ns),
                        None => Api::<O>::all(self.client.clone()),
                    },
                    watcher::Config::default().labels(&selector),
                )
                .default_backoff()
                .reflect(writer)
                .applied_objects();
                tokio::spawn(async move {
                    futures::pin_mut!(stream);
                    while let Some(event) = stream.next().await {
                        if let Err(error) = event {
                            tracing::warn!(%error, "watch of record objects failed; retrying");
                        }
                    }
                });
                reader
                    .wait_until_ready()
                    .await
                    .map_err(|e| StoreError::Backend(Box::new(e)))?;
                Ok::<_, StoreError>(reader)
            })
            .await
    }

    fn api(&self, namespace: &str) -> Api<O> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl<O: RecordObject> std::fmt::Debug for ObjectStore<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStore")
            .field("kind", &O::kind(&()))
            .finish_non_exhaustive()
    }
}

/// The controller reference to `object` that record objects carry: it
/// blocks the owner's deletion in the foreground until the record object
/// is gone.
fn owner_reference<K: KubeResource>(object: &K) -> Option<OwnerReference> {
    object
        .controller_owner_ref(&())
        .map(|reference| OwnerReference {
            block_owner_deletion: Some(true),
            controller: Some(true),
            ..reference
        })
}

/// The prefix of the version token of a legacy record object (the rest is
/// its `resourceVersion`).
const LEGACY_TOKEN: &str = "legacy:";
/// The prefix of the version token of a predecessor's record object: the
/// record is absent, the object in the way is at that `resourceVersion`.
const STALE_TOKEN: &str = "stale:";

/// What a load found for an object, and what its version token means.
enum Expected<'a> {
    /// No record object: create one.
    Nothing,
    /// The object's own record object, at this `resourceVersion`.
    Own(&'a str),
    /// A legacy record object of the object, at this `resourceVersion`:
    /// create the new one, then delete it.
    Legacy(&'a str),
    /// A predecessor's record object under the new name, at this
    /// `resourceVersion`: replace it.
    Stale(&'a str),
}

impl<'a> Expected<'a> {
    fn of(token: Option<&'a Version>) -> Self {
        let Some(Version(token)) = token else {
            return Expected::Nothing;
        };
        if let Some(rv) = token.strip_prefix(LEGACY_TOKEN) {
            Expected::Legacy(rv)
        } else if let Some(rv) = token.strip_prefix(STALE_TOKEN) {
            Expected::Stale(rv)
        } else {
            Expected::Own(token)
        }
    }
}

/// How long a commit waits for the watch to show the object that a create
/// found in its way, before it gives up with an error.
const TAKE_OVER_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The names a store deals with for one object.
struct Names {
    namespace: String,
    own: String,
    legacy: String,
}

impl<O: RecordObject> ObjectStore<O> {
    fn names<K: KubeResource>(&self, target: &Target<K>) -> Result<Names, StoreError> {
        let namespace = namespace_of(target.object.as_ref())?;
        self.covers(&namespace)?;
        let name = target.object.name_any();
        Ok(Names {
            own: record_object_name(&name, &K::group(&()), &K::kind(&()), target.machine.name()),
            legacy: legacy_record_object_name(&name),
            namespace,
        })
    }

    /// The record object a load sees for `target` in the watch cache, with
    /// its version token: the object's own, else its legacy one, else a
    /// predecessor's (stale, no record).
    async fn find<K: KubeResource>(
        &self,
        target: &Target<K>,
        names: &Names,
    ) -> Result<(Option<std::sync::Arc<O>>, Option<Version>), StoreError> {
        let cache = self.cache().await?;
        let rv = |o: &O| o.meta().resource_version.clone().unwrap_or_default();
        let own = cache.get(&ObjectRef::new(&names.own).within(&names.namespace));
        if let Some(own) = own.as_ref().filter(|o| belongs_to(o.meta(), &target.uid)) {
            let version = Version(rv(own));
            return Ok((Some(own.clone()), Some(version)));
        }
        let legacy = cache
            .get(&ObjectRef::new(&names.legacy).within(&names.namespace))
            .filter(|o| legacy_belongs_to(o.meta(), &target.uid, &K::group(&()), &K::kind(&())));
        if let Some(legacy) = legacy {
            let version = Version(format!("{LEGACY_TOKEN}{}", rv(&legacy)));
            return Ok((Some(legacy), Some(version)));
        }
        Ok(match own {
            Some(stale) => {
                tracing::debug!(
                    object = %target.key,
                    record = %names.own,
                    "the record object belongs to an earlier object of this name; starting over"
                );
                (None, Some(Version(format!("{STALE_TOKEN}{}", rv(&stale)))))
            }
            None => (None, None),
        })
    }

    /// Creates `object`; when an object of its name is in the way, replaces
    /// it if it is a predecessor's. Returns what was written and the token
    /// of what it replaced. The API's errors go through `refused`.
    async fn create<K: KubeResource>(
        &self,
        target: &Target<K>,
        names: &Names,
        params: &PostParams,
        mut object: O,
        refused: &(dyn Fn(kube::Error) -> StoreError + Sync),
    ) -> Result<(O, Option<String>), StoreError> {
        let api = self.api(&names.namespace);
        match api.create(params, &object).await {
            Err(kube::Error::Api(status)) if status.is_already_exists() => {}
            other => return other.map(|written| (written, None)).map_err(refused),
        }
        // A predecessor's record, or our own written meanwhile: the watch
        // tells which (the operator may not GET).
        let deadline = tokio::time::Instant::now() + TAKE_OVER_WAIT;
        let key = ObjectRef::new(&names.own).within(&names.namespace);
        let in_the_way = loop {
            if let Some(found) = self.cache().await?.get(&key) {
                break found;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(StoreError::Backend(
                    format!(
                        "{} {}/{} exists but is not a record object (it lacks the label {}={}): \
                         delete or rename it",
                        O::kind(&()),
                        names.namespace,
                        names.own,
                        MANAGED_BY_LABEL.0,
                        MANAGED_BY_LABEL.1
                    )
                    .into(),
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        if belongs_to(in_the_way.meta(), &target.uid) {
            // Our own record, written since the load: a conflict.
            return Err(StoreError::Conflict);
        }
        let rv = in_the_way
            .meta()
            .resource_version
            .clone()
            .unwrap_or_default();
        object.meta_mut().resource_version = Some(rv.clone());
        let written = api
            .replace(&names.own, params, &object)
            .await
            .map_err(refused)?;
        Ok((written, Some(format!("{STALE_TOKEN}{rv}"))))
    }

    /// Whether the record object of `target` holds `text` at version
    /// `expected`: our own last commit, or the watched object.
    async fn holds<K: KubeResource>(
        &self,
        target: &Target<K>,
        names: &Names,
        expected: &Version,
        text: &str,
    ) -> Result<bool, StoreError> {
        let (object, version) = self.find(target, names).await?;
        let seen = version.as_ref().map_or(ABSENT, |v| v.0.as_str());
        if let Some(written) = self.written.resolve(&target.uid, seen) {
            return Ok(written.version == *expected
                && matches!(&written.record, RawRecord::Text(t) if t == text));
        }
        Ok(version.as_ref() == Some(expected)
            && object.is_some_and(|o| matches!(o.record_text(), Some(Ok(t)) if t == text)))
    }

    /// Deletes the legacy record object of `target`, over version `rv`,
    /// once its record lives on under the new name. A failure leaves it
    /// (ignored from now on, and collected with its owner) and is logged.
    async fn delete_legacy<K: KubeResource>(&self, target: &Target<K>, names: &Names, rv: &str) {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(rv.to_owned()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match self
            .api(&names.namespace)
            .delete(&names.legacy, &params)
            .await
        {
            Ok(_) => tracing::info!(
                object = %target.key,
                from = %names.legacy,
                to = %names.own,
                "moved the record to its record object's new name"
            ),
            Err(kube::Error::Api(status)) if status.is_not_found() => {}
            Err(error) => tracing::warn!(
                object = %target.key,
                legacy = %names.legacy,
                %error,
                "the record moved to its new name, but the legacy record object could not be deleted; it is ignored from now on"
            ),
        }
    }
}

impl<K: KubeResource, O: RecordObject> KubeStore<K> for ObjectStore<O> {
    fn load<'a>(&'a self, target: &'a Target<K>) -> BoxFuture<'a, Result<Loaded, StoreError>> {
        Box::pin(async move {
            let names = self.names(target)?;
            let (object, version) = self.find(target, &names).await?;
            let seen_version = version.as_ref().map_or(ABSENT, |v| v.0.as_str());
            if let Some(written) = self.written.resolve(&target.uid, seen_version) {
                return Ok(Loaded {
                    record: Some(written.record.clone()),
                    version: Some(written.version.clone()),
                });
            }
            let record = object.and_then(|o| match o.record_text() {
                Some(Ok(text)) => Some(RawRecord::Text(text)),
                Some(Err(e)) => Some(RawRecord::Text(format!("<not UTF-8: {e}>"))),
                None => None,
            });
            Ok(Loaded { record, version })
        })
    }

    fn save<'a>(
        &'a self,
        target: &'a Target<K>,
        commit: Commit<'a>,
    ) -> BoxFuture<'a, Result<Version, StoreError>> {
        let Commit {
            record,
            status,
            expected,
        } = commit;
        Box::pin(async move {
            let names = self.names(target)?;
            let owner = target.object.name_any();
            let text = serde_json::to_string(record).map_err(StoreError::Encode)?;
            let what = format!("the {}'s data", O::kind(&()));
            size::check(&what, text.len(), size::DATA_LIMIT)?;
            let plan = Expected::of(expected);
            if let (Expected::Own(_), Some(expected)) = (&plan, expected)
                && self.holds(target, &names, expected, &text).await?
            {
                // The record object already holds this record (a step
                // that only published status fields): no write.
                target.sync_status(record, status, false).await?;
                return Ok(expected.clone());
            }
            let metadata = ObjectMeta {
                name: Some(names.own.clone()),
                namespace: Some(names.namespace.clone()),
                labels: Some(BTreeMap::from([
                    (MANAGED_BY_LABEL.0.to_owned(), MANAGED_BY_LABEL.1.to_owned()),
                    (OWNER_LABEL.to_owned(), label_value(&owner)),
                    (OWNER_KIND_LABEL.to_owned(), label_value(&K::kind(&()))),
                    (OWNER_UID_LABEL.to_owned(), label_value(&target.uid)),
                ])),
                owner_references: owner_reference(target.object.as_ref()).map(|o| vec![o]),
                resource_version: match plan {
                    Expected::Own(rv) | Expected::Stale(rv) => Some(rv.to_owned()),
                    Expected::Nothing | Expected::Legacy(_) => None,
                },
                ..ObjectMeta::default()
            };
            let object = O::with_record(metadata, text.clone());
            let params = PostParams {
                field_manager: Some(target.field_manager.clone()),
                ..PostParams::default()
            };
            let api = self.api(&names.namespace);
            let refused = |e| size::refused(e, &what, text.len(), size::DATA_LIMIT);
            let (written, replaced) = match plan {
                Expected::Nothing | Expected::Legacy(_) => {
                    self.create(target, &names, &params, object, &refused)
                        .await?
                }
                Expected::Own(_) => (
                    api.replace(&names.own, &params, &object)
                        .await
                        .map_err(refused)?,
                    None,
                ),
                Expected::Stale(_) => match api.replace(&names.own, &params, &object).await {
                    // Garbage collection removed it meanwhile.
                    Err(kube::Error::Api(status)) if status.is_not_found() => {
                        let mut object = object;
                        object.meta_mut().resource_version = None;
                        self.create(target, &names, &params, object, &refused)
                            .await?
                    }
                    other => (other.map_err(refused)?, None),
                },
            };
            let version = Version(written.meta().resource_version.clone().unwrap_or_default());
            if let Expected::Legacy(rv) = plan {
                self.delete_legacy(target, &names, rv).await;
            }
            let superseded = replaced.map(Version);
            self.written.remember(
                &target.uid,
                superseded.as_ref().or(expected),
                version.clone(),
                RawRecord::Text(text),
                None,
            );
            target.sync_status(record, status, false).await?;
            Ok(version)
        })
    }

    fn delete<'a>(
        &'a self,
        target: &'a Target<K>,
        expected: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            self.written.forget(&target.uid);
            let names = self.names(target)?;
            let (name, rv) = match Expected::of(expected) {
                Expected::Nothing => return Ok(()),
                Expected::Own(rv) | Expected::Stale(rv) => (&names.own, rv),
                Expected::Legacy(rv) => (&names.legacy, rv),
            };
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: Some(rv.to_owned()),
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            match self.api(&names.namespace).delete(name, &params).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
                Err(e) => Err(store_error(e)),
            }
        })
    }

    fn report_corrupt<'a>(
        &'a self,
        target: &'a Target<K>,
        error: &'a DecodeError,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.written.forget(&target.uid);
        Box::pin(report_corrupt_conditions(target, error))
    }

    fn kind(&self) -> Option<StoreKind> {
        O::store_kind()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`,
    /// at most 253 characters, each part at most 63 (stricter than the
    /// real server, as strict as the embedded one).
    fn is_subdomain(name: &str) -> bool {
        name.len() <= NAME_LIMIT
            && name.split('.').all(|part| {
                !part.is_empty()
                    && part.len() <= NAME_PART_LIMIT
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            })
    }

    #[test]
    fn a_record_object_is_named_after_the_object_its_kind_and_a_hash() {
        let name = record_object_name("db1", "example.io", "Database", "DbState");
        assert_eq!(
            name,
            record_object_name("db1", "example.io", "Database", "DbState")
        );
        let (head, hash) = name.split_at("db1.database.fsm-".len());
        assert_eq!(head, "db1.database.fsm-");
        assert_eq!(hash.len(), 10);
        assert!(hash.chars().all(|c| c.is_ascii_hexdigit()));
        assert!(is_subdomain(&name));
        // The name is stable across releases: it is what finds the record
        // (the expected hash computed independently of this code).
        assert_eq!(name, "db1.database.fsm-f29fabf7d3");
    }

    #[test]
    fn other_groups_kinds_and_machines_get_other_names() {
        let names = [
            record_object_name("same", "test.io", "Widget", "WidgetState"),
            record_object_name("same", "other.io", "Widget", "WidgetState"),
            record_object_name("same", "test.io", "Gadget", "WidgetState"),
            record_object_name("same", "test.io", "Widget", "AuditState"),
            record_object_name("same", "", "Widget", "WidgetState"),
            // Parts do not run into each other.
            record_object_name("same", "test.i", "oWidget", "WidgetState"),
        ];
        let distinct: std::collections::BTreeSet<_> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "{names:?}");
        assert!(
            names
                .iter()
                .all(|n| n.starts_with("same.") && is_subdomain(n))
        );
        assert_ne!(legacy_record_object_name("same"), names[0]);
    }

    #[test]
    fn long_names_are_cut_and_hashed_within_253_characters() {
        let parts = [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61),
        ];
        let longest = parts.join(".");
        assert_eq!(longest.len(), 253);
        let name = record_object_name(&longest, "test.io", "Widget", "WidgetState");
        assert!(name.len() <= NAME_LIMIT, "{} characters", name.len());
        assert!(is_subdomain(&name), "{name}");
        assert!(name.starts_with(&longest[..150]), "{name}");
        assert!(name.ends_with(&record_object_name("", "test.io", "Widget", "WidgetState")));
        // Two names that differ after the cut still get two names.
        let other = format!("{}e", &longest[..252]);
        assert_ne!(
            name,
            record_object_name(&other, "test.io", "Widget", "WidgetState")
        );
        // A name just short enough is kept whole.
        let suffix = record_object_name("", "test.io", "Widget", "WidgetState").len();
        let fits = "f".repeat(NAME_LIMIT - suffix);
        assert_eq!(
            record_object_name(&fits, "test.io", "Widget", "WidgetState"),
            format!(
                "{fits}{}",
                record_object_name("", "test.io", "Widget", "WidgetState")
            )
        );
        // The cut never leaves a `-` or `.` before the hash: the cut falls
        // after 220 characters here.
        let head = format!("{0}.{0}.{0}.{1}", "g".repeat(59), "h".repeat(39));
        assert_eq!(head.len(), 219);
        for name in [
            format!("{head}.{}", "i".repeat(33)),
            format!("{head}-{}.{}", "i".repeat(23), "j".repeat(9)),
        ] {
            assert_eq!(name.len(), 253);
            assert!(is_subdomain(&name), "{name}");
            let cut = record_object_name(&name, "test.io", "Widget", "WidgetState");
            assert!(is_subdomain(&cut), "{cut}");
            assert!(cut.starts_with(&format!("{head}.")), "{cut}");
        }
    }

    #[test]
    fn odd_kinds_still_make_valid_names() {
        for kind in ["", "Ünïcode", "With_Underscore", &"K".repeat(100)] {
            let name = record_object_name("x", "g.io", kind, "M");
            assert!(is_subdomain(&name), "{kind:?}: {name}");
        }
    }

    #[test]
    fn label_values_are_kept_or_cut_to_63_characters() {
        assert_eq!(label_value("db1"), "db1");
        let long = format!("{}.{}", "a".repeat(40), "b".repeat(40));
        let value = label_value(&long);
        assert!(value.len() <= LABEL_VALUE_LIMIT, "{value}");
        assert!(value.starts_with(&long[..40]), "{value}");
        assert_ne!(value, label_value(&format!("{long}c")));
        assert!(
            value
                .chars()
                .last()
                .is_some_and(|c| c.is_ascii_alphanumeric())
        );
    }

    fn meta(labels: &[(&str, &str)], owners: &[(&str, &str, &str)]) -> ObjectMeta {
        ObjectMeta {
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            owner_references: Some(
                owners
                    .iter()
                    .map(|(api_version, kind, uid)| OwnerReference {
                        api_version: (*api_version).to_owned(),
                        kind: (*kind).to_owned(),
                        name: "w".to_owned(),
                        uid: (*uid).to_owned(),
                        ..OwnerReference::default()
                    })
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_record_object_belongs_to_the_uid_its_label_or_owner_names() {
        assert!(belongs_to(&meta(&[(OWNER_UID_LABEL, "u1")], &[]), "u1"));
        assert!(!belongs_to(&meta(&[(OWNER_UID_LABEL, "u0")], &[]), "u1"));
        assert!(belongs_to(&meta(&[], &[("g/v1", "Widget", "u1")]), "u1"));
        assert!(!belongs_to(&meta(&[], &[("g/v1", "Widget", "u0")]), "u1"));
        // Orphaned, unlabelled: nobody's.
        assert!(!belongs_to(&meta(&[], &[]), "u1"));

        let legacy = meta(&[], &[("g.io/v1", "Widget", "u1")]);
        assert!(legacy_belongs_to(&legacy, "u1", "g.io", "Widget"));
        assert!(!legacy_belongs_to(&legacy, "u1", "other.io", "Widget"));
        assert!(!legacy_belongs_to(&legacy, "u1", "g.io", "Gadget"));
        assert!(!legacy_belongs_to(&legacy, "u0", "g.io", "Widget"));
        let core = meta(&[], &[("v1", "Pod", "u1")]);
        assert!(legacy_belongs_to(&core, "u1", "", "Pod"));
    }

    #[test]
    fn version_tokens_say_which_object_to_write() {
        let v = |s: &str| Version(s.to_owned());
        assert!(matches!(Expected::of(None), Expected::Nothing));
        assert!(matches!(Expected::of(Some(&v("42"))), Expected::Own("42")));
        assert!(matches!(
            Expected::of(Some(&v("legacy:42"))),
            Expected::Legacy("42")
        ));
        assert!(matches!(
            Expected::of(Some(&v("stale:42"))),
            Expected::Stale("42")
        ));
    }
}
