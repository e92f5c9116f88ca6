//! The compact form in which the runtime's own watches keep dependents:
//! the object's JSON text, and its metadata typed (without
//! `managedFields`) for what is read without the body.
//!
//! A `DynamicObject` keeps its body as a `serde_json::Value` tree, every
//! JSON object a map of owned keys: a Deployment of a few kilobytes of
//! JSON takes about 13 KB that way, for as long as it exists. Its text
//! takes what it is long, and a read parses it once, which costs less
//! than rebuilding the same JSON from a typed `ObjectMeta` and a cloned
//! tree.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use kube::Resource;
use kube::api::{ApiResource, DynamicObject, ObjectMeta};
use kube::core::DynamicResourceScope;
use kube::runtime::watcher;
use serde::Serialize;
use serde_json::Value;

/// An object as a watch cache keeps it.
#[derive(Clone, Debug)]
pub(crate) struct CachedObject {
    /// The metadata without `managedFields` (those are in [`Self::json`]):
    /// what the store keys, the owner index and pruning read.
    pub metadata: ObjectMeta,
    /// The whole object as compact JSON, as the cache prepared it (its
    /// `apiVersion` and `kind` filled in, other managers' field sets
    /// dropped).
    json: Arc<str>,
}

impl CachedObject {
    /// The compact form of `object`; `None` if it does not serialize
    /// (a body that is not a JSON object cannot come from a watch).
    pub fn compact(object: &DynamicObject) -> Option<Self> {
        if !matches!(object.data, Value::Object(_) | Value::Null) {
            return None;
        }
        let json = with_json_text(object, |text: &str| Arc::from(text))?;
        let mut metadata = object.metadata.clone();
        metadata.managed_fields = None;
        Some(Self { metadata, json })
    }

    /// The object as JSON (parsed from its text).
    pub fn to_value(&self) -> Option<Value> {
        serde_json::from_str(&self.json).ok()
    }

    /// The object's JSON text (shared, not copied).
    pub fn text(&self) -> Arc<str> {
        self.json.clone()
    }
}

thread_local! {
    /// Where [`json_text`] writes before it copies: reused, so that
    /// building a text allocates once, at its final size.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The largest scratch buffer kept between texts.
const SCRATCH_KEPT: usize = 1 << 20;

/// `value` as compact JSON text, in one allocation of exactly its length
/// (serializing straight into a `String` grows it by doubling, and every
/// long-lived text would leave the freed smaller buffers behind it in the
/// allocator).
pub(crate) fn json_text<T: Serialize + ?Sized>(value: &T) -> Option<Box<str>> {
    with_json_text(value, |text: &str| Box::from(text))
}

/// `value`'s compact JSON text, made into `R` by `make` (which copies it
/// into an allocation of its own: `Box::from`, `Arc::from`).
fn with_json_text<T, R>(value: &T, make: impl FnOnce(&str) -> R) -> Option<R>
where
    T: Serialize + ?Sized,
{
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.try_borrow_mut().ok()?;
        scratch.clear();
        let written = serde_json::to_writer(&mut *scratch, value);
        let text = written
            .ok()
            .and_then(|()| std::str::from_utf8(&scratch).ok().map(make));
        if scratch.capacity() > SCRATCH_KEPT {
            *scratch = Vec::new();
        }
        text
    })
}

/// `event` with its object in the compact form; `None` if it does not
/// compact.
pub(crate) fn compact_event(
    event: &watcher::Event<DynamicObject>,
) -> Option<watcher::Event<CachedObject>> {
    Some(match event {
        watcher::Event::Apply(object) => watcher::Event::Apply(CachedObject::compact(object)?),
        watcher::Event::Delete(object) => watcher::Event::Delete(CachedObject::compact(object)?),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(object) => {
            watcher::Event::InitApply(CachedObject::compact(object)?)
        }
        watcher::Event::InitDone => watcher::Event::InitDone,
    })
}

/// A kind's API resource, shared by all the keys of its cache: kube's
/// store keys each object with its own copy of the dynamic type (five
/// strings for an `ApiResource`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SharedResource(pub Arc<ApiResource>);

impl Resource for CachedObject {
    type DynamicType = SharedResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &SharedResource) -> Cow<'_, str> {
        dt.0.group.as_str().into()
    }

    fn version(dt: &SharedResource) -> Cow<'_, str> {
        dt.0.version.as_str().into()
    }

    fn kind(dt: &SharedResource) -> Cow<'_, str> {
        dt.0.kind.as_str().into()
    }

    fn api_version(dt: &SharedResource) -> Cow<'_, str> {
        dt.0.api_version.as_str().into()
    }

    fn plural(dt: &SharedResource) -> Cow<'_, str> {
        dt.0.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use serde_json::json;

    fn deployment() -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns", "resourceVersion": "7",
                "labels": {"app": "d"},
                "managedFields": [{"manager": "op", "operation": "Apply",
                    "fieldsV1": {"f:spec": {"f:replicas": {}}}}]},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}}},
            "status": {"readyReplicas": 1},
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_compact_form_reads_back_as_the_whole_object() {
        let object = deployment();
        let cached = CachedObject::compact(&object).unwrap_or_else(|| panic!("compacts"));
        assert_eq!(cached.to_value(), serde_json::to_value(&object).ok());
        // The typed metadata leaves the field sets to the text.
        assert!(cached.metadata.managed_fields.is_none());
        let entries: Option<Vec<ManagedFieldsEntry>> = cached
            .to_value()
            .and_then(|v| serde_json::from_value(v["metadata"]["managedFields"].clone()).ok());
        assert_eq!(entries.map(|e| e.len()), Some(1));
        assert_eq!(cached.metadata.name.as_deref(), Some("d"));
        assert_eq!(cached.metadata.resource_version.as_deref(), Some("7"));
    }

    #[test]
    fn a_text_is_the_compact_json_and_the_scratch_is_reused() {
        let value = json!({"a": [1, 2, {"b": "c"}], "d": null});
        assert_eq!(
            json_text(&value).as_deref(),
            Some(value.to_string().as_str())
        );
        // A long text, then a short one: each exactly itself.
        let long = json!({"k": "x".repeat(100_000)});
        assert_eq!(
            json_text(&long).map(|t| t.len()),
            Some(long.to_string().len())
        );
        assert_eq!(json_text(&json!(1)).as_deref(), Some("1"));
    }
}
