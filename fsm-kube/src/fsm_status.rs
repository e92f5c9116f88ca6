//! `FsmStatus`: the machine's record as it sits in the custom resource's
//! status, kept opaque so that a corrupt record never stops the object from
//! being read.

use std::borrow::Cow;

use fsm_core::{DecodeError, Fsm, RawRecord, StateRecord};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The machine's record in `.status.fsm`.
///
/// Put it in your status struct so that your CRD declares it (and the API
/// server keeps it through pruning), with the `conditions` and the
/// `observedGeneration` the runtime writes beside it (see
/// [`crate::conditions`]):
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
///     /// The generation the machine has acted on, for kstatus.
///     #[serde(default, rename = "observedGeneration", skip_serializing_if = "Option::is_none")]
///     pub observed_generation: Option<i64>,
/// }
/// ```
///
/// The content is kept as raw JSON: a record that does not decode (edited by
/// hand, written by a newer version) must not make the whole object
/// unreadable, since the runtime has to report it on the object and leave it
/// as it is. Decode it with [`FsmStatus::record`].
///
/// # Memory
/// It holds the record as JSON text (compact, as API servers send it), not as a
/// [`serde_json::Value`] tree: every object in a controller's watch cache
/// carries one, and a record with a few history entries takes about 600
/// bytes as text against 4.5 KB as a `Value` (a map node and an allocated
/// key per field). Reading it parses the text
/// ([`FsmStatus::to_value`], [`FsmStatus::record`]); serialising it (any
/// serializer) writes the same JSON object it was read from.
///
/// ```
/// use fsm_kube::FsmStatus;
/// let status: FsmStatus = serde_json::from_value(serde_json::json!({
///     "schemaVersion": 1, "state": "Ready", "enteredAt": "2024-01-01T00:00:00Z"
/// })).unwrap();
/// assert_eq!(status.state_name().as_deref(), Some("Ready"));
/// assert_eq!(status.to_value()["state"], "Ready");
/// assert_eq!(serde_json::to_value(&status).unwrap(), status.to_value());
/// ```
#[derive(Clone)]
pub struct FsmStatus(Box<RawValue>);

impl FsmStatus {
    /// The record given as JSON, kept as compact text.
    #[must_use]
    pub fn from_value(value: &Value) -> Self {
        // Encoding a `Value` to a string cannot fail: its keys are strings.
        FsmStatus(serde_json::value::to_raw_value(value).unwrap_or_else(|_| null()))
    }

    /// The record as JSON (parsed from the text it holds).
    #[must_use]
    pub fn to_value(&self) -> Value {
        // The text is always JSON: written from a `Value`, or checked by
        // serde_json when it was read.
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }

    /// The record as JSON text, exactly as held: as the server sent it
    /// (compact), or compact when it was given as a `Value`.
    #[must_use]
    pub fn as_json_text(&self) -> &str {
        self.0.get()
    }

    /// Decodes the record for machine `S`.
    ///
    /// # Errors
    /// [`DecodeError`] naming what is wrong with it.
    pub fn record<S: Fsm>(&self) -> Result<StateRecord, DecodeError> {
        RawRecord::Json(self.to_value()).decode::<S>()
    }

    /// The name of the current state, without decoding the rest.
    #[must_use]
    pub fn state_name(&self) -> Option<String> {
        #[derive(Deserialize)]
        struct StateOnly<'a> {
            #[serde(borrow, default)]
            state: Option<Cow<'a, str>>,
        }
        serde_json::from_str::<StateOnly<'_>>(self.0.get())
            .ok()
            .and_then(|s| s.state)
            .map(Cow::into_owned)
    }
}

/// `null`, the record of a status that has none.
fn null() -> Box<RawValue> {
    RawValue::NULL.to_owned()
}

impl Default for FsmStatus {
    /// `null`.
    fn default() -> Self {
        FsmStatus(null())
    }
}

impl From<Value> for FsmStatus {
    fn from(value: Value) -> Self {
        FsmStatus::from_value(&value)
    }
}

impl fmt::Debug for FsmStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("FsmStatus").field(&self.0.get()).finish()
    }
}

impl PartialEq for FsmStatus {
    /// The same JSON: the same text, or texts that parse to equal values
    /// (keys in another order, other spacing).
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get() || self.to_value() == other.to_value()
    }
}

impl Serialize for FsmStatus {
    /// The JSON object it holds, through any serializer (YAML included).
    fn serialize<Ser: Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        // Straight from the text: no `Value` built on the way (the status
        // is picked into JSON on every reconcile).
        let mut text = serde_json::Deserializer::from_str(self.0.get());
        serde_transcode::transcode(&mut text, serializer)
    }
}

