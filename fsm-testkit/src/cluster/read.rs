//! The read verbs: get and list (with selectors, paging and a revision to
//! read at).

use std::sync::Arc;

use serde_json::{Value, json};

use super::meta::str_at;
use super::paging::{ReadAt, decode_continue, encode_continue};
use super::{Cluster, ListQuery, list_item, not_found, present};
use crate::resources::ResourceDef;
use crate::status::ApiError;

impl Cluster {
    /// The object, as `def`'s version presents it.
    ///
    /// # Errors
    /// [`ApiError::NotFound`].
    pub fn get(&self, def: &ResourceDef, ns: &str, name: &str) -> Result<Value, ApiError> {
        let schemas = self.read_schemas(def);
        self.store
            .get(&def.group_resource(), ns, name)
            .map(|o| decoded(&schemas, present(def, &o)))
            .ok_or_else(|| not_found(def, name))
    }

    /// The object as stored: its stored `apiVersion`, not decoded (a
    /// custom resource whose CRD converts through a webhook is converted
    /// from the version it was stored at).
    ///
    /// # Errors
    /// [`ApiError::NotFound`].
    pub fn get_as_stored(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.store
            .get(&def.group_resource(), ns, name)
            .map(|o| (*o).clone())
            .ok_or_else(|| not_found(def, name))
    }

    /// A list as [`Cluster::list`] answers it, its items as stored (their
    /// stored `apiVersion`, not decoded).
    ///
    /// # Errors
    /// As [`Cluster::list`].
    pub fn list_as_stored(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        q: &ListQuery,
    ) -> Result<Value, ApiError> {
        self.list_items(def, ns, q, true)
    }

    /// A list of `def`'s objects in `ns` (all namespaces when `None`).
    ///
    /// # Errors
    /// [`ApiError::BadRequest`] for unsupported field selectors or a bad
    /// continue token; [`ApiError::Gone`] for a continue token older than the
    /// kept history.
    pub fn list(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        q: &ListQuery,
    ) -> Result<Value, ApiError> {
        self.list_items(def, ns, q, false)
    }

    fn list_items(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        q: &ListQuery,
        as_stored: bool,
    ) -> Result<Value, ApiError> {
        let fields = q.fields.resolve(def)?;
        let current = self.store.revision();
        let (revision, after) = match &q.continue_token {
            Some(token) => {
                let (rev, ns, name) = decode_continue(token)?;
                // 0: the rest of a list whose snapshot expired, at the newest.
                let rev = if rev == 0 { current } else { rev };
                if rev < self.store.compacted() {
                    return Err(ApiError::ContinueExpired(encode_continue(0, &ns, &name)));
                }
                (rev.min(current), Some((ns, name)))
            }
            None => match q.at {
                ReadAt::Latest | ReadAt::NotOlderThan(_) => (current, None),
                // etcd's answer, passed on by the real server (1.20) as a 500.
                ReadAt::Exact(n) if n > current => {
                    return Err(ApiError::Storage(
                        "etcdserver: mvcc: required revision is a future revision".into(),
                    ));
                }
                ReadAt::Exact(n) => (n, None),
            },
        };
        // One snapshot for every page of a list: the revision of its first page.
        let objects = self
            .store
            .list_at(&def.group_resource(), ns, revision)
            .map_err(|_| {
                if after.is_some() {
                    ApiError::Gone("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.".into())
                } else {
                    ApiError::Gone("The resourceVersion for the provided list is too old.".into())
                }
            })?;
        let mut items: Vec<Arc<Value>> = objects
            .into_iter()
            .filter(|o| {
                after.as_ref().is_none_or(|(a_ns, a_name)| {
                    (str_at(o, "namespace"), str_at(o, "name")) > (a_ns.as_str(), a_name.as_str())
                })
            })
            .filter(|o| q.labels.matches(o) && fields.matches(o))
            .collect();
        let mut metadata = json!({"resourceVersion": revision.to_string()});
        if let Some(limit) = q.limit.filter(|l| *l > 0 && items.len() > *l) {
            let remaining = items.len() - limit;
            items.truncate(limit);
            if let Some(last) = items.last() {
                metadata["continue"] = json!(encode_continue(
                    revision,
                    str_at(last, "namespace"),
                    str_at(last, "name")
                ));
                // With a selector the count of what is left cannot be known.
                if q.labels.is_empty() && q.fields.is_empty() {
                    metadata["remainingItemCount"] = json!(remaining);
                }
            }
        }
        if def.custom && metadata.get("continue").is_none() {
            metadata["continue"] = json!("");
        }
        let schemas = self.read_schemas(def);
        Ok(json!({
            "kind": def.list_kind(),
            "apiVersion": def.api_version(),
            "metadata": metadata,
            "items": items
                .iter()
                .map(|o| if as_stored {
                    (**o).clone()
                } else {
                    decoded(&schemas, list_item(def, o))
                })
                .collect::<Vec<_>>(),
        }))
    }
}

/// The schemas a read of a custom resource through `def`'s version
/// decodes with: the storage version's, the version read's.
struct ReadSchemas {
    storage: Option<Value>,
    served: Option<Value>,
}

impl Cluster {
    fn read_schemas(&self, def: &ResourceDef) -> ReadSchemas {
        let served = self.crd_schema(def);
        let storage = crate::schema::of_other_storage(&self.store, def).or_else(|| served.clone());
        ReadSchemas { storage, served }
    }
}

/// A custom resource as read: defaulted by its storage version's schema,
/// pruned by the read version's, as the real server decodes what it
/// reads from storage (built-in objects have neither).
fn decoded(schemas: &ReadSchemas, mut object: Value) -> Value {
    crate::schema::decode_stored(
        schemas.storage.as_ref(),
        schemas.served.as_ref(),
        &mut object,
    );
    object
}
