//! A state as (variant name, data) and back, straight through serde.
//!
//! A record keeps a state as its variant name and its data, the variant's
//! fields as JSON. Going through the enum's whole serde representation
//! (`{"Variant": data}`) would build and tear down a wrapper map on every
//! transition; these adapters hand serde the variant directly:
//! [`data_of`] is a serializer that keeps only a variant's content, and
//! [`from_parts`] a deserializer that presents (name, data) as an
//! externally tagged enum. Both honour the enum's serde attributes, since
//! serde's own derive still drives them.

use serde::de::{self, DeserializeOwned, DeserializeSeed, Visitor};
use serde::ser::{self, Impossible, Serialize, Serializer};
use serde_json::Value;

type Error = serde_json::Error;

/// The data of `state`'s variant: `None` for a unit variant, else its
/// fields (or its single value) as JSON.
///
/// # Errors
/// The data cannot be represented as JSON, or the type does not serialise
/// as an externally tagged enum variant.
pub(crate) fn data_of<S: Serialize + ?Sized>(state: &S) -> Result<Option<Value>, Error> {
    state.serialize(VariantData)
}

/// Rebuilds a state from its variant `name` and `data`.
///
/// # Errors
/// The data does not fit the variant, or there is no such variant.
pub(crate) fn from_parts<S: DeserializeOwned>(
    name: &str,
    data: Option<&Value>,
) -> Result<S, Error> {
    S::deserialize(Parts { name, data })
}

fn not_a_variant() -> Error {
    ser::Error::custom("a state must serialise as an externally tagged enum variant")
}

/// Serialises a variant's content only.
struct VariantData;

/// A struct variant's fields, collected as a JSON object.
struct StructData(serde_json::Map<String, Value>);

/// A tuple variant's fields, collected as a JSON array.
struct TupleData(Vec<Value>);

impl ser::SerializeStructVariant for StructData {
    type Ok = Option<Value>;
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.0.insert(
            key.to_owned(),
            value.serialize(serde_json::value::Serializer)?,
        );
        Ok(())
    }

    fn end(self) -> Result<Option<Value>, Error> {
        Ok(Some(Value::Object(self.0)))
    }
}

impl ser::SerializeTupleVariant for TupleData {
    type Ok = Option<Value>;
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.0.push(value.serialize(serde_json::value::Serializer)?);
        Ok(())
    }

    fn end(self) -> Result<Option<Value>, Error> {
        Ok(Some(Value::Array(self.0)))
    }
}

impl Serializer for VariantData {
    type Ok = Option<Value>;
    type Error = Error;
    type SerializeSeq = Impossible<Option<Value>, Error>;
    type SerializeTuple = Impossible<Option<Value>, Error>;
    type SerializeTupleStruct = Impossible<Option<Value>, Error>;
    type SerializeTupleVariant = TupleData;
    type SerializeMap = Impossible<Option<Value>, Error>;
    type SerializeStruct = Impossible<Option<Value>, Error>;
    type SerializeStructVariant = StructData;

    crate::refuse_scalars!(not_a_variant());

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<Option<Value>, Error> {
        Ok(None)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<Option<Value>, Error> {
        Err(not_a_variant())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<Option<Value>, Error> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Result<Option<Value>, Error> {
        value.serialize(serde_json::value::Serializer).map(Some)
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(not_a_variant())
    }

    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Error> {
        Err(not_a_variant())
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(not_a_variant())
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        len: usize,
    ) -> Result<TupleData, Error> {
        Ok(TupleData(Vec::with_capacity(len)))
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(not_a_variant())
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Error> {
        Err(not_a_variant())
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<StructData, Error> {
        Ok(StructData(serde_json::Map::new()))
    }
}

/// (name, data) seen as an externally tagged enum.
struct Parts<'a> {
    name: &'a str,
    data: Option<&'a Value>,
}

impl<'de> de::Deserializer<'de> for Parts<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_enum(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_enum(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

impl<'de> de::EnumAccess<'de> for Parts<'de> {
    type Error = Error;
    type Variant = Data<'de>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Data<'de>), Error> {
        let variant =
            seed.deserialize(de::value::BorrowedStrDeserializer::<Error>::new(self.name))?;
        Ok((variant, Data(self.data)))
    }
}

/// A variant's data, handed to the variant's own deserialisation.
struct Data<'a>(Option<&'a Value>);

impl<'de> Data<'de> {
    fn content(self, expected: &str) -> Result<&'de Value, Error> {
        self.0
            .ok_or_else(|| de::Error::custom(format!("the state has no data, expected {expected}")))
    }
}

impl<'de> de::VariantAccess<'de> for Data<'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        match self.0 {
            None | Some(Value::Null) => Ok(()),
            Some(_) => Err(de::Error::custom("the state takes no data")),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        match self.0 {
            Some(value) => seed.deserialize(value),
            None => seed.deserialize(&Value::Null),
        }
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_tuple(self.content("a list")?, len, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_struct(self.content("fields")?, "", fields, visitor)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    use super::*;

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    enum State {
        Unit,
        Newtype(u32),
        Tuple(String, bool),
        Fields {
            id: String,
            #[serde(rename = "renamedCount", default)]
            count: u8,
            #[serde(skip_serializing_if = "Option::is_none", default)]
            note: Option<String>,
        },
    }

    /// The adapters agree with the whole-enum round trip for every shape.
    #[test]
    fn agree_with_serde_for_every_shape() {
        let states = [
            State::Unit,
            State::Newtype(7),
            State::Tuple("a".into(), true),
            State::Fields {
                id: "i-1".into(),
                count: 3,
                note: None,
            },
        ];
        for state in states {
            let whole = serde_json::to_value(&state).unwrap();
            let (name, expected) = match &whole {
                Value::String(name) => (name.clone(), None),
                Value::Object(map) => {
                    let (name, data) = map.iter().next().unwrap();
                    (name.clone(), Some(data.clone()))
                }
                other => panic!("{other}"),
            };
            let data = data_of(&state).unwrap();
            assert_eq!(data, expected, "{state:?}");
            assert_eq!(from_parts::<State>(&name, data.as_ref()).unwrap(), state);
        }
        assert_eq!(
            data_of(&State::Fields {
                id: "x".into(),
                count: 1,
                note: Some("n".into())
            })
            .unwrap(),
            Some(json!({"id": "x", "renamedCount": 1, "note": "n"}))
        );
    }

    #[test]
    fn bad_data_and_unknown_variants_are_errors() {
        let wrong_type = from_parts::<State>("Fields", Some(&json!({"id": 5}))).unwrap_err();
        assert!(
            wrong_type.to_string().contains("invalid type"),
            "{wrong_type}"
        );
        let missing = from_parts::<State>("Fields", None).unwrap_err();
        assert!(missing.to_string().contains("no data"), "{missing}");
        let unknown = from_parts::<State>("Gone", None).unwrap_err();
        assert!(unknown.to_string().contains("unknown variant"), "{unknown}");
        let extra = from_parts::<State>("Unit", Some(&json!({"a": 1}))).unwrap_err();
        assert!(extra.to_string().contains("takes no data"), "{extra}");
        assert_eq!(
            from_parts::<State>("Fields", Some(&json!({"id": "i", "extra": 1}))).unwrap(),
            State::Fields {
                id: "i".into(),
                count: 0,
                note: None
            }
        );
    }

    #[test]
    fn what_is_not_an_enum_is_refused() {
        assert!(data_of(&5u8).is_err());
        assert!(data_of(&json!({"A": 1})).is_err());
        assert!(data_of("A").is_err());
    }
}
