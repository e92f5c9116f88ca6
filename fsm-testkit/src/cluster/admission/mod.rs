//! The admission chain: the one write path. Every create, update, patch
//! and server-side apply (the last two end in a create or an update) runs
//! the same ordered steps of [`CHAIN`], each a function with one job; a
//! step that does not concern a write (a create has no stored object to
//! compare with, an update no name to generate) lets it through.
//!
//! The order is the order in which the real server's checks answer: a
//! request that breaks two rules gets the error of the first step that
//! refuses it, as from kube-apiserver 1.20.
//!
//! The steps, by what they look at: `body` (the body as sent and its
//! metadata), `identity` (which object: a new one's name, or the stored
//! one and the update's preconditions), `rules` (validation and defaults,
//! the kind's from its entry in the kinds' table), `storage`.

mod body;
mod identity;
mod rules;
mod storage;

use std::sync::Arc;

use serde_json::Value;

use super::meta::metadata_mut;
use super::{Cluster, Ownership, Part};
use crate::builtins::{KindRules, Written, rules_of};
use crate::resources::ResourceDef;
use crate::status::{ApiError, Cause, Subject};

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

/// The steps every write runs, in order, before [`storage::store`].
const CHAIN: &[Step] = &[
    // The body as sent: its type, decoded as the real server decodes it.
    body::check_body_type,
    body::decode_typed,
    body::decode_custom_metadata,
    body::convert_to_storage,
    body::check_decoded,
    body::normalize_numbers,
    // Its metadata.
    body::check_url_name,
    body::check_namespace,
    body::drop_unknown_fields_of_metadata,
    // Which object: a new one's name, or the stored one and its preconditions.
    identity::read_new_name,
    identity::admit_namespace,
    identity::resolve_name,
    identity::load_current,
    identity::check_preconditions,
    identity::merge_with_current,
    identity::check_new_finalizers,
    // Validation and defaults.
    rules::validate_metadata,
    rules::validate_status,
    rules::init_new_metadata,
    rules::validate_as_written,
    rules::apply_defaults,
    // After the defaults: a write that sends only what they add changes
    // nothing (the real server defaults the body as it decodes it).
    identity::bump_generation,
    rules::check_immutable_fields,
    rules::validate_defaulted,
    rules::enforce_custom_schema,
    rules::validate_scale_fields,
    rules::record_field_ownership,
    rules::prepare_crd,
    rules::keep_stored_type,
    rules::answer_unchanged,
    rules::check_data_size,
    // Storage.
    storage::refuse_resource_version,
    storage::check_name_free,
    storage::stop_at_dry_run,
    storage::finish_deletion,
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
        storage::store(&mut admission)
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
    /// Whether the body carried a `metadata.resourceVersion` (a create's,
    /// or an update's before it is merged with the stored object).
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::PatchOptions;
    use super::*;
    use crate::patch::PatchType;

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000).unwrap()
    }

    /// A Lease's spec is checked by a step of the chain (the kind's field
    /// causes): a create, an update, a patch and an apply all meet it.
    #[test]
    fn every_write_verb_runs_the_chain() {
        let mut c = Cluster::new(100, 16, 7);
        let leases = c
            .registry
            .get("coordination.k8s.io", "v1", "leases")
            .unwrap();
        let lease = |seconds: i64| {
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": seconds}})
        };
        let invalid = |r: Result<Value, ApiError>| r.unwrap_err().reason().to_string();
        assert_eq!(
            invalid(c.create(&leases, "default", lease(0), false, now())),
            "Invalid"
        );
        let created = c
            .create(&leases, "default", lease(15), false, now())
            .unwrap();
        let mut update = created.clone();
        update["spec"]["leaseDurationSeconds"] = json!(0);
        let updated = c.update(&leases, "default", "l", update, Part::Main, false, now());
        assert_eq!(invalid(updated), "Invalid");
        let opts = PatchOptions {
            field_manager: Some("test".into()),
            force: false,
        };
        let patch = br#"{"spec": {"leaseDurationSeconds": 0}}"#;
        for kind in [PatchType::Merge, PatchType::Apply] {
            let body: &[u8] = if kind == PatchType::Apply {
                br#"{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": {"leaseDurationSeconds": 0}}"#
            } else {
                patch
            };
            let patched = c
                .patch(
                    &leases,
                    "default",
                    "l",
                    kind,
                    body,
                    Part::Main,
                    &opts,
                    false,
                    now(),
                )
                .map(|(o, _)| o);
            assert_eq!(invalid(patched), "Invalid", "{kind:?}");
        }
        let stored = c.get(&leases, "default", "l").unwrap();
        assert_eq!(stored["spec"]["leaseDurationSeconds"], 15);
    }

    /// A request that breaks two rules gets the error of the first step:
    /// a name that does not match the URL before a stale resourceVersion.
    #[test]
    fn the_first_step_that_refuses_answers() {
        let mut c = Cluster::new(100, 16, 7);
        let cms = c.registry.get("", "v1", "configmaps").unwrap();
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        c.create(&cms, "default", cm, false, now()).unwrap();
        let both = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "b", "resourceVersion": "1"}});
        let e = c
            .update(&cms, "default", "a", both, Part::Main, false, now())
            .unwrap_err();
        assert_eq!(e.reason(), "BadRequest", "{e}");
    }
}
