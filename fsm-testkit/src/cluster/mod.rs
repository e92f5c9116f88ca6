//! The cluster: the resource registry and the store, and the semantics of
//! each write verb (defaults, validation, optimistic concurrency, the
//! status subresource, `generation`, finalizers, namespaces and CRDs).
//!
//! Everything here is synchronous and runs under the server's lock, so a
//! verb is atomic; HTTP lives in `handlers`.

mod delete;
mod gc;
mod ids;
mod meta;
mod paging;
mod tokens;

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::crd;
use crate::kinds;
use crate::patch::managed_fields::{self, Operation, Scope, Writer};
use crate::patch::{self, PatchType};
use crate::resources::{GroupResource, Registry, ResourceDef};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::{ApiError, Cause, Subject};
use crate::store::Store;
use crate::time::timestamp;
use crate::validation::{generate_name_problems, name_problems};

use ids::IdSource;
use meta::{
    check_namespace_field, check_type, copy_field, finalizers, metadata_mut, spec_changed, str_at,
};
pub(crate) use paging::parse_resource_version;
pub use paging::{ReadAt, ReadOptions};
use paging::{decode_continue, encode_continue};

pub use gc::Propagation;

/// Which part of an object a write targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The object itself (status is ignored when the status subresource exists).
    Main,
    /// The `status` subresource (only status changes).
    Status,
}

/// Options of a list (and of a delete-collection).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `limit` (0 or absent: no limit).
    pub limit: Option<usize>,
    /// `continue`, as returned by a previous page.
    pub continue_token: Option<String>,
    /// The revision to list at (`resourceVersion`, `resourceVersionMatch`).
    pub at: ReadAt,
}

/// `DeleteOptions` the server honours.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun: ["All"]`.
    pub dry_run: bool,
    /// `propagationPolicy` (or the deprecated `orphanDependents: true`);
    /// `None` is the default, background.
    pub propagation: Option<Propagation>,
    /// `gracePeriodSeconds` (accepted; objects here have no grace period).
    pub grace_period_seconds: Option<i64>,
}

/// How a write records field ownership in `metadata.managedFields`.
#[derive(Debug, Clone, PartialEq)]
pub enum Ownership<'a> {
    /// A write of the server itself: no manager; fields it removes leave
    /// every entry.
    Internal,
    /// A create, update or patch by this field manager (operation `Update`).
    Update(&'a str),
    /// A server-side apply: the `managedFields` it computed.
    Applied(Value),
}

/// How a request patches: its field manager and `force`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchOptions {
    /// `fieldManager` (required for server-side apply), else the client's
    /// User-Agent up to its first `/`.
    pub field_manager: Option<String>,
    /// `force`: take the fields other managers own (server-side apply).
    pub force: bool,
}

/// The registry and the store, with the API's write semantics.
#[derive(Debug)]
pub struct Cluster {
    /// Served resources.
    pub registry: Registry,
    /// Stored objects.
    pub store: Store,
    ids: IdSource,
    sequence: u64,
    /// How many stored objects the garbage collector has examined for
    /// dangling owner references ([`Cluster::garbage_collector_checks`]).
    gc_checks: u64,
}

const NAMESPACE_GR: (&str, &str) = ("", "namespaces");
const CRD_GROUP: &str = "apiextensions.k8s.io";
/// The bytes of a `generateName` the real server keeps.
const MAX_GENERATED_PREFIX: usize = 58;
/// The fields of `ObjectMeta`: others in a body's metadata are dropped.
const OBJECT_META_FIELDS: [&str; 16] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
    "clusterName",
];
/// Namespaces the real server refuses to delete.
const PROTECTED_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

fn namespaces() -> GroupResource {
    GroupResource {
        group: NAMESPACE_GR.0.into(),
        resource: NAMESPACE_GR.1.into(),
    }
}

fn crds() -> GroupResource {
    GroupResource {
        group: CRD_GROUP.into(),
        resource: "customresourcedefinitions".into(),
    }
}

impl Cluster {
    /// A cluster with the built-in resources and the `default` and
    /// `kube-system` namespaces.
    #[must_use]
    pub fn new(history_limit: usize, channel_capacity: usize, seed: u64) -> Self {
        let mut c = Self {
            registry: Registry::with_builtins(),
            store: Store::new(history_limit, channel_capacity),
            ids: IdSource(seed),
            sequence: 0,
            gc_checks: 0,
        };
        let now = jiff::Timestamp::now();
        for ns in ["default", "kube-system", "kube-public"] {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            if let Some(def) = c.registry.get("", "v1", "namespaces") {
                // Creating a fixed, valid namespace in an empty store cannot fail.
                if let Err(e) = c.create(&def, "", body, false, now) {
                    tracing::error!(error = %e, "creating initial namespace");
                }
            }
        }
        c
    }

    /// The object, as `def`'s version presents it.
    ///
    /// # Errors
    /// [`ApiError::NotFound`].
    pub fn get(&self, def: &ResourceDef, ns: &str, name: &str) -> Result<Value, ApiError> {
        self.store
            .get(&def.group_resource(), ns, name)
            .map(|o| present(def, &o))
            .ok_or_else(|| not_found(def, name))
    }

