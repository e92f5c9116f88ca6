//! The write verbs: create (and POST), update, and replace (PUT). Each
//! runs the admission chain ([`super::admission`]) with what it writes.

use serde_json::{Value, json};

use super::admission::{Target, Write};
use super::meta::{metadata_mut, name_mismatch, str_at};
use super::{Cluster, Ownership, Part};
use crate::builtins::rules_of;
use crate::resources::ResourceDef;
use crate::status::{ApiError, Subject};

impl Cluster {
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
        let target = Target::New { post: false };
        self.admit(
            &Write {
                def,
                ns,
                target,
                dry_run,
                now,
                owner,
            },
            body,
        )
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
        let target = Target::New { post: true };
        self.admit(
            &Write {
                def,
                ns,
                target,
                dry_run,
                now,
                owner,
            },
            body,
        )
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
        body: Value,
        part: Part,
        dry_run: bool,
        now: jiff::Timestamp,
        owner: &Ownership<'_>,
    ) -> Result<Value, ApiError> {
        let target = Target::Existing { name, part };
        self.admit(
            &Write {
                def,
                ns,
                target,
                dry_run,
                now,
                owner,
            },
            body,
        )
    }

    /// A PUT: [`Cluster::update_as`], or, for an absent object of a kind
    /// the real server creates on update (its rules' `creates_on_update`),
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
        if !(absent && part == Part::Main && rules_of(def).creates_on_update) {
            return self
                .update_as(def, ns, name, body, part, dry_run, now, owner)
                .map(|o| (o, false));
        }
        let meta = metadata_mut(&mut body)?;
        match meta.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() && n != name => return Err(name_mismatch(n, name)),
            _ => {
                meta.insert("name".into(), json!(name));
            }
        }
        self.create_as(def, ns, body, dry_run, now, owner)
            .map(|o| (o, true))
    }
}

/// The etcd key of an object on the real server, as its storage errors
/// name it: `/registry/<resource>/…` for built-in kinds (their rules'
/// `etcd_resource`, else the plural), `/registry/<group>/<resource>/…` for
/// custom resources.
fn storage_key(def: &ResourceDef, ns: &str, name: &str) -> String {
    let resource = match rules_of(def).etcd_resource {
        _ if def.custom => format!("{}/{}", def.group, def.plural),
        Some(resource) => resource.to_string(),
        None => def.plural.clone(),
    };
    if ns.is_empty() {
        format!("/registry/{resource}/{name}")
    } else {
        format!("/registry/{resource}/{ns}/{name}")
    }
}
