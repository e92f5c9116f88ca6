//! The admission chain: the one write path. Every create, update, patch
//! and server-side apply (the last two end in a create or an update) runs
//! the same ordered steps of [`CHAIN`], each a function with one job; a
//! step that does not concern a write (a create has no stored object to
//! compare with, an update no name to generate) lets it through.
//!
//! The order is the order in which the real server's checks answer: a
//! request that breaks two rules gets the error of the first step that
//! refuses it, as from kube-apiserver 1.20.

use std::sync::Arc;

use serde_json::{Value, json};

use super::meta::{
    check_namespace_field, check_type, copy_field, finalizers, metadata_mut, name_mismatch,
    normalize_integers, set_type, spec_changed, str_at,
};
use super::metadata_rules::{drop_unknown_metadata, metadata_causes};
use super::ownership::{ownership_scope, record_ownership};
use super::{Cluster, Ownership, Part, conflict, namespaces, not_found, present};
use crate::builtins::{KindRules, Written, rules_of};
use crate::kinds::drop_empty;
use crate::resources::ResourceDef;
use crate::status::{ApiError, Cause, Subject};
use crate::time::timestamp;
use crate::validation::{generate_name_problems, name_problems};

/// The bytes of a `generateName` the real server keeps.
const MAX_GENERATED_PREFIX: usize = 58;

/// What a write writes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Target<'a> {
    /// A new object, named by its body. `post`: the body came in a POST,
    /// whose `metadata.resourceVersion` the real storage refuses.
    New {
        /// Whether the write is a POST.
        post: bool,
    },
    /// The stored object named `name` (or its `part`).
    Existing {
        /// The name on the URL.
        name: &'a str,
        /// The object or its status.
        part: Part,
    },
}

/// One write of an object of `def` in `ns` (`""` for cluster-scoped).
pub(super) struct Write<'a> {
    /// The resource written.
    pub(super) def: &'a ResourceDef,
    /// The namespace on the URL.
    pub(super) ns: &'a str,
    /// A create or an update.
    pub(super) target: Target<'a>,
    /// `dryRun: ["All"]`: every step but storing.
    pub(super) dry_run: bool,
    /// The time of the write.
    pub(super) now: jiff::Timestamp,
    /// Who owns the fields written.
    pub(super) owner: &'a Ownership<'a>,
}

/// Whether the chain goes on, or has the answer of the write.
enum Flow {
    Next,
    Answer(Value),
}

/// A step of the chain.
type Step = fn(&mut Admission<'_, '_>) -> Result<Flow, ApiError>;

/// The steps every write runs, in order, before [`store`].
const CHAIN: &[Step] = &[
    // The body as sent: its type, decoded as the real server decodes it.
    check_body_type,
    decode_typed,
    convert_to_storage,
    check_decoded,
    normalize_numbers,
    // Its metadata.
    check_url_name,
    check_namespace,
    drop_unknown_fields_of_metadata,
    // Which object: a new one's name, or the stored one and its preconditions.
    read_new_name,
    admit_namespace,
    resolve_name,
    load_current,
    check_preconditions,
    merge_with_current,
    check_new_finalizers,
    bump_generation,
    // Validation and defaults.
    validate_metadata,
    init_new_metadata,
    validate_as_written,
    apply_defaults,
    validate_defaulted,
    enforce_custom_schema,
    record_field_ownership,
    prepare_crd,
    keep_stored_type,
    answer_unchanged,
    check_data_size,
    // Storage.
    refuse_resource_version,
    check_name_free,
    stop_at_dry_run,
    finish_deletion,
];

impl Cluster {
    /// Runs `body` through the admission chain as `write` says, and
    /// answers the written object as `write.def` presents it.
    ///
    /// # Errors
    /// The error of the first step that refuses the write.
    pub(super) fn admit(&mut self, write: &Write<'_>, body: Value) -> Result<Value, ApiError> {
        let name = match write.target {
            Target::New { .. } => String::new(),
            Target::Existing { name, .. } => name.to_string(),
        };
        let mut admission = Admission {
            cluster: self,
            write,
            rules: rules_of(write.def),
            object: body,
            name,
            generate_prefix: None,
            sent_resource_version: false,
            current: None,
            crd_storage: None,
        };
        for step in CHAIN {
            if let Flow::Answer(answer) = step(&mut admission)? {
                return Ok(answer);
            }
        }
        store(&mut admission)
    }

