//! The cluster: the resource registry and the store, and the semantics of
//! each write verb (defaults, validation, optimistic concurrency, the
//! status subresource, `generation`, finalizers, namespaces and CRDs).
//!
//! Everything here is synchronous and runs under the server's lock, so a
//! verb is atomic; HTTP lives in `handlers`.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::crd;
use crate::kinds;
use crate::patch::{self, PatchType};
use crate::resources::{GroupResource, Registry, ResourceDef};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::{ApiError, Cause, Subject};
use crate::store::Store;
use crate::validation::name_problem;

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
}

impl DeleteOptions {
    /// Reads a `DeleteOptions` body (which may be empty).
    ///
    /// # Errors
    /// [`ApiError::BadRequest`] for a body that is not JSON.
    pub fn from_body(body: &[u8]) -> Result<Self, ApiError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self::default());
        }
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("error decoding DeleteOptions: {e}")))?;
        let s = |p: &Value| p.as_str().map(String::from);
        Ok(Self {
            uid: s(&v["preconditions"]["uid"]),
            resource_version: s(&v["preconditions"]["resourceVersion"]),
            dry_run: v["dryRun"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x == "All")),
        })
    }
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
}

const NAMESPACE_GR: (&str, &str) = ("", "namespaces");
const CRD_GROUP: &str = "apiextensions.k8s.io";
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

