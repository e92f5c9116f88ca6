//! The `status` and `spec` of an object as JSON, without serialising the
//! rest of it.
//!
//! A reconcile needs the status (where [`StatusStore`](crate::StatusStore)
//! keeps the record, and the conditions) and, for machines that snapshot
//! it, the spec. Serialising the whole object to a `serde_json::Value` for
//! that also copies its metadata, `managedFields` included, which is most
//! of the bytes of a typical custom resource and is dropped at once. The
//! [`Picker`] serializer sees the object's top-level fields go by and turns
//! only the wanted ones into JSON.

use serde::Serialize;
use serde::ser::{self, Impossible};
use serde_json::Value;

/// The object's `status` (`Null` when absent) and, when `with_spec`, its
/// `spec`.
///
/// Objects that do not serialise as a JSON object with string keys fall
/// back to a full serialisation; objects that cannot be serialised at all
/// have neither.
pub(crate) fn status_and_spec<K: Serialize>(object: &K, with_spec: bool) -> (Value, Option<Value>) {
    let mut picker = Picker {
        with_spec,
        status: None,
        spec: None,
    };
    match object.serialize(&mut picker) {
        Ok(()) => (
            picker.status.unwrap_or(Value::Null),
            picker.spec.filter(|_| with_spec),
        ),
        Err(_) => match serde_json::to_value(object) {
            Ok(Value::Object(mut fields)) => {
                let spec = if with_spec {
                    fields.remove("spec")
                } else {
                    None
                };
                (fields.remove("status").unwrap_or(Value::Null), spec)
            }
            _ => (Value::Null, None),
        },
    }
}

/// Keeps the wanted top-level fields of a struct or map, as JSON.
struct Picker {
    with_spec: bool,
    status: Option<Value>,
    spec: Option<Value>,
}

impl Picker {
    fn keep<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Error> {
        let slot = match key {
            "status" => &mut self.status,
            "spec" if self.with_spec => &mut self.spec,
            _ => return Ok(()),
        };
        *slot = Some(value.serialize(serde_json::value::Serializer)?);
        Ok(())
    }
}

type Error = serde_json::Error;

fn not_an_object() -> Error {
    ser::Error::custom("not a JSON object")
}

/// A map being picked: the key of the entry whose value comes next.
struct PickMap<'a> {
    picker: &'a mut Picker,
    key: Option<String>,
}

impl ser::SerializeMap for PickMap<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        match key.serialize(serde_json::value::Serializer)? {
            Value::String(key) => {
                self.key = Some(key);
                Ok(())
            }
            _ => Err(not_an_object()),
        }
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let key = self.key.take().ok_or_else(not_an_object)?;
        self.picker.keep(&key, value)
    }

    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

impl ser::SerializeStruct for &mut Picker {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.keep(key, value)
    }

    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

impl<'a> ser::Serializer for &'a mut Picker {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = PickMap<'a>;
    type SerializeStruct = Self;
    type SerializeStructVariant = Impossible<(), Error>;

    fsm_core::refuse_scalars!(not_an_object());

    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Error> {
        Err(not_an_object())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        Err(not_an_object())
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(not_an_object())
    }

    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Error> {
        Err(not_an_object())
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(not_an_object())
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(not_an_object())
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Ok(PickMap {
            picker: self,
            key: None,
        })
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Error> {
        Ok(self)
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(not_an_object())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kube::api::DynamicObject;
    use serde_json::json;

    use super::*;

    #[derive(Serialize)]
    struct Typed {
        metadata: BTreeMap<String, String>,
        spec: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<Value>,
    }

    #[test]
    fn picks_status_and_spec_of_a_struct() {
        let object = Typed {
            metadata: BTreeMap::from([("name".into(), "a".into())]),
            spec: json!({"replicas": 2}),
            status: Some(json!({"fsm": {"state": "Ready"}})),
        };
        assert_eq!(
            status_and_spec(&object, true),
            (
                json!({"fsm": {"state": "Ready"}}),
                Some(json!({"replicas": 2}))
            )
        );
        assert_eq!(
            status_and_spec(&object, false),
            (json!({"fsm": {"state": "Ready"}}), None)
        );
    }

    #[test]
    fn an_absent_status_is_null() {
        let object = Typed {
            metadata: BTreeMap::new(),
            spec: json!({}),
            status: None,
        };
        assert_eq!(status_and_spec(&object, false), (Value::Null, None));
    }

    #[test]
    fn picks_from_maps_and_flattened_objects() {
        let dynamic: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 1},
            "status": {"phase": "x"},
        }))
        .unwrap();
        assert_eq!(
            status_and_spec(&dynamic, true),
            (json!({"phase": "x"}), Some(json!({"size": 1})))
        );
        let map = json!({"status": [1, 2], "other": true});
        assert_eq!(status_and_spec(&map, false), (json!([1, 2]), None));
    }

    #[test]
    fn what_is_not_an_object_has_neither() {
        assert_eq!(status_and_spec(&vec![1, 2], true), (Value::Null, None));
        assert_eq!(status_and_spec(&"text", true), (Value::Null, None));
    }

    #[test]
    fn agrees_with_a_full_serialisation() {
        let object = Typed {
            metadata: BTreeMap::from([("uid".into(), "u".into())]),
            spec: json!({"a": [1, {"b": null}]}),
            status: Some(json!({"conditions": [{"type": "Ready"}]})),
        };
        let full = serde_json::to_value(&object).unwrap();
        let (status, spec) = status_and_spec(&object, true);
        assert_eq!(status, full["status"]);
        assert_eq!(spec.as_ref(), full.get("spec"));
    }
}
