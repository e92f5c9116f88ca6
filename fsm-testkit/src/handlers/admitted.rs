//! Admission webhooks in a write's path: whether any is configured, and
//! the call of those matching the write with the object its dry run
//! produced ([`crate::webhooks::admission`]).

use serde_json::{Value, json};

use super::request::ObjectRequest;
use crate::cluster::Part;
use crate::status::ApiError;
use crate::webhooks::admission::{self, Attributes, Hook, Phase};

impl ObjectRequest<'_> {
    /// Whether a write here has to ask admission webhooks (any configured).
    pub(super) fn admission_configured(&self) -> bool {
        admission::any_configured(&self.shared.cluster().store)
    }

    /// Calls the admission webhooks matching this write (`operation`:
    /// `CREATE`, `UPDATE`, `DELETE`) of `object` replacing `old` (both as
    /// stored; presented at the version requested), as 1.20 does after the
    /// write's defaults and validation and before it is stored: the
    /// mutating ones first, one after another; if they changed the object,
    /// `dry_run` writes it again (defaults and validation of the mutated
    /// object); then the validating ones. Answers the body to write
    /// instead of the request's when the object was mutated.
    ///
    /// # Errors
    /// The first denial or failed call ([`admission::mutate`],
    /// [`admission::validate`]), or the mutated object's refusal.
    pub(super) async fn admit(
        &self,
        operation: &'static str,
        object: Option<Value>,
        old: Option<Value>,
        dry_run: &(dyn Fn(Value) -> Result<Value, ApiError> + Sync),
    ) -> Result<Option<Value>, ApiError> {
        let subresource = match self.part {
            Part::Status => "status",
            Part::Main if self.scale => "scale",
            Part::Main => "",
        };
        let mut attrs = Attributes::of(&self.def, operation, subresource);
        let named = object.as_ref().or(old.as_ref());
        attrs.name = named
            .and_then(|o| o["metadata"]["name"].as_str())
            .unwrap_or(self.name())
            .to_string();
        attrs.namespace = self.ns().to_string();
        attrs.dry_run = self.dry_run;
        if let Some(manager) = self
            .query
            .get("fieldManager")
            .filter(|_| operation != "DELETE")
        {
            attrs.options["fieldManager"] = json!(manager);
        }
        if self.dry_run {
            attrs.options["dryRun"] = json!(["All"]);
        }
        attrs.object = object;
        attrs.equivalent_versions = self.other_served_versions();
        let old_rv = old
            .as_ref()
            .map(|o| o["metadata"]["resourceVersion"].clone());
        attrs.old_object = old;
        let mutating = {
            let cluster = self.shared.cluster();
            let user = crate::self_reviews::requester(&cluster.store, &self.parts.headers);
            attrs.user_info = json!({"username": user.name, "groups": user.groups});
            admission::matching(&cluster.store, &attrs, Phase::Mutating)
        };
        if let Some(o) = attrs.object.take() {
            attrs.object = Some(self.served(o).await?);
        }
        if let Some(o) = attrs.old_object.take() {
            attrs.old_object = Some(self.served(o).await?);
        }
        let mut body = None;
        let mut changed = false;
        for hook in &mutating {
            let one = std::slice::from_ref(hook);
            match &hook.version {
                None => changed |= admission::mutate(one, &mut attrs).await?,
                Some(version) => {
                    let mut at = self.attributes_at(&attrs, version).await?;
                    if admission::mutate(one, &mut at).await?
                        && let Some(o) = at.object
                    {
                        attrs.object = Some(self.at_version(o, &attrs.version).await?);
                        changed = true;
                    }
                }
            }
        }
        if changed {
            let mut mutated = attrs.object.clone().unwrap_or_default();
            as_body(&mut mutated, operation, old_rv);
            let stored = self.to_storage(mutated).await?;
            let again = dry_run(stored.clone())?;
            attrs.object = Some(self.served(again).await?);
            body = Some(stored);
        }
        let validating =
            admission::matching(&self.shared.cluster().store, &attrs, Phase::Validating);
        let mut versions: Vec<Option<String>> =
            validating.iter().map(|h| h.version.clone()).collect();
        versions.dedup();
        for version in versions {
            let hooks: Vec<Hook> = validating
                .iter()
                .filter(|h| h.version == version)
                .cloned()
                .collect();
            match &version {
                None => admission::validate(&hooks, &attrs).await?,
                Some(v) => {
                    let at = self.attributes_at(&attrs, v).await?;
                    admission::validate(&hooks, &at).await?;
                }
            }
        }
        Ok(body)
    }

    /// `attrs` as sent to a webhook whose rule matched `version`: the
    /// objects converted to it.
    async fn attributes_at(
        &self,
        attrs: &Attributes,
        version: &str,
    ) -> Result<Attributes, ApiError> {
        let mut at = attrs.clone();
        at.version = version.to_string();
        if let Some(o) = at.object.take() {
            at.object = Some(self.at_version(o, version).await?);
        }
        if let Some(o) = at.old_object.take() {
            at.old_object = Some(self.at_version(o, version).await?);
        }
        Ok(at)
    }
}

/// A mutated object as the body of the write that stores it: what the
/// server sets left out (a create's uid, times, version, generation; the
/// managed fields, computed again), an update at the version read.
fn as_body(object: &mut Value, operation: &str, old_rv: Option<Value>) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    meta.remove("managedFields");
    meta.remove("generation");
    if operation == "CREATE" {
        for field in ["uid", "creationTimestamp", "resourceVersion"] {
            meta.remove(field);
        }
    } else if let Some(rv) = old_rv.filter(Value::is_string) {
        meta.insert("resourceVersion".into(), rv);
    }
}