    /// A list of `def`'s objects in `ns` (all namespaces when `None`).
    ///
    /// # Errors
    /// [`ApiError::BadRequest`] for unsupported field selectors or a bad
    /// continue token; [`ApiError::Gone`] for a continue token older than the
    /// kept history.
    pub fn list(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        q: &ListQuery,
    ) -> Result<Value, ApiError> {
        let fields = q.fields.resolve(def)?;
        let current = self.store.revision();
        let (revision, after) = match &q.continue_token {
            Some(token) => {
                let (rev, ns, name) = decode_continue(token)?;
                // 0: the rest of a list whose snapshot expired, at the newest.
                let rev = if rev == 0 { current } else { rev };
                if rev < self.store.compacted() {
                    return Err(ApiError::ContinueExpired(encode_continue(0, &ns, &name)));
                }
                (rev.min(current), Some((ns, name)))
            }
            None => match q.at {
                ReadAt::Latest | ReadAt::NotOlderThan(_) => (current, None),
                // etcd's answer, passed on by the real server (1.20) as a 500.
                ReadAt::Exact(n) if n > current => {
                    return Err(ApiError::Storage(
                        "etcdserver: mvcc: required revision is a future revision".into(),
                    ));
                }
                ReadAt::Exact(n) => (n, None),
            },
        };
        // One snapshot for every page of a list: the revision of its first page.
        let objects = self
            .store
            .list_at(&def.group_resource(), ns, revision)
            .map_err(|_| {
                if after.is_some() {
                    ApiError::Gone("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.".into())
                } else {
                    ApiError::Gone("The resourceVersion for the provided list is too old.".into())
                }
            })?;
        let mut items: Vec<Arc<Value>> = objects
            .into_iter()
            .filter(|o| {
                after.as_ref().is_none_or(|(a_ns, a_name)| {
                    (str_at(o, "namespace"), str_at(o, "name")) > (a_ns.as_str(), a_name.as_str())
                })
            })
            .filter(|o| q.labels.matches(o) && fields.matches(o))
            .collect();
        let mut metadata = json!({"resourceVersion": revision.to_string()});
        if let Some(limit) = q.limit.filter(|l| *l > 0 && items.len() > *l) {
            let remaining = items.len() - limit;
            items.truncate(limit);
            if let Some(last) = items.last() {
                metadata["continue"] = json!(encode_continue(
                    revision,
                    str_at(last, "namespace"),
                    str_at(last, "name")
                ));
                // With a selector the count of what is left cannot be known.
                if q.labels.is_empty() && q.fields.is_empty() {
                    metadata["remainingItemCount"] = json!(remaining);
                }
            }
        }
        if def.custom && metadata.get("continue").is_none() {
            metadata["continue"] = json!("");
        }
        Ok(json!({
            "kind": def.list_kind(),
            "apiVersion": def.api_version(),
            "metadata": metadata,
            "items": items.iter().map(|o| list_item(def, o)).collect::<Vec<_>>(),
        }))
    }

    /// Creates an object from `body`.
    ///
    /// # Errors
    /// `BadRequest` (wrong kind, namespace mismatch), `Invalid` (name),
    /// `NotFound`/`Forbidden` (namespace missing/terminating), `AlreadyExists`.
    pub fn create(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        body: Value,
        dry_run: bool,
        now: jiff::Timestamp,
    ) -> Result<Value, ApiError> {
        self.create_as(def, ns, body, dry_run, now, &Ownership::Internal)
    }

    /// [`Cluster::create`], recording field ownership as `owner` says.
    ///
    /// # Errors
    /// As [`Cluster::create`].
    pub fn create_as(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        body: Value,
        dry_run: bool,
        now: jiff::Timestamp,
        owner: &Ownership<'_>,
    ) -> Result<Value, ApiError> {
        self.create_checked(def, ns, body, dry_run, now, owner, false)
    }

    /// A POST: [`Cluster::create_as`], and a body carrying
    /// `metadata.resourceVersion` is refused as the real storage refuses it
    /// (500 with no reason, `resourceVersion should not be set on objects to
    /// be created`; a dry run does not reach storage and passes).
    ///
    /// # Errors
    /// As [`Cluster::create`], and `Storage` for a resourceVersion.
    pub fn post_as(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        body: Value,
        dry_run: bool,
        now: jiff::Timestamp,
        owner: &Ownership<'_>,
    ) -> Result<Value, ApiError> {
        self.create_checked(def, ns, body, dry_run, now, owner, true)
    }