    /// A name from `prefix` that no object of `def` in `ns` has: the real
    /// server keeps 58 bytes of the prefix (63 with the suffix).
    pub(super) fn generate_name(&mut self, def: &ResourceDef, ns: &str, prefix: &str) -> String {
        let gr = def.group_resource();
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

/// A write on its way through the chain.
struct Admission<'c, 'w> {
    cluster: &'c mut Cluster,
    write: &'w Write<'w>,
    /// The rules of the kind written.
    rules: &'static KindRules,
    /// The object as it will be stored.
    object: Value,
    /// The object's name: the URL's, or (a create) the body's, generated
    /// if need be.
    name: String,
    /// A create's non-empty `generateName`.
    generate_prefix: Option<String>,
    /// Whether a create's body carried a `metadata.resourceVersion`.
    sent_resource_version: bool,
    /// The stored object an update replaces.
    current: Option<Arc<Value>>,
    /// A CRD's storage version, to register once it is stored.
    crd_storage: Option<String>,
}

impl Admission<'_, '_> {
    fn def(&self) -> &ResourceDef {
        self.write.def
    }

    fn is_create(&self) -> bool {
        matches!(self.write.target, Target::New { .. })
    }

    fn part(&self) -> Part {
        match self.write.target {
            Target::New { .. } => Part::Main,
            Target::Existing { part, .. } => part,
        }
    }

    fn metadata(&mut self) -> Result<&mut serde_json::Map<String, Value>, ApiError> {
        metadata_mut(&mut self.object)
    }

    /// The object as the kind's validation sees it.
    fn written(&self) -> Written<'_> {
        Written {
            def: self.write.def,
            ns: self.write.ns,
            name: &self.name,
            object: &self.object,
            old: self.current.as_deref(),
        }
    }

    fn invalid(&self, causes: Vec<Cause>) -> ApiError {
        let def = self.def();
        ApiError::Invalid(Subject::new(&def.group, &def.kind, &self.name), causes)
    }
}

/// 400 for a body of another kind or group/version.
fn check_body_type(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    check_type(a.def(), &a.object)?;
    Ok(Flow::Next)
}

/// A built-in kind decoded against its type: 400 for a wrong JSON type,
/// unknown fields dropped.
fn decode_typed(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    crate::typed::decode(a.write.def, &mut a.object)?;
    Ok(Flow::Next)
}

/// The kind's stored form (Events of either API are stored as core Events).
fn convert_to_storage(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if let Some(to_storage) = a.rules.to_storage {
        a.object = to_storage(a.write.def, std::mem::take(&mut a.object))?;
    }
    Ok(Flow::Next)
}

/// What the kind's decoder refuses (a Lease's times): 400.
fn check_decoded(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if let Some(check) = a.rules.check_decoded {
        check(a.write.def, &a.object)?;
    }
    Ok(Flow::Next)
}

/// A custom resource's integral numbers are written as integers.
fn normalize_numbers(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if a.def().custom {
        normalize_integers(&mut a.object);
    }
    Ok(Flow::Next)
}

/// An update's body may not name another object than the URL.
fn check_url_name(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let Target::Existing { name, .. } = a.write.target else {
        return Ok(Flow::Next);
    };
    match a.metadata()?.get("name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() && n != name => Err(name_mismatch(n, name)),
        _ => Ok(Flow::Next),
    }
}

/// The body's namespace must be the URL's (a cluster-scoped object has none).
fn check_namespace(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let (def, ns) = (a.write.def, a.write.ns);
    check_namespace_field(def, a.metadata()?, ns)?;
    Ok(Flow::Next)
}

/// Metadata fields `ObjectMeta` does not have are dropped.
fn drop_unknown_fields_of_metadata(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    drop_unknown_metadata(a.metadata()?);
    Ok(Flow::Next)
}

/// A create's `name` and `generateName`, as the body gives them.
fn read_new_name(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if !a.is_create() {
        return Ok(Flow::Next);
    }
    let meta = a.metadata()?;
    let given = |key: &str| {
        meta.get(key)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(String::from)
    };
    let (name, prefix) = (given("name"), given("generateName"));
    a.name = name.unwrap_or_default();
    a.generate_prefix = prefix;
    Ok(Flow::Next)
}

/// The namespace lifecycle admission of a create: the namespace must exist
/// and not be terminating. It comes before the name is generated and
/// validated.
fn admit_namespace(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if !a.is_create() || !a.def().namespaced {
        return Ok(Flow::Next);
    }
    let named = if a.name.is_empty() {
        a.generate_prefix.as_deref().unwrap_or("")
    } else {
        a.name.as_str()
    };
    let (def, ns) = (a.write.def, a.write.ns);
    match a.cluster.store.get(&namespaces(), "", ns) {
        None => Err(ApiError::NotFound(Subject::new("", "namespaces", ns))),
        Some(n) if n["metadata"].get("deletionTimestamp").is_some() => {
            Err(ApiError::ForbiddenBecause(
                Subject::new(&def.group, &def.plural, named),
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
        Some(_) => Ok(Flow::Next),
    }
}

/// A create's name: the body's, else one generated from `generateName`;
/// neither is `Invalid`.
fn resolve_name(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if !a.is_create() || !a.name.is_empty() {
        return Ok(Flow::Next);
    }
    let Some(prefix) = a.generate_prefix.clone() else {
        return Err(a.invalid(vec![Cause::required(
            "metadata.name",
            "name or generateName is required",
        )]));
    };
    a.name = a.cluster.generate_name(a.write.def, a.write.ns, &prefix);
    Ok(Flow::Next)
}

/// The stored object an update replaces (`NotFound` without one).
fn load_current(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if a.is_create() {
        return Ok(Flow::Next);
    }
    let def = a.write.def;
    let current = a
        .cluster
        .store
        .get(&def.group_resource(), a.write.ns, &a.name)
        .ok_or_else(|| not_found(def, &a.name))?;
    a.current = Some(current);
    Ok(Flow::Next)
}

/// An update's preconditions: the body's resourceVersion must be the
/// stored one (and be given, for kinds without unconditional updates), and
/// its uid, if any, the stored one's.
fn check_preconditions(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let Some(current) = a.current.clone() else {
        return Ok(Flow::Next);
    };
    let (def, name, part) = (a.write.def, a.name.clone(), a.part());
    let unconditional = a.rules.unconditional_update;
    let meta = a.metadata()?;
    match meta.get("resourceVersion").and_then(Value::as_str) {
        Some(rv) if !rv.is_empty() && rv != str_at(&current, "resourceVersion") => {
            return Err(conflict(def, &name));
        }
        Some(rv) if !rv.is_empty() => {}
        _ if !unconditional => {
            // The real store names the resource, not the kind, here.
            return Err(ApiError::Invalid(
                Subject::new(&def.group, &def.plural, &name),
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
        return Err(a.invalid(vec![cause.clone(), cause]));
    }
    Ok(Flow::Next)
}

/// An update's new object: the body with the stored status (when status is
/// a subresource), or the stored object with the body's status (a write of
/// the subresource); the metadata the server owns is the stored one's.
fn merge_with_current(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let Some(current) = a.current.clone() else {
        return Ok(Flow::Next);
    };
    let mut new = match a.part() {
        Part::Main => {
            let mut body = std::mem::take(&mut a.object);
            if a.def().status_subresource {
                copy_field(&current, &mut body, "status");
            }
            body
        }
        Part::Status => {
            let mut n = (*current).clone();
            copy_field(&a.object, &mut n, "status");
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
    a.object = new;
    Ok(Flow::Next)
}

/// An object being deleted takes no new finalizers.
fn check_new_finalizers(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let Some(current) = a.current.clone() else {
        return Ok(Flow::Next);
    };
    if current["metadata"].get("deletionTimestamp").is_none() {
        return Ok(Flow::Next);
    }
    let old = finalizers(&current);
    let added: Vec<String> = finalizers(&a.object)
        .into_iter()
        .filter(|f| !old.contains(f))
        .collect();
    if added.is_empty() {
        return Ok(Flow::Next);
    }
    let listed: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
    Err(a.invalid(vec![Cause::forbidden(
        "metadata.finalizers",
        &format!(
            "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
            listed.join(", ")
        ),
    )]))
}

/// A change outside metadata (and status, when it is a subresource) bumps
/// `generation`, for kinds that keep one.
fn bump_generation(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let Some(current) = a.current.clone() else {
        return Ok(Flow::Next);
    };
    let def = a.write.def;
    if def.generation && spec_changed(&current, &a.object, def.status_subresource) {
        let generation = current["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
        a.object["metadata"]["generation"] = json!(generation);
    }
    Ok(Flow::Next)
}

/// `Invalid` with every cause found in a create's name and `generateName`,
/// the metadata, and the kind's fields checked with them (a Lease's spec).
fn validate_metadata(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let def = a.write.def;
    let mut causes = Vec::new();
    if a.is_create() {
        if let Some(prefix) = &a.generate_prefix {
            for problem in generate_name_problems(def.name_rule, prefix) {
                causes.push(Cause::invalid("metadata.generateName", prefix, &problem));
            }
        }
        for problem in name_problems(def.name_rule, &a.name) {
            causes.push(Cause::invalid("metadata.name", &a.name, &problem));
        }
    }
    if let Some(meta) = a.object.get("metadata").and_then(Value::as_object) {
        causes.extend(metadata_causes(def, meta));
    }
    if let Some(field_causes) = a.rules.field_causes {
        causes.extend(field_causes(def, &a.object));
    }
    if causes.is_empty() {
        Ok(Flow::Next)
    } else {
        Err(a.invalid(causes))
    }
}

/// A new object's metadata: its name, a uid, the creation time, the
/// first generation; what the server owns dropped, and status when it is
/// a subresource.
fn init_new_metadata(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if !a.is_create() {
        return Ok(Flow::Next);
    }
    let (def, now) = (a.write.def, a.write.now);
    let (name, uid) = (a.name.clone(), a.cluster.ids.uid());
    let meta = a.metadata()?;
    let sent_resource_version = meta
        .get("resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|rv| !rv.is_empty());
    meta.insert("name".into(), json!(name));
    meta.insert("uid".into(), json!(uid));
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
    a.sent_resource_version = sent_resource_version;
    if def.status_subresource
        && let Some(o) = a.object.as_object_mut()
    {
        o.remove("status");
    }
    Ok(Flow::Next)
}

/// The kind's validation of the object as written, before its defaults
/// (Events).
fn validate_as_written(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if let Some(validate) = a.rules.validate_written {
        validate(&a.written())?;
    }
    Ok(Flow::Next)
}

/// The kind's defaults: those of a new object (initial status, a
/// Service's cluster IP, from the count of creates), then those of every
/// write.
fn apply_defaults(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if a.is_create() {
        a.cluster.sequence += 1;
        if let Some(on_create) = a.rules.on_create {
            on_create(&mut a.object, a.cluster.sequence);
        }
    }
    if let Some(on_write) = a.rules.on_write {
        on_write(a.write.def, &mut a.object);
    }
    drop_empty(a.write.def, &mut a.object);
    Ok(Flow::Next)
}

/// The kind's validation of the defaulted object (the RBAC kinds).
fn validate_defaulted(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if let Some(validate) = a.rules.validate {
        validate(&a.written())?;
    }
    Ok(Flow::Next)
}

/// A custom resource is pruned and validated by its CRD's schema.
fn enforce_custom_schema(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    crate::schema::enforce(&a.cluster.store, a.write.def, &mut a.object)?;
    Ok(Flow::Next)
}

/// `metadata.managedFields`, as the write's owner says.
fn record_field_ownership(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let w = a.write;
    let schema = a.cluster.crd_schema(w.def);
    let scope = ownership_scope(w.def, a.part(), schema.as_ref());
    let created = json!({});
    let old = a.current.as_deref().unwrap_or(&created);
    record_ownership(w.def, old, &mut a.object, scope, w.owner, w.now);
    Ok(Flow::Next)
}

/// A CRD's defaults and status, and its storage version.
fn prepare_crd(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    a.crd_storage = a
        .cluster
        .crd_prepare(a.write.def, &mut a.object, a.write.now)?;
    Ok(Flow::Next)
}

/// An update keeps the apiVersion the object was stored with.
fn keep_stored_type(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if let Some(current) = &a.current {
        set_type(a.write.def, &mut a.object, current);
    }
    Ok(Flow::Next)
}

/// An update that changes nothing writes nothing.
fn answer_unchanged(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    match &a.current {
        Some(current) if a.object == **current => Ok(Flow::Answer(present(a.write.def, current))),
        _ => Ok(Flow::Next),
    }
}

/// The kind's size limit (a ConfigMap's or Secret's data: 1 MiB).
fn check_data_size(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if let Some(check) = a.rules.check_size {
        check(a.write.def, &a.name, &a.object)?;
    }
    Ok(Flow::Next)
}

/// A POST's body may not carry a resourceVersion (the storage's 500; a dry
/// run does not reach storage).
fn refuse_resource_version(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if matches!(a.write.target, Target::New { post: true })
        && a.sent_resource_version
        && !a.write.dry_run
    {
        return Err(ApiError::Storage(
            "resourceVersion should not be set on objects to be created".into(),
        ));
    }
    Ok(Flow::Next)
}

/// A create's name must be free (`AlreadyExists`).
fn check_name_free(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let w = a.write;
    if a.is_create()
        && a.cluster
            .store
            .get(&w.def.group_resource(), w.ns, &a.name)
            .is_some()
    {
        return Err(ApiError::AlreadyExists(Subject::new(
            &w.def.group,
            &w.def.plural,
            &a.name,
        )));
    }
    Ok(Flow::Next)
}

/// A dry run answers what would be stored.
fn stop_at_dry_run(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if a.write.dry_run {
        return Ok(Flow::Answer(present(a.write.def, &a.object)));
    }
    Ok(Flow::Next)
}

/// An update that removes the last finalizer of an object being deleted
/// (with nothing left in it) removes the object.
fn finish_deletion(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let Some(current) = &a.current else {
        return Ok(Flow::Next);
    };
    let def = a.write.def;
    if current["metadata"].get("deletionTimestamp").is_some()
        && finalizers(&a.object).is_empty()
        && !a.cluster.has_content(def, &a.object)
    {
        let object = std::mem::take(&mut a.object);
        let gone = a.cluster.remove_object(def, a.write.ns, &a.name, object);
        return Ok(Flow::Answer(present(def, &gone)));
    }
    Ok(Flow::Next)
}

/// Stores the object (if the storage takes its size), then what storing
/// it starts: the resources a CRD serves, a ServiceAccount's token.
fn store(a: &mut Admission<'_, '_>) -> Result<Value, ApiError> {
    let w = a.write;
    let gr = w.def.group_resource();
    crate::limits::check_storable(&gr, w.ns, &a.name, &a.object)?;
    let object = std::mem::take(&mut a.object);
    let stored = a.cluster.store.put(&gr, w.ns, &a.name, object);
    if let Some(storage) = &a.crd_storage {
        a.cluster.crd_register(&stored, storage);
    }
    if super::tokens::is_service_account(w.def) {
        a.cluster.ensure_token(&stored, w.now);
    }
    Ok(present(w.def, &stored))
}
