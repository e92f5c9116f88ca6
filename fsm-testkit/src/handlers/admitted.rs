//! Validating admission webhooks in a write's path: whether any is
//! configured, and the call of those matching the write with the object
//! its dry run produced ([`crate::webhooks::admission`]).

use serde_json::{Value, json};

use super::request::ObjectRequest;
use crate::cluster::Part;
use crate::status::ApiError;
use crate::webhooks::admission::{self, Attributes};

impl ObjectRequest<'_> {
    /// Whether a write here has to ask validating webhooks (any configured).
    pub(super) fn admission_configured(&self) -> bool {
        admission::any_configured(&self.shared.cluster().store)
    }

    /// Calls the validating webhooks matching this write (`operation`:
    /// `CREATE`, `UPDATE`, `DELETE`) of `object` replacing `old` (both as
    /// stored; presented at the version requested), as 1.20 does after
    /// the write's defaults and validation and before it is stored.
    ///
    /// # Errors
    /// The first denial or failed call ([`admission::validate`]).
    pub(super) async fn admit(
        &self,
        operation: &'static str,
        object: Option<Value>,
        old: Option<Value>,
    ) -> Result<(), ApiError> {
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
        attrs.old_object = old;
        let hooks = {
            let cluster = self.shared.cluster();
            let user = crate::self_reviews::requester(&cluster.store, &self.parts.headers);
            attrs.user_info = json!({"username": user.name, "groups": user.groups});
            admission::matching(&cluster.store, &attrs)
        };
        if hooks.is_empty() {
            return Ok(());
        }
        if let Some(o) = attrs.object.take() {
            attrs.object = Some(self.served(o).await?);
        }
        if let Some(o) = attrs.old_object.take() {
            attrs.old_object = Some(self.served(o).await?);
        }
        admission::validate(&hooks, &attrs).await
    }
}