    #[allow(clippy::too_many_arguments)]
    fn create_checked(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        mut body: Value,
        dry_run: bool,
        now: jiff::Timestamp,
        owner: &Ownership<'_>,
        refuse_resource_version: bool,
    ) -> Result<Value, ApiError> {
        check_type(def, &body)?;
        crate::typed::decode(def, &mut body)?;
        if crate::events::is_event(def) {
            body = crate::events::to_storage(def, body)?;
        }
        crate::validation::check_lease_times(def, &body)?;
        if def.custom {
            normalize_integers(&mut body);
        }
        let meta = metadata_mut(&mut body)?;
        check_namespace_field(def, meta, ns)?;
        drop_unknown_metadata(meta);
        let explicit = meta
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(String::from);
        let prefix = meta
            .get("generateName")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
            .map(String::from);
        // Admission (the namespace's lifecycle) comes before the name is
        // generated and validated.
        if def.namespaced {
            let named = explicit.as_deref().or(prefix.as_deref()).unwrap_or("");
            self.check_namespace_open(def, ns, named)?;
        }
        let name = match (explicit, &prefix) {
            (Some(n), _) => n,
            (None, Some(prefix)) => self.generate_name(def, ns, prefix),
            (None, None) => {
                return Err(ApiError::Invalid(
                    Subject::new(&def.group, &def.kind, ""),
                    vec![Cause::required(
                        "metadata.name",
                        "name or generateName is required",
                    )],
                ));
            }
        };
        let mut causes = Vec::new();
        if let Some(prefix) = &prefix {
            for problem in generate_name_problems(def.name_rule, prefix) {
                causes.push(Cause::invalid("metadata.generateName", prefix, &problem));
            }
        }
        for problem in name_problems(def.name_rule, &name) {
            causes.push(Cause::invalid("metadata.name", &name, &problem));
        }
        causes.extend(metadata_causes(def, meta));
        causes.extend(crate::validation::lease_causes(def, &body));
        if !causes.is_empty() {
            return Err(ApiError::Invalid(
                Subject::new(&def.group, &def.kind, &name),
                causes,
            ));
        }
        let meta = metadata_mut(&mut body)?;
        let gr = def.group_resource();
        let resource_version = meta
            .get("resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|rv| !rv.is_empty());
        meta.insert("name".into(), json!(name));
        meta.insert("uid".into(), json!(self.ids.uid()));
        meta.insert("creationTimestamp".into(), json!(timestamp(now)));
        for k in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta.remove(k);
        }
        if def.generation {
            meta.insert("generation".into(), json!(1));
        } else {
            meta.remove("generation");
        }
        if def.status_subresource
            && let Some(o) = body.as_object_mut()
        {
            o.remove("status");
        }
        if crate::events::is_event(def) {
            crate::events::validate(def, ns, &name, &body, None)?;
        }
        self.sequence += 1;
        kinds::on_create(def, &mut body, self.sequence);
        crate::rbac::validate(def, &name, &body, None)?;
        crate::schema::enforce(&self.store, def, &mut body)?;
        let schema = self.crd_schema(def);
        let scope = ownership_scope(def, Part::Main, schema.as_ref());
        record_ownership(def, &json!({}), &mut body, scope, owner, now);
        let crd_storage = self.crd_prepare(def, &mut body, now)?;
        crate::limits::check_data_size(def, &name, &body)?;
        // Storage: a resourceVersion on a new object, then the key taken.
        if refuse_resource_version && resource_version && !dry_run {
            return Err(ApiError::Storage(
                "resourceVersion should not be set on objects to be created".into(),
            ));
        }
        if self.store.get(&gr, ns, &name).is_some() {
            return Err(ApiError::AlreadyExists(Subject::new(
                &def.group,
                &def.plural,
                &name,
            )));
        }
        if dry_run {
            return Ok(present(def, &body));
        }
        crate::limits::check_storable(&gr, ns, &name, &body)?;
        let stored = self.store.put(&gr, ns, &name, body);
        if let Some(storage) = crd_storage {
            self.crd_register(&stored, &storage);
        }
        if tokens::is_service_account(def) {
            self.ensure_token(&stored, now);
        }
        Ok(present(def, &stored))
    }

    /// Replaces an object (or its status) with `body`.
    ///
    /// # Errors
    /// `BadRequest` (wrong kind, name or namespace mismatch), `NotFound`,
    /// `Conflict` (stale resourceVersion), `Invalid` (missing
    /// resourceVersion on a custom resource, new finalizers while deleting).
    #[allow(clippy::too_many_arguments)]
    pub fn update(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        body: Value,
        part: Part,
        dry_run: bool,
        now: jiff::Timestamp,
    ) -> Result<Value, ApiError> {
        self.update_as(
            def,
            ns,
            name,
            body,
            part,
            dry_run,
            now,
            &Ownership::Internal,
        )
    }