/// The current time in the API's format (RFC 3339, seconds, UTC).
#[must_use]
pub fn timestamp(now: jiff::Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
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
        q.fields.check_supported(&def.field_selectors)?;
        let (revision, after) = match &q.continue_token {
            Some(token) => {
                let (rev, ns, name) = decode_continue(token)?;
                if rev < self.store.compacted() {
                    return Err(ApiError::Gone(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.".into(),
                    ));
                }
                (rev, Some((ns, name)))
            }
            None => (self.store.revision(), None),
        };
        let mut items: Vec<Arc<Value>> = self
            .store
            .list(&def.group_resource(), ns)
            .into_iter()
            .filter(|o| {
                after.as_ref().is_none_or(|(a_ns, a_name)| {
                    (str_at(o, "namespace"), str_at(o, "name")) > (a_ns.as_str(), a_name.as_str())
                })
            })
            .filter(|o| q.labels.matches(o) && q.fields.matches(o))
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
                metadata["remainingItemCount"] = json!(remaining);
            }
        }
        Ok(json!({
            "kind": def.list_kind(),
            "apiVersion": def.api_version(),
            "metadata": metadata,
            "items": items.iter().map(|o| present(def, o)).collect::<Vec<_>>(),
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
        mut body: Value,
        dry_run: bool,
        now: jiff::Timestamp,
    ) -> Result<Value, ApiError> {
        check_type(def, &body)?;
        let meta = metadata_mut(&mut body)?;
        check_namespace_field(def, meta, ns)?;
        let explicit = meta
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(String::from);
        let name = match explicit {
            Some(n) => n,
            None => match meta.get("generateName").and_then(Value::as_str) {
                Some(prefix) if !prefix.is_empty() => self.generate_name(def, ns, prefix),
                _ => {
                    return Err(ApiError::Invalid(
                        Subject::new(&def.group, &def.kind, ""),
                        vec![Cause::required(
                            "metadata.name",
                            "name or generateName is required",
                        )],
                    ));
                }
            },
        };
        if let Some(problem) = name_problem(def.name_rule, &name) {
            return Err(ApiError::Invalid(
                Subject::new(&def.group, &def.kind, &name),
                vec![Cause::invalid("metadata.name", &name, &problem)],
            ));
        }
        if def.namespaced {
            self.check_namespace_open(ns)?;
        }
        let gr = def.group_resource();
        if self.store.get(&gr, ns, &name).is_some() {
            return Err(ApiError::AlreadyExists(Subject::new(
                &def.group,
                &def.plural,
                &name,
            )));
        }
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
        self.sequence += 1;
        kinds::on_create(def, &mut body, self.sequence);
        let crd_storage = self.crd_prepare(def, &mut body, now)?;
        if dry_run {
            return Ok(present(def, &body));
        }
        let stored = self.store.put(&gr, ns, &name, body);
        if let Some(storage) = crd_storage {
            self.crd_register(&stored, &storage);
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
        mut body: Value,
        part: Part,
        dry_run: bool,
        now: jiff::Timestamp,
    ) -> Result<Value, ApiError> {
        check_type(def, &body)?;
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
            _ if def.custom => {
                return Err(ApiError::Invalid(
                    Subject::new(&def.group, &def.kind, name),
                    vec![Cause {
                        reason: "FieldValueInvalid".into(),
                        message: "Invalid value: 0x0: must be specified for an update".into(),
                        field: "metadata.resourceVersion".into(),
                    }],
                ));
            }
            _ => {}
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
                            "no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                        ),
                    )],
                ));
            }
        }
        if def.generation && spec_changed(&current, &new) {
            let generation = current["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            new["metadata"]["generation"] = json!(generation);
        }
        kinds::on_write(def, &mut new);
        let crd_storage = self.crd_prepare(def, &mut new, now)?;
        set_type(def, &mut new, &current);
        if new == *current {
            return Ok(present(def, &current));
        }
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
        let stored = self.store.put(&gr, ns, name, new);
        if let Some(storage) = crd_storage {
            self.crd_register(&stored, &storage);
        }
        Ok(present(def, &stored))
    }

    /// Patches an object (or its status).
    ///
    /// # Errors
    /// As [`Cluster::update`], plus `BadRequest` for a malformed patch and
    /// `UnsupportedMediaType` for patch types not implemented.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        kind: PatchType,
        patch_body: &[u8],
        part: Part,
        dry_run: bool,
        now: jiff::Timestamp,
    ) -> Result<Value, ApiError> {
        let current = self
            .store
            .get(&def.group_resource(), ns, name)
            .ok_or_else(|| not_found(def, name))?;
        let mut target = present(def, &current);
        patch::apply(kind, &mut target, patch_body)?;
        self.update(def, ns, name, target, part, dry_run, now)
    }

    /// Deletes an object: removed at once without finalizers, else marked
    /// with `deletionTimestamp`. Returns the object and whether it is gone.
    ///
    /// # Errors
    /// `NotFound`; `Conflict` when a precondition fails.
    pub fn delete(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
        now: jiff::Timestamp,
    ) -> Result<(Value, bool), ApiError> {
        let current = self
            .store
            .get(&def.group_resource(), ns, name)
            .ok_or_else(|| not_found(def, name))?;
        if def.group_resource() == namespaces() && PROTECTED_NAMESPACES.contains(&name) {
            return Err(ApiError::Forbidden(
                Subject::new("", "namespaces", name),
                format!("namespaces {name:?} is forbidden: this namespace may not be deleted"),
            ));
        }
        if let Some(uid) = &opts.uid {
            let actual = str_at(&current, "uid");
            if uid != actual {
                return Err(ApiError::Conflict(
                    Subject::new(&def.group, &def.plural, name),
                    format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                    ),
                ));
            }
        }
        if let Some(rv) = &opts.resource_version {
            let actual = str_at(&current, "resourceVersion");
            if rv != actual {
                return Err(ApiError::Conflict(
                    Subject::new(&def.group, &def.plural, name),
                    format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {actual}"
                    ),
                ));
            }
        }
        if opts.dry_run {
            return Ok((present(def, &current), finalizers(&current).is_empty()));
        }
        Ok(self.delete_object(def, ns, name, &current, now))
    }

    /// Deletes every object of `def` in `ns` matching `q`; returns the list
    /// of deleted (or now terminating) objects.
    ///
    /// # Errors
    /// As [`Cluster::list`].
    pub fn delete_collection(
        &mut self,
        def: &ResourceDef,
        ns: Option<&str>,
        q: &ListQuery,
        opts: &DeleteOptions,
        now: jiff::Timestamp,
    ) -> Result<Value, ApiError> {
        let mut list = self.list(def, ns, q)?;
        let mut deleted = Vec::new();
        if let Some(items) = list["items"].as_array() {
            for item in items {
                let (ns, name) = (str_at(item, "namespace"), str_at(item, "name"));
                match self.delete(def, ns, name, opts, now) {
                    Ok((obj, _)) => deleted.push(obj),
                    Err(ApiError::NotFound(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        list["items"] = Value::Array(deleted);
        Ok(list)
    }

    fn delete_object(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        current: &Value,
        now: jiff::Timestamp,
    ) -> (Value, bool) {
        self.delete_content(def, current, now);
        if finalizers(current).is_empty() && !self.has_content(def, current) {
            let gone = self.remove_object(def, ns, name, current.clone());
            return (present(def, &gone), true);
        }
        if current["metadata"].get("deletionTimestamp").is_some() {
            return (present(def, current), false);
        }
        let mut marked = current.clone();
        marked["metadata"]["deletionTimestamp"] = json!(timestamp(now));
        marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        if def.generation {
            let g = marked["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            marked["metadata"]["generation"] = json!(g);
        }
        if def.group.is_empty() && def.kind == "Namespace" {
            marked["status"]["phase"] = json!("Terminating");
        }
        let stored = self.store.put(&def.group_resource(), ns, name, marked);
        (present(def, &stored), false)
    }

    /// Objects a namespace or a CRD contains are deleted with it.
    fn delete_content(&mut self, def: &ResourceDef, object: &Value, now: jiff::Timestamp) {
        for (gr, ns) in self.content_of(def, object) {
            let Some(child_def) = self.registry.preferred(&gr) else {
                continue;
            };
            for child in self.store.list(&gr, ns.as_deref()) {
                let (cns, cname) = (str_at(&child, "namespace"), str_at(&child, "name"));
                let (cns, cname) = (cns.to_string(), cname.to_string());
                self.delete_object(&child_def, &cns, &cname, &child, now);
            }
        }
    }

    /// The (resource, namespace) sets `object` contains: a namespace holds
    /// every namespaced object in it, a CRD every object of its resource.
    fn content_of(
        &self,
        def: &ResourceDef,
        object: &Value,
    ) -> Vec<(GroupResource, Option<String>)> {
        if def.group_resource() == namespaces() {
            let ns = str_at(object, "name").to_string();
            self.store
                .resources()
                .into_iter()
                .filter(|gr| self.registry.preferred(gr).is_some_and(|d| d.namespaced))
                .map(|gr| (gr, Some(ns.clone())))
                .collect()
        } else if def.group_resource() == crds() {
            let gr = GroupResource {
                group: object["spec"]["group"].as_str().unwrap_or_default().into(),
                resource: object["spec"]["names"]["plural"]
                    .as_str()
                    .unwrap_or_default()
                    .into(),
            };
            vec![(gr, None)]
        } else {
            Vec::new()
        }
    }

    fn has_content(&self, def: &ResourceDef, object: &Value) -> bool {
        self.content_of(def, object)
            .iter()
            .any(|(gr, ns)| self.store.any(gr, ns.as_deref()))
    }

    /// Removes an object for good, then finishes a terminating namespace or
    /// CRD that it was the last content of.
    fn remove_object(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        last: Value,
    ) -> Arc<Value> {
        let gr = def.group_resource();
        let gone = self
            .store
            .remove(&gr, ns, name, last.clone())
            .unwrap_or_else(|| Arc::new(last));
        if gr == crds() {
            if let Some((g, p)) = name.split_once('.').map(|(p, g)| (g, p)) {
                self.registry.remove(&GroupResource {
                    group: g.into(),
                    resource: p.into(),
                });
            }
        } else if def.custom {
            self.finish_if_done(&crds(), "", &format!("{}.{}", gr.resource, gr.group));
        }
        if def.namespaced {
            self.finish_if_done(&namespaces(), "", ns);
        }
        gone
    }

    fn finish_if_done(&mut self, gr: &GroupResource, ns: &str, name: &str) {
        let Some(container) = self.store.get(gr, ns, name) else {
            return;
        };
        let Some(def) = self.registry.preferred(gr) else {
            return;
        };
        if container["metadata"].get("deletionTimestamp").is_some()
            && finalizers(&container).is_empty()
            && !self.has_content(&def, &container)
        {
            self.remove_object(&def, ns, name, (*container).clone());
        }
    }

    fn check_namespace_open(&self, ns: &str) -> Result<(), ApiError> {
        match self.store.get(&namespaces(), "", ns) {
            None => Err(ApiError::NotFound(Subject::new("", "namespaces", ns))),
            Some(n) if n["metadata"].get("deletionTimestamp").is_some() => {
                Err(ApiError::Forbidden(
                    Subject::new("", "namespaces", ns),
                    format!(
                        "unable to create new content in namespace {ns} because it is being terminated"
                    ),
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

    fn generate_name(&mut self, def: &ResourceDef, ns: &str, prefix: &str) -> String {
        let gr = def.group_resource();
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
pub fn present(def: &ResourceDef, object: &Value) -> Value {
    let mut o = object.clone();
    if let Some(m) = o.as_object_mut() {
        m.insert("apiVersion".into(), json!(def.api_version()));
        m.insert("kind".into(), json!(def.kind));
    }
    o
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

fn not_found(def: &ResourceDef, name: &str) -> ApiError {
    ApiError::NotFound(Subject::new(&def.group, &def.plural, name))
}

fn conflict(def: &ResourceDef, name: &str) -> ApiError {
    ApiError::Conflict(
        Subject::new(&def.group, &def.plural, name),
        "the object has been modified; please apply your changes to the latest version and try again".into(),
    )
}

/// Checks the body is an object of `def`'s kind and group/version.
fn check_type(def: &ResourceDef, body: &Value) -> Result<(), ApiError> {
    let Some(obj) = body.as_object() else {
        return Err(ApiError::BadRequest(
            "the body of the request must be a JSON object".into(),
        ));
    };
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind.is_empty() {
        return Err(ApiError::BadRequest(
            "Object 'Kind' is missing in the request body".into(),
        ));
    }
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if api_version != def.api_version() {
        return Err(ApiError::BadRequest(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            def.api_version()
        )));
    }
    if kind != def.kind {
        return Err(ApiError::BadRequest(format!(
            "the kind in the data ({kind}) does not match the expected kind ({}) of the resource {}",
            def.kind, def.plural
        )));
    }
    Ok(())
}

fn metadata_mut(body: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    let obj = body.as_object_mut().ok_or_else(|| {
        ApiError::BadRequest("the body of the request must be a JSON object".into())
    })?;
    let meta = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    meta.as_object_mut()
        .ok_or_else(|| ApiError::BadRequest("metadata must be a JSON object".into()))
}

fn check_namespace_field(
    def: &ResourceDef,
    meta: &mut Map<String, Value>,
    ns: &str,
) -> Result<(), ApiError> {
    if !def.namespaced {
        meta.remove("namespace");
        return Ok(());
    }
    match meta.get("namespace").and_then(Value::as_str) {
        Some(given) if !given.is_empty() && given != ns => Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        )),
        _ => {
            meta.insert("namespace".into(), json!(ns));
            Ok(())
        }
    }
}

fn copy_field(from: &Value, to: &mut Value, field: &str) {
    let Some(to) = to.as_object_mut() else {
        return;
    };
    match from.get(field) {
        Some(v) => to.insert(field.into(), v.clone()),
        None => to.remove(field),
    };
}

/// Whether anything but `metadata` and `status` differs.
fn spec_changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| -> Map<String, Value> {
        v.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| {
                        !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind")
                    })
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    strip(old) != strip(new)
}

fn finalizers(object: &Value) -> Vec<String> {
    object["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// A string field of `metadata`, or "".
fn str_at<'a>(object: &'a Value, field: &str) -> &'a str {
    object["metadata"][field].as_str().unwrap_or_default()
}

fn encode_continue(revision: u64, ns: &str, name: &str) -> String {
    format!("{revision}\u{0}{ns}\u{0}{name}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_continue(token: &str) -> Result<(u64, String, String), ApiError> {
    let bad = || ApiError::BadRequest(format!("invalid continue token {token:?}"));
    if !token.len().is_multiple_of(2) {
        return Err(bad());
    }
    let bytes: Vec<u8> = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(token.get(i..i + 2).unwrap_or("zz"), 16))
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let mut parts = text.split('\u{0}');
    let (Some(rev), Some(ns), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    Ok((rev.parse().map_err(|_| bad())?, ns.into(), name.into()))
}

/// Unique ids and random-looking name suffixes (splitmix64 over a seed).
#[derive(Debug)]
struct IdSource(u64);

impl IdSource {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn uid(&mut self) -> String {
        let (a, b) = (self.next(), self.next());
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | (b >> 48) & 0x3fff,
            b & 0xffff_ffff_ffff
        )
    }

    fn suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut n = self.next();
        (0..5)
            .map(|_| {
                let c = ALPHABET[(n % ALPHABET.len() as u64) as usize];
                n /= ALPHABET.len() as u64;
                char::from(c)
            })
            .collect()
    }
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
    fn finalizers_delay_removal() {
        let mut c = cluster();
        let d = def(&c, "", "configmaps");
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "finalizers": ["x/y"]}});
        c.create(&d, "default", body, false, now()).unwrap();
        let (o, gone) = c
            .delete(&d, "default", "a", &DeleteOptions::default(), now())
            .unwrap();
        assert!(!gone);
        assert!(o["metadata"]["deletionTimestamp"].is_string());
        let mut added = o.clone();
        added["metadata"]["finalizers"] = json!(["x/y", "new"]);
        let e = c
            .update(&d, "default", "a", added, Part::Main, false, now())
            .unwrap_err();
        assert_eq!(e.reason(), "Invalid");
        let mut cleared = o.clone();
        cleared["metadata"]["finalizers"] = json!([]);
        c.update(&d, "default", "a", cleared, Part::Main, false, now())
            .unwrap();
        assert_eq!(c.get(&d, "default", "a").unwrap_err().reason(), "NotFound");
    }

    #[test]
    fn namespace_deletion_takes_content() {
        let mut c = cluster();
        let ns = def(&c, "", "namespaces");
        let cm = def(&c, "", "configmaps");
        c.create(
            &ns,
            "",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t"}}),
            false,
            now(),
        )
        .unwrap();
        c.create(&cm, "t", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "finalizers": ["f"]}}), false, now()).unwrap();
        let (o, gone) = c
            .delete(&ns, "", "t", &DeleteOptions::default(), now())
            .unwrap();
        assert!(!gone);
        assert_eq!(o["status"]["phase"], "Terminating");
        let e = c
            .create(
                &cm,
                "t",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}),
                false,
                now(),
            )
            .unwrap_err();
        assert_eq!(e.reason(), "Forbidden");
        let mut a = c.get(&cm, "t", "a").unwrap();
        a["metadata"]["finalizers"] = json!(null);
        c.update(&cm, "t", "a", a, Part::Main, false, now())
            .unwrap();
        assert!(
            c.get(&ns, "", "t").is_err(),
            "namespace goes with its last object"
        );
    }

    #[test]
    fn system_namespaces_cannot_be_deleted() {
        let mut c = cluster();
        let ns = def(&c, "", "namespaces");
        for name in PROTECTED_NAMESPACES {
            let e = c
                .delete(&ns, "", name, &DeleteOptions::default(), now())
                .unwrap_err();
            assert_eq!(e.reason(), "Forbidden");
            assert_eq!(e.code().as_u16(), 403);
        }
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

    #[test]
    fn continue_token_round_trips() {
        let t = encode_continue(42, "ns", "a.b");
        assert_eq!(
            decode_continue(&t).unwrap(),
            (42, "ns".into(), "a.b".into())
        );
    }
}
