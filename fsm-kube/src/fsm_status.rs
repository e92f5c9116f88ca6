//! `FsmStatus`: the machine's record as it sits in the custom resource's
//! status, kept opaque so that a corrupt record never stops the object from
//! being read.

use std::borrow::Cow;

use fsm_core::{DecodeError, Fsm, RawRecord, StateRecord};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The machine's record in `.status.fsm`.
///
/// Put it in your status struct so that your CRD declares it (and the API
/// server keeps it through pruning):
///
/// ```
/// use fsm_kube::FsmStatus;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
/// pub struct DatabaseStatus {
///     #[serde(default, skip_serializing_if = "Option::is_none")]
///     pub fsm: Option<FsmStatus>,
///     #[serde(default, skip_serializing_if = "Option::is_none")]
///     pub conditions: Option<Vec<Condition>>,
/// }
/// ```
///
/// The content is kept as raw JSON: a record that does not decode (edited by
/// hand, written by a newer version) must not make the whole object
/// unreadable, since the runtime has to report it on the object and leave it
/// as it is. Decode it with [`FsmStatus::record`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FsmStatus(pub Value);

impl FsmStatus {
    /// Decodes the record for machine `S`.
    ///
    /// # Errors
    /// [`DecodeError`] naming what is wrong with it.
    pub fn record<S: Fsm>(&self) -> Result<StateRecord, DecodeError> {
        RawRecord::Json(self.0.clone()).decode::<S>()
    }

    /// The name of the current state, without decoding the rest.
    pub fn state_name(&self) -> Option<&str> {
        self.0.get("state").and_then(Value::as_str)
    }
}

impl JsonSchema for FsmStatus {
    fn schema_name() -> Cow<'static, str> {
        "FsmStatus".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "The state machine's record, written by operator-fsm (schemaVersion, state, data, enteredAt, attempt, history, ...).",
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_keeps_every_field() {
        let schema = schemars::schema_for!(FsmStatus);
        let value = serde_json::to_value(&schema).unwrap();
        assert_eq!(value["type"], "object");
        assert_eq!(value["x-kubernetes-preserve-unknown-fields"], true);
    }

    #[test]
    fn any_json_round_trips_untouched() {
        let raw = serde_json::json!({"state": 5, "weird": [1, 2]});
        let status: FsmStatus = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(serde_json::to_value(&status).unwrap(), raw);
        assert_eq!(status.state_name(), None);
    }
}