    /// [`Cluster::update`], recording field ownership as `owner` says.
    ///
    /// # Errors
    /// As [`Cluster::update`].
    #[allow(clippy::too_many_arguments)]
    pub fn update_as(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        mut body: Value,
        part: Part,
        dry_run: bool,
        now: jiff::Timestamp,
        owner: &Ownership<'_>,
    ) -> Result<Value, ApiError> {
        check_type(def, &body)?;
        crate::typed::decode(def, &mut body)?;
        if crate::events::is_event(def) {
            body = crate::events::to_storage(def, body)?;
        }
        crate::validation::check_lease_times(def, &body)?;
        if def.custom {
            normalize_integers(&mut body);
        }
        let meta = metadata_mut(&mut body)?;
        match meta.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() && n != name => {
                return Err(ApiError::BadRequest(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            _ => {}
        }
        check_namespace_field(def, meta, ns)?;
        drop_unknown_metadata(meta);
        let gr = def.group_resource();
        let current = self
            .store
            .get(&gr, ns, name)
            .ok_or_else(|| not_found(def, name))?;
        let current_rv = str_at(&current, "resourceVersion").to_string();
        match meta.get("resourceVersion").and_then(Value::as_str) {
            Some(rv) if !rv.is_empty() && rv != current_rv => {
                return Err(conflict(def, name));
            }
            Some(rv) if !rv.is_empty() => {}
            _ if !allows_unconditional_update(def) => {
                // The real store names the resource, not the kind, here.
                return Err(ApiError::Invalid(
                    Subject::new(&def.group, &def.plural, name),
                    vec![Cause {
                        reason: "FieldValueInvalid".into(),
                        message: "Invalid value: 0x0: must be specified for an update".into(),
                        field: "metadata.resourceVersion".into(),
                    }],
                ));
            }
            _ => {}
        }
        if part == Part::Main
            && let Some(uid) = meta.get("uid").and_then(Value::as_str)
            && !uid.is_empty()
            && uid != str_at(&current, "uid")
        {
            // Checked twice on the real server (the common metadata checks
            // of every update, then the kind's own): two causes.
            let cause = Cause::invalid("metadata.uid", uid, "field is immutable");
            return Err(ApiError::Invalid(
                Subject::new(&def.group, &def.kind, name),
                vec![cause.clone(), cause],
            ));
        }
        let mut new = match part {
            Part::Main => {
                if def.status_subresource {
                    copy_field(&current, &mut body, "status");
                }
                body
            }
            Part::Status => {
                let mut n = (*current).clone();
                copy_field(&body, &mut n, "status");
                n
            }
        };
        let new_meta = metadata_mut(&mut new)?;
        for k in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "resourceVersion",
        ] {
            match current["metadata"].get(k) {
                Some(v) => new_meta.insert(k.into(), v.clone()),
                None => new_meta.remove(k),
            };
        }
        if current["metadata"].get("deletionTimestamp").is_some() {
            let old = finalizers(&current);
            let added: Vec<String> = finalizers(&new)
                .into_iter()
                .filter(|f| !old.contains(f))
                .collect();
            if !added.is_empty() {
                return Err(ApiError::Invalid(
                    Subject::new(&def.group, &def.kind, name),
                    vec![Cause::forbidden(
                        "metadata.finalizers",
                        &format!(
                            "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                            added
                                .iter()
                                .map(|f| format!("{f:?}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )],
                ));
            }
        }
        if def.generation && spec_changed(&current, &new, def.status_subresource) {
            let generation = current["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            new["metadata"]["generation"] = json!(generation);
        }
        if let Some(meta) = new.get("metadata").and_then(Value::as_object) {
            let mut causes = metadata_causes(def, meta);
            causes.extend(crate::validation::lease_causes(def, &new));
            if !causes.is_empty() {
                return Err(ApiError::Invalid(
                    Subject::new(&def.group, &def.kind, name),
                    causes,
                ));
            }
        }
        kinds::on_write(def, &mut new);
        crate::schema::enforce(&self.store, def, &mut new)?;
        let schema = self.crd_schema(def);
        let scope = ownership_scope(def, part, schema.as_ref());
        record_ownership(def, &current, &mut new, scope, owner, now);
        let crd_storage = self.crd_prepare(def, &mut new, now)?;
        set_type(def, &mut new, &current);
        if crate::events::is_event(def) {
            crate::events::validate(def, ns, name, &new, Some(&current))?;
        }
        crate::rbac::validate(def, name, &new, Some(&current))?;
        if new == *current {
            return Ok(present(def, &current));
        }
        crate::limits::check_data_size(def, name, &new)?;
        if dry_run {
            return Ok(present(def, &new));
        }
        if current["metadata"].get("deletionTimestamp").is_some()
            && finalizers(&new).is_empty()
            && !self.has_content(def, &new)
        {
            let gone = self.remove_object(def, ns, name, new);
            return Ok(present(def, &gone));
        }
        crate::limits::check_storable(&gr, ns, name, &new)?;
        let stored = self.store.put(&gr, ns, name, new);
        if let Some(storage) = crd_storage {
            self.crd_register(&stored, &storage);
        }
        if tokens::is_service_account(def) {
            self.ensure_token(&stored, now);
        }
        Ok(present(def, &stored))
    }

    /// A PUT: [`Cluster::update_as`], or, for an absent object of a kind
    /// the real server creates on update (its definition's `creates_on_update`),
    /// [`Cluster::create_as`] under the URL's name. Returns the object and
    /// whether it was created.
    ///
    /// # Errors
    /// As [`Cluster::update`] or [`Cluster::create`].
    #[allow(clippy::too_many_arguments)]
    pub fn replace_as(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        mut body: Value,
        part: Part,
        dry_run: bool,
        now: jiff::Timestamp,
        owner: &Ownership<'_>,
    ) -> Result<(Value, bool), ApiError> {
        let current = self.store.get(&def.group_resource(), ns, name);
        let absent = current.is_none();
        if let Some(current) = &current
            && let Some(uid) = body["metadata"]["uid"].as_str()
            && !uid.is_empty()
            && uid != str_at(current, "uid")
        {
            // The body's uid is a precondition of the storage update.
            return Err(ApiError::Conflict(
                Subject::new(&def.group, &def.plural, name),
                format!(
                    "StorageError: invalid object, Code: 4, Key: {}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    storage_key(def, ns, name),
                    str_at(current, "uid")
                ),
            ));
        }
        if !(absent && part == Part::Main && def.creates_on_update()) {
            return self
                .update_as(def, ns, name, body, part, dry_run, now, owner)
                .map(|o| (o, false));
        }
        let meta = metadata_mut(&mut body)?;
        match meta.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() && n != name => {
                return Err(ApiError::BadRequest(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            _ => {
                meta.insert("name".into(), json!(name));
            }
        }
        self.create_as(def, ns, body, dry_run, now, owner)
            .map(|o| (o, true))
    }

    /// Patches an object (or its status); a server-side apply creates an
    /// absent object. Returns the object and whether it was created.
    ///
    /// # Errors
    /// As [`Cluster::update`] (and [`Cluster::create`] for an apply), plus
    /// `BadRequest` for a malformed patch, `Invalid` for a JSON patch that
    /// cannot be applied or an apply without a field manager,
    /// `UnsupportedMediaType` for a strategic merge patch of a custom
    /// resource, and `Conflict` (with the conflicting fields) for an apply
    /// that would change fields other managers own.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        kind: PatchType,
        patch_body: &[u8],
        part: Part,
        opts: &PatchOptions,
        dry_run: bool,
        now: jiff::Timestamp,
    ) -> Result<(Value, bool), ApiError> {
        if kind == PatchType::Apply {
            return self.server_side_apply(def, ns, name, patch_body, part, opts, dry_run, now);
        }
        if opts.force {
            return Err(ApiError::Invalid(
                Subject::new("meta.k8s.io", "PatchOptions", ""),
                vec![Cause::forbidden(
                    "force",
                    "may not be specified for non-apply patch",
                )],
            ));
        }
        let current = self
            .store
            .get(&def.group_resource(), ns, name)
            .ok_or_else(|| not_found(def, name))?;
        let mut target = present(def, &current);
        patch::apply_patch(kind, &mut target, patch_body, def.custom)?;
        crate::typed::decode_patched(def, &mut target)?;
        let manager = opts.field_manager.as_deref().unwrap_or("unknown");
        let owner = Ownership::Update(manager);
        self.update_as(def, ns, name, target, part, dry_run, now, &owner)
            .map(|o| (o, false))
    }

    #[allow(clippy::too_many_arguments)]
    fn server_side_apply(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        body: &[u8],
        part: Part,
        opts: &PatchOptions,
        dry_run: bool,
        now: jiff::Timestamp,
    ) -> Result<(Value, bool), ApiError> {
        let Some(manager) = opts.field_manager.as_deref().filter(|m| !m.is_empty()) else {
            return Err(ApiError::Invalid(
                Subject::new("meta.k8s.io", "PatchOptions", ""),
                vec![Cause::required(
                    "fieldManager",
                    "is required for apply patch",
                )],
            ));
        };
        let mut config: Value = serde_json::from_slice(body).map_err(|e| {
            ApiError::BadRequest(format!(
                "error decoding YAML: only JSON apply configurations are understood here: {e}"
            ))
        })?;
        check_type(def, &config)?;
        let meta = metadata_mut(&mut config)?;
        match meta.get("name").and_then(Value::as_str) {
            Some(n) if n != name => {
                return Err(ApiError::BadRequest(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            Some(_) => {}
            None => {
                meta.insert("name".into(), json!(name));
            }
        }
        let time = timestamp(now);
        let writer = Writer {
            manager,
            operation: Operation::Apply,
            api_version: &def.api_version(),
            subresource: (part == Part::Status).then_some("status"),
            time: &time,
        };
        let schema = self.crd_schema(def);
        let scope = ownership_scope(def, part, schema.as_ref());
        let live = self
            .store
            .get(&def.group_resource(), ns, name)
            .map(|o| present(def, &o));
        let Some(live) = live else {
            if part == Part::Status {
                return Err(not_found(def, name));
            }
            let object = patch::apply::apply(None, &config, &writer, opts.force, scope)?;
            let owner = Ownership::Applied(object["metadata"]["managedFields"].clone());
            return self
                .create_as(def, ns, object, dry_run, now, &owner)
                .map(|o| (o, true));
        };
        let object = match patch::apply::apply(Some(&live), &config, &writer, opts.force, scope) {
            Err(ApiError::ApplyConflict(message, causes)) => {
                // kubectl's first server-side apply of an object it applied
                // client-side: conflicts on fields the last-applied
                // annotation still matches are forced (the real server's
                // lastAppliedManager), for the manager "kubectl" only.
                let allowed = if manager == "kubectl" {
                    last_applied_fields(def, &live, scope)
                } else {
                    BTreeSet::new()
                };
                if causes.iter().all(|c| allowed.contains(&c.field)) {
                    patch::apply::apply(Some(&live), &config, &writer, true, scope)?
                } else {
                    let left = causes
                        .into_iter()
                        .filter(|c| !allowed.contains(&c.field))
                        .collect();
                    return Err(ApiError::ApplyConflict(message, left));
                }
            }
            other => other?,
        };
        let owner = Ownership::Applied(object["metadata"]["managedFields"].clone());
        self.update_as(def, ns, name, object, part, dry_run, now, &owner)
            .map(|o| (o, false))
    }

    /// The namespace lifecycle admission of a create of `name` (or its
    /// `generateName`) in `ns`.
    fn check_namespace_open(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        match self.store.get(&namespaces(), "", ns) {
            None => Err(ApiError::NotFound(Subject::new("", "namespaces", ns))),
            Some(n) if n["metadata"].get("deletionTimestamp").is_some() => {
                Err(ApiError::ForbiddenBecause(
                    Subject::new(&def.group, &def.plural, name),
                    format!(
                        "unable to create new content in namespace {ns} because it is being terminated"
                    ),
                    vec![Cause {
                        reason: "NamespaceTerminating".into(),
                        message: format!("namespace {ns} is being terminated"),
                        field: "metadata.namespace".into(),
                    }],
                ))
            }
            Some(_) => Ok(()),
        }
    }

    /// For a CRD: validates it, fills defaults and status; returns its
    /// storage version. `None` for other kinds.
    fn crd_prepare(
        &self,
        def: &ResourceDef,
        object: &mut Value,
        now: jiff::Timestamp,
    ) -> Result<Option<String>, ApiError> {
        if def.group_resource() != crds() {
            return Ok(None);
        }
        crd::default_spec(object);
        let (_, storage) = crd::definitions(object).map_err(|causes| {
            ApiError::Invalid(
                Subject::new(&def.group, &def.kind, str_at(object, "name")),
                causes,
            )
        })?;
        crd::set_status(object, &storage, &timestamp(now));
        Ok(Some(storage))
    }

    fn crd_register(&mut self, object: &Value, storage: &str) {
        match crd::definitions(object) {
            Ok((defs, _)) => {
                if let Some(first) = defs.first() {
                    self.registry.remove(&first.group_resource());
                }
                for d in defs {
                    let preferred = d.version == storage;
                    self.registry.insert(d, preferred);
                }
            }
            Err(causes) => tracing::error!(?causes, "a stored CRD no longer validates"),
        }
    }

    /// The `openAPIV3Schema` of a custom resource's version, from its CRD.
    fn crd_schema(&self, def: &ResourceDef) -> Option<Value> {
        if !def.custom {
            return None;
        }
        let crd = self
            .store
            .get(&crds(), "", &format!("{}.{}", def.plural, def.group))?;
        crd["spec"]["versions"]
            .as_array()?
            .iter()
            .find(|v| v["name"] == def.version.as_str())
            .and_then(|v| v["schema"].get("openAPIV3Schema"))
            .cloned()
    }

    fn generate_name(&mut self, def: &ResourceDef, ns: &str, prefix: &str) -> String {
        let gr = def.group_resource();
        // The real server keeps 58 bytes of the prefix (63 with the suffix).
        let cut = prefix
            .char_indices()
            .map(|(i, c)| i + c.len_utf8())
            .take_while(|end| *end <= MAX_GENERATED_PREFIX)
            .last()
            .unwrap_or(0);
        let prefix = &prefix[..cut];
        loop {
            let candidate = format!("{prefix}{}", self.ids.suffix());
            if self.store.get(&gr, ns, &candidate).is_none() {
                return candidate;
            }
        }
    }
}

/// `object` as `def`'s group/version presents it (no conversion: the
/// versions of a custom resource share one schema here).
#[must_use]
pub(crate) fn present(def: &ResourceDef, object: &Value) -> Value {
    if crate::events::is_events_api(def) {
        return crate::events::present(def, object);
    }
    let mut o = object.clone();
    if let Some(m) = o.as_object_mut() {
        m.insert("apiVersion".into(), json!(def.api_version()));
        m.insert("kind".into(), json!(def.kind));
    }
    o
}

/// An item of a list: built-in lists carry no apiVersion/kind on their
/// items (the real server's typed lists), custom resource lists do.
#[must_use]
pub(crate) fn list_item(def: &ResourceDef, object: &Value) -> Value {
    let mut o = present(def, object);
    if !def.custom
        && let Some(m) = o.as_object_mut()
    {
        m.remove("apiVersion");
        m.remove("kind");
    }
    o
}

/// Which fields a write to `part` of `def`'s objects can own (`schema`:
/// a custom resource's `openAPIV3Schema`).
fn ownership_scope<'a>(def: &ResourceDef, part: Part, schema: Option<&'a Value>) -> Scope<'a> {
    Scope {
        associative: !def.custom,
        schema,
        status_only: part == Part::Status,
        without_status: part == Part::Main && def.status_subresource,
    }
}

/// Sets `new`'s `managedFields` for a write from `old` (`{}` for a create).
fn record_ownership(
    def: &ResourceDef,
    old: &Value,
    new: &mut Value,
    scope: Scope<'_>,
    owner: &Ownership<'_>,
    now: jiff::Timestamp,
) {
    match owner {
        Ownership::Applied(fields) => {
            if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                if fields.is_array() {
                    meta.insert("managedFields".into(), fields.clone());
                } else {
                    meta.remove("managedFields");
                }
            }
        }
        Ownership::Internal | Ownership::Update(_) => {
            // managedFields the client wrote: `[{}]` resets them (the
            // object keeps none); a valid list replaces the live one
            // before this write is recorded; anything else is ignored.
            let base = match managed_fields::given(new) {
                managed_fields::Given::Reset => {
                    if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.remove("managedFields");
                    }
                    return;
                }
                managed_fields::Given::Entries(list) => {
                    let mut base = old.clone();
                    if let Some(meta) = base.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.insert("managedFields".into(), list);
                    }
                    std::borrow::Cow::Owned(base)
                }
                managed_fields::Given::None => std::borrow::Cow::Borrowed(old),
            };
            let Ownership::Update(manager) = owner else {
                managed_fields::record_update(&base, new, scope, None);
                return;
            };
            let time = timestamp(now);
            let api_version = def.api_version();
            let writer = Writer {
                manager,
                operation: Operation::Update,
                api_version: &api_version,
                subresource: scope.status_only.then_some("status"),
                time: &time,
            };
            managed_fields::record_update(&base, new, scope, Some(&writer));
        }
    }
}

fn set_type(def: &ResourceDef, new: &mut Value, current: &Value) {
    // Keep the version the object was stored with unless the writer named another.
    let api_version = current
        .get("apiVersion")
        .cloned()
        .unwrap_or_else(|| json!(def.api_version()));
    if let Some(m) = new.as_object_mut() {
        m.insert("apiVersion".into(), api_version);
        m.insert("kind".into(), json!(def.kind));
    }
}

/// The causes the real server finds in an object's metadata: label keys
/// and values, annotation keys (qualified names, the prefix lowercased),
/// the annotations' total size, and invalid owner references and
/// finalizers ([`gc::metadata_causes`]).
fn metadata_causes(def: &ResourceDef, meta: &serde_json::Map<String, Value>) -> Vec<Cause> {
    let mut causes = gc::metadata_causes(def, meta);
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        for (k, v) in labels {
            for problem in crate::validation::qualified_name_problems(k) {
                causes.push(Cause::invalid("metadata.labels", k, &problem));
            }
            match v.as_str() {
                Some(text) => {
                    if let Some(problem) = crate::validation::label_value_problem(text) {
                        causes.push(Cause::invalid("metadata.labels", text, &problem));
                    }
                }
                None => causes.push(Cause::invalid(
                    "metadata.labels",
                    &v.to_string(),
                    "label values must be strings",
                )),
            }
        }
    }
    if let Some(annotations) = meta.get("annotations").and_then(Value::as_object) {
        let mut total = 0;
        for (k, v) in annotations {
            for problem in crate::validation::qualified_name_problems(&k.to_lowercase()) {
                causes.push(Cause::invalid("metadata.annotations", k, &problem));
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > crate::validation::TOTAL_ANNOTATION_BYTES {
            causes.push(Cause {
                reason: "FieldValueTooLong".into(),
                message: format!(
                    "Too long: must have at most {} bytes",
                    crate::validation::TOTAL_ANNOTATION_BYTES
                ),
                field: "metadata.annotations".into(),
            });
        }
    }
    causes
}

/// Drops what a body's metadata carries beyond `ObjectMeta`'s fields, as
/// decoding into `ObjectMeta` does on the real server.
fn drop_unknown_metadata(meta: &mut serde_json::Map<String, Value>) {
    meta.retain(|k, _| OBJECT_META_FIELDS.contains(&k.as_str()));
}

/// Writes integral numbers as integers (`2.0` → `2`), as the real server
/// re-encodes a custom resource (its JSON decoder reads numbers into
/// `int64` or `float64`, and Go writes an integral `float64` without a
/// fraction).
fn normalize_integers(v: &mut Value) {
    match v {
        Value::Number(n) if !n.is_i64() && !n.is_u64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9.0e15
            {
                #[allow(clippy::cast_possible_truncation)]
                let i = f as i64;
                *v = json!(i);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize_integers),
        Value::Object(m) => m.values_mut().for_each(normalize_integers),
        _ => {}
    }
}

/// The fields (as conflicts name them: `.data.mode`) that `live`'s
/// `kubectl.kubernetes.io/last-applied-configuration` sets to the value
/// they still have: those client-side apply owned.
fn last_applied_fields(def: &ResourceDef, live: &Value, scope: Scope<'_>) -> BTreeSet<String> {
    let Some(text) =
        live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
    else {
        return BTreeSet::new();
    };
    let Ok(applied) = serde_json::from_str::<Value>(text) else {
        return BTreeSet::new();
    };
    if applied["apiVersion"] != def.api_version().as_str() {
        return BTreeSet::new();
    }
    let live_leaves = managed_fields::leaves(live, scope);
    managed_fields::leaves(&applied, scope)
        .into_iter()
        .filter(|(path, value)| live_leaves.get(path) == Some(value))
        .map(|(path, _)| managed_fields::display(&path))
        .collect()
}

/// Whether a PUT without `metadata.resourceVersion` is an unconditional
/// update (the real strategies' `AllowUnconditionalUpdate`): not for custom
/// resources, CRDs and Leases.
fn allows_unconditional_update(def: &ResourceDef) -> bool {
    !(def.custom
        || def.group_resource() == crds()
        || (def.group == "coordination.k8s.io" && def.plural == "leases"))
}

/// The etcd key of an object on the real server, as its storage errors
/// name it: `/registry/<resource>/…` for built-in kinds,
/// `/registry/<group>/<resource>/…` for custom resources and CRDs.
fn storage_key(def: &ResourceDef, ns: &str, name: &str) -> String {
    let resource = if def.custom || def.group_resource() == crds() {
        format!("{}/{}", def.group, def.plural)
    } else if def.group.is_empty() && def.plural == "services" {
        "services/specs".into()
    } else {
        def.plural.clone()
    };
    if ns.is_empty() {
        format!("/registry/{resource}/{name}")
    } else {
        format!("/registry/{resource}/{ns}/{name}")
    }
}

fn not_found(def: &ResourceDef, name: &str) -> ApiError {
    ApiError::NotFound(Subject::new(&def.group, &def.plural, name))
}

fn conflict(def: &ResourceDef, name: &str) -> ApiError {
    ApiError::Conflict(
        Subject::new(&def.group, &def.plural, name),
        "the object has been modified; please apply your changes to the latest version and try again".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn cluster() -> Cluster {
        Cluster::new(100, 16, 7)
    }

    fn def(c: &Cluster, g: &str, p: &str) -> Arc<ResourceDef> {
        c.registry.get(g, "v1", p).unwrap()
    }

    #[test]
    fn starts_with_namespaces() {
        let c = cluster();
        let ns = def(&c, "", "namespaces");
        assert_eq!(
            c.get(&ns, "", "default").unwrap()["status"]["phase"],
            "Active"
        );
        assert!(c.get(&ns, "", "kube-system").is_ok());
    }

    #[test]
    fn create_fills_metadata_and_generate_name() {
        let mut c = cluster();
        let d = def(&c, "apps", "deployments");
        let body = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"generateName": "web-"}, "spec": {"replicas": 1}, "status": {"x": 1}});
        let o = c.create(&d, "default", body, false, now()).unwrap();
        let name = o["metadata"]["name"].as_str().unwrap();
        assert!(name.starts_with("web-") && name.len() == 9, "{name}");
        assert_eq!(o["metadata"]["generation"], 1);
        assert_eq!(o["metadata"]["namespace"], "default");
        assert_eq!(o["metadata"]["uid"].as_str().unwrap().len(), 36);
        assert_eq!(o["metadata"]["creationTimestamp"], "2027-01-15T08:00:00Z");
        assert!(o.get("status").is_none(), "status is dropped on create");
    }

    #[test]
    fn update_rules_for_status_and_generation() {
        let mut c = cluster();
        let d = def(&c, "apps", "deployments");
        let body = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"}, "spec": {"replicas": 1}});
        let o = c.create(&d, "default", body, false, now()).unwrap();
        // Main write: status ignored, spec change bumps generation.
        let mut w = o.clone();
        w["spec"]["replicas"] = json!(2);
        w["status"] = json!({"readyReplicas": 5});
        let u = c
            .update(&d, "default", "web", w, Part::Main, false, now())
            .unwrap();
        assert_eq!(u["metadata"]["generation"], 2);
        assert!(u.get("status").is_none());
        // Status write: only status changes, generation stays.
        let mut s = u.clone();
        s["spec"]["replicas"] = json!(9);
        s["status"] = json!({"readyReplicas": 2});
        let u2 = c
            .update(&d, "default", "web", s, Part::Status, false, now())
            .unwrap();
        assert_eq!(u2["spec"]["replicas"], 2);
        assert_eq!(u2["status"]["readyReplicas"], 2);
        assert_eq!(u2["metadata"]["generation"], 2);
        // Metadata-only change: no generation bump.
        let mut m = u2.clone();
        m["metadata"]["labels"] = json!({"a": "b"});
        let u3 = c
            .update(&d, "default", "web", m, Part::Main, false, now())
            .unwrap();
        assert_eq!(u3["metadata"]["generation"], 2);
        // Stale write conflicts.
        let e = c
            .update(&d, "default", "web", o, Part::Main, false, now())
            .unwrap_err();
        assert_eq!(e.reason(), "Conflict");
    }

    #[test]
    fn no_op_update_writes_nothing() {
        let mut c = cluster();
        let d = def(&c, "", "configmaps");
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        let o = c.create(&d, "default", body, false, now()).unwrap();
        let rev = c.store.revision();
        let u = c
            .update(&d, "default", "a", o.clone(), Part::Main, false, now())
            .unwrap();
        assert_eq!(u, o);
        assert_eq!(c.store.revision(), rev);
    }

    #[test]
    fn paging_with_continue() {
        let mut c = cluster();
        let cm = def(&c, "", "configmaps");
        for i in 0..5 {
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c{i}")}});
            c.create(&cm, "default", body, false, now()).unwrap();
        }
        let mut q = ListQuery {
            limit: Some(2),
            ..ListQuery::default()
        };
        let mut names = Vec::new();
        loop {
            let page = c.list(&cm, Some("default"), &q).unwrap();
            for i in page["items"].as_array().unwrap() {
                names.push(i["metadata"]["name"].as_str().unwrap().to_string());
            }
            match page["metadata"]["continue"].as_str() {
                Some(t) => q.continue_token = Some(t.into()),
                None => break,
            }
        }
        assert_eq!(names, vec!["c0", "c1", "c2", "c3", "c4"]);
        q.continue_token = Some("zz".into());
        assert_eq!(c.list(&cm, None, &q).unwrap_err().reason(), "BadRequest");
    }
}