impl<'de> Deserialize<'de> for FsmStatus {
    /// Any JSON value. From `serde_json` (a watch event, an API answer)
    /// the text is kept as it came, without building a `Value` tree on the
    /// way; from any other format the value is read and kept as compact
    /// text.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // The name under which serde_json hands a value's raw text (what
        // its own `RawValue` asks for); other formats read a newtype
        // struct as its content.
        deserializer.deserialize_newtype_struct(RAW_TEXT_TOKEN, TextVisitor)
    }
}

/// The newtype-struct name by which `serde_json` deserializers hand over a
/// value's text as a one-entry map (`serde_json::value::RawValue`'s
/// protocol, stable since serde_json 1.0.29).
const RAW_TEXT_TOKEN: &str = "$serde_json::private::RawValue";

/// Reads an [`FsmStatus`]: the raw text `serde_json` hands over, or any
/// value another format reads.
struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = FsmStatus;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<FsmStatus, D::Error> {
        let value = Value::deserialize(d)?;
        Ok(FsmStatus::from_value(&value))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FsmStatus, A::Error> {
        let Some(key) = map.next_key::<String>()? else {
            return Ok(FsmStatus::from_value(&Value::Object(Map::new())));
        };
        if key == RAW_TEXT_TOKEN {
            let text: String = map.next_value()?;
            return RawValue::from_string(text)
                .map(FsmStatus)
                .map_err(serde::de::Error::custom);
        }
        // A format that reads a newtype struct as a map of its own.
        let mut object = Map::new();
        object.insert(key, map.next_value()?);
        while let Some((key, value)) = map.next_entry::<String, Value>()? {
            object.insert(key, value);
        }
        Ok(FsmStatus::from_value(&Value::Object(object)))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<FsmStatus, E> {
        Ok(FsmStatus::default())
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

    #[test]
    fn it_holds_the_text_it_was_read_from_and_writes_the_same_object() {
        let text = r#"{"state":"Re\"ady","history":[{"seq":1}],"n":1.5}"#;
        let status: FsmStatus = serde_json::from_str(text).unwrap();
        assert_eq!(status.as_json_text(), text);
        let spaced: FsmStatus = serde_json::from_slice(
            br#"{ "state" : "Re\"ady", "history": [{"seq": 1}], "n": 1.5 }"#,
        )
        .unwrap();
        assert_eq!(spaced, status, "the same JSON");
        // Given as a value: compact.
        assert_eq!(
            FsmStatus::from(status.to_value()).as_json_text(),
            r#"{"history":[{"seq":1}],"n":1.5,"state":"Re\"ady"}"#
        );
        assert_eq!(status.state_name().as_deref(), Some("Re\"ady"));
        // Written: the same object.
        let written = serde_json::to_string(&status).unwrap();
        assert_eq!(serde_json::from_str::<FsmStatus>(&written).unwrap(), status);
        assert_eq!(status, FsmStatus::from(status.to_value()));
    }

    #[test]
    fn what_is_not_json_text_is_refused_and_null_is_kept() {
        assert!(serde_json::from_str::<FsmStatus>(r#"{"a": }"#).is_err());
        let null: FsmStatus = serde_json::from_str("null").unwrap();
        assert_eq!(null.to_value(), Value::Null);
        #[derive(Deserialize)]
        struct Holder {
            fsm: Option<FsmStatus>,
        }
        let held: Holder = serde_json::from_str(r#"{"fsm":{"state":"A"}}"#).unwrap();
        assert_eq!(held.fsm.unwrap().as_json_text(), r#"{"state":"A"}"#);
    }

    #[test]
    fn equality_is_of_the_json_not_the_text() {
        let a = FsmStatus::from(serde_json::json!({"a": 1, "b": 2}));
        let b: FsmStatus = serde_json::from_str(r#"{"b":2,"a":1}"#).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, FsmStatus::from(serde_json::json!({"a": 1})));
        assert_eq!(FsmStatus::default().to_value(), Value::Null);
    }

    /// Through a YAML serializer (the CLI prints objects as YAML) and a
    /// container serde buffers (an internally tagged enum, `flatten`), it
    /// is the same JSON object.
    #[test]
    fn any_serde_format_and_buffering_container_reads_and_writes_it() {
        #[derive(Debug, Deserialize, Serialize)]
        #[serde(tag = "type")]
        enum Event {
            Added {
                #[serde(flatten)]
                status: Holder,
            },
        }
        #[derive(Debug, Deserialize, Serialize)]
        struct Holder {
            fsm: FsmStatus,
        }
        let json = serde_json::json!({"fsm": {"state": "A", "attempt": 2}, "type": "Added"});
        let Event::Added { status } = serde_json::from_value::<Event>(json).unwrap();
        assert_eq!(status.fsm.state_name().as_deref(), Some("A"));
        let yaml = serde_yaml_ng::to_string(&status).unwrap();
        assert_eq!(yaml, "fsm:\n  attempt: 2\n  state: A\n");
        let back: Holder = serde_yaml_ng::from_str(&yaml).unwrap();
        assert_eq!(back.fsm, status.fsm);
    }
}
