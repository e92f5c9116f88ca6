//! The writes of a create-only dependent ([`Dependent::create_only`](super::Dependent::create_only)):
//! one create, and for an adopted object the ownership metadata alone.

use kube::api::{DynamicObject, PostParams};
use serde_json::{Map, Value};

use super::kind::DependentKind;
use super::object::Placement;
use super::own_writes::version_of;
use super::runtime::DependentsRuntime;

/// Creates `body` at `place`; when the server already has an object of
/// that name (someone created it since it was read), reads that one
/// instead. Returns the object and whether this call created it.
pub(crate) async fn create_or_read(
    runtime: &DependentsRuntime,
    kind: &DependentKind,
    place: &Placement,
    body: &Value,
) -> Result<(Value, bool), kube::Error> {
    let api = runtime.api(kind, place.namespace.as_deref());
    let object: DynamicObject =
        serde_json::from_value(body.clone()).map_err(kube::Error::SerdeError)?;
    let params = PostParams {
        field_manager: Some(runtime.field_manager.clone()),
        ..PostParams::default()
    };
    let write = runtime.writing(place);
    let (object, created) = match api.create(&params, &object).await {
        Ok(created) => (created, true),
        Err(kube::Error::Api(status)) if status.code == 409 => (api.get(&place.name).await?, false),
        Err(error) => return Err(error),
    };
    let object = serde_json::to_value(object).unwrap_or(Value::Null);
    runtime.wrote(place, &object);
    write.finish(version_of(&object));
    Ok((object, created))
}

/// The part of `body` that makes an object the owner's: identity, labels,
/// annotations and owner references. What adopting an existing object
/// applies, leaving its content as it is.
pub(crate) fn ownership_only(body: &Value) -> Value {
    let mut out = Map::new();
    for field in ["apiVersion", "kind"] {
        if let Some(value) = body.get(field) {
            out.insert(field.into(), value.clone());
        }
    }
    let mut metadata = Map::new();
    for field in [
        "name",
        "namespace",
        "labels",
        "annotations",
        "ownerReferences",
    ] {
        if let Some(value) = body.pointer(&format!("/metadata/{field}")) {
            metadata.insert(field.into(), value.clone());
        }
    }
    out.insert("metadata".into(), Value::Object(metadata));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ownership_only_keeps_identity_and_ownership_not_content() {
        let body = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "ns", "labels": {"a": "b"}, "ownerReferences": [{"uid": "u"}]},
            "stringData": {"password": "x"}});
        assert_eq!(
            ownership_only(&body),
            json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "s", "namespace": "ns", "labels": {"a": "b"}, "ownerReferences": [{"uid": "u"}]}})
        );
    }
}
