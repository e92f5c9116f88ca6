//! [`Versions`]: the hub and its spokes, and the conversion of one object
//! from any of them to any other through the hub.

use std::marker::PhantomData;

use kube::CustomResourceExt;
use serde_json::Value;

use super::carry::{carry_through, object_name};
use super::error::ConversionError;
use super::options::VersionOptions;
use super::spoke::{Spoke, Step, StepError};
use crate::KubeResource;

/// The versions of resource `H` (the hub: the machine's resource, the
/// version its handlers read) and its spokes, each converted to and from
/// the hub only: N versions need N conversions, not N².
///
/// # Expected flow
/// Declare each spoke with [`spoke`](Versions::spoke) (an
/// `Operator` does it with `served_version`);
/// [`crd`](Versions::crd) makes the multi-version CRD,
/// [`convert`](Versions::convert) one object, and
/// [`review`](Versions::review) answers a `ConversionReview`, which
/// `fsm_kube::http::webhook` serves.
///
/// Each version is its own `kube::CustomResource` type of the same group
/// and kind (`v1alpha1::Database`, `v1::Database`). The machine's
/// resource is the **hub**: the version its handlers read and write.
/// Every other version is a **spoke**, converted to the hub with `From`
/// (or `TryFrom`) and back with `TryFrom`, so N versions need N
/// conversions, not N²; spoke to spoke goes through the hub.
///
/// Conversions act on whole objects, but whatever they do the framework
/// carries the object's `metadata` and the machine's record
/// (`.status.fsm`) through **verbatim** and sets `apiVersion`
/// ([`convert`](Versions::convert)).
///
/// ```
/// use fsm_kube::{VersionOptions, Versions};
/// use kube::CustomResource;
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
/// use serde_json::json;
///
/// #[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
/// pub struct DatabaseStatus { pub fsm: Option<fsm_kube::FsmStatus> }
///
/// pub mod v1alpha1 {
///     use super::*;
///     #[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
///     #[kube(group = "example.io", version = "v1alpha1", kind = "Database", namespaced,
///            status = "DatabaseStatus")]
///     pub struct DatabaseSpec { pub size: String }
/// }
/// pub mod v1 {
///     use super::*;
///     #[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
///     #[kube(group = "example.io", version = "v1", kind = "Database", namespaced,
///            status = "DatabaseStatus")]
///     #[serde(rename_all = "camelCase")]
///     pub struct DatabaseSpec { pub storage_gi: u32 }
/// }
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("size {0:?} is not a number of Gi")]
/// pub struct BadSize(String);
///
/// // The old version to the hub: it may fail, with a message.
/// impl TryFrom<v1alpha1::Database> for v1::Database {
///     type Error = BadSize;
///     fn try_from(old: v1alpha1::Database) -> Result<Self, BadSize> {
///         let gi = old.spec.size.trim_end_matches("Gi");
///         let storage_gi = gi.parse().map_err(|_| BadSize(old.spec.size.clone()))?;
///         let mut new = v1::Database::new("", v1::DatabaseSpec { storage_gi });
///         new.status = old.status; // or not: metadata and .status.fsm are carried anyway
///         Ok(new)
///     }
/// }
/// // The hub back to the old version.
/// impl From<v1::Database> for v1alpha1::Database {
///     fn from(new: v1::Database) -> Self {
///         let size = format!("{}Gi", new.spec.storage_gi);
///         v1alpha1::Database::new("", v1alpha1::DatabaseSpec { size })
///     }
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let versions = Versions::<v1::Database>::new()
///     .spoke::<v1alpha1::Database>(VersionOptions::default().deprecated("use example.io/v1"));
/// let old = json!({
///     "apiVersion": "example.io/v1alpha1", "kind": "Database",
///     "metadata": {"name": "orders", "namespace": "shop", "labels": {"team": "a"}},
///     "spec": {"size": "10Gi"},
///     "status": {"fsm": {"state": "Serving", "attempt": 1}},
/// });
/// let new = versions.convert(&old, "example.io/v1")?;
/// assert_eq!(new["spec"], json!({"storageGi": 10}));
/// assert_eq!(new["metadata"], old["metadata"]);
/// assert_eq!(new["status"]["fsm"], old["status"]["fsm"]);
/// assert_eq!(versions.convert(&new, "example.io/v1alpha1")?, old);
///
/// let crd = versions.crd()?;
/// assert_eq!(crd.spec.versions.len(), 2);
/// assert!(crd.spec.versions[0].storage && !crd.spec.versions[1].storage);
/// assert_eq!(crd.spec.versions[1].deprecated, Some(true));
/// # Ok(())
/// # }
/// ```
///
/// An operator declares spokes with `Operator::served_version`, prints
/// the CRD with `crd`/`manifests` and serves [`review`](Versions::review)
/// with `run --webhook-addr` (`fsm_kube::http::webhook`).
pub struct Versions<H> {
    pub(crate) spokes: Vec<Spoke>,
    hub: PhantomData<fn() -> H>,
}

impl<H> Clone for Versions<H> {
    fn clone(&self) -> Self {
        Versions {
            spokes: self.spokes.clone(),
            hub: PhantomData,
        }
    }
}

impl<H> std::fmt::Debug for Versions<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Versions")
            .field("spokes", &self.spokes)
            .finish()
    }
}

impl<H> Default for Versions<H> {
    fn default() -> Self {
        Versions {
            spokes: Vec::new(),
            hub: PhantomData,
        }
    }
}

impl<H> Versions<H>
where
    H: KubeResource + CustomResourceExt,
{
    /// The hub alone: one version, no conversion.
    #[must_use]
    pub fn new() -> Self {
        Versions::default()
    }

    /// The hub and `spokes`, each made for hub `H` (by [`spoke`](Self::spoke)
    /// or [`Spoke::new`]). The command line's `Operator` keeps its spokes
    /// this way.
    #[cfg(feature = "cli")]
    pub(crate) fn from_spokes(spokes: Vec<Spoke>) -> Self {
        Versions {
            spokes,
            hub: PhantomData,
        }
    }

    /// Adds spoke `S`, offered as `options` says, converted to the hub
    /// with `H: TryFrom<S>` (or `From<S>`) and back with `S: TryFrom<H>`.
    ///
    /// The conversions act on whole objects; whatever they do with
    /// `metadata` and `.status.fsm`, the framework carries both through
    /// verbatim and sets `apiVersion`.
    #[must_use]
    pub fn spoke<S>(mut self, options: VersionOptions) -> Self
    where
        H: TryFrom<S>,
        <H as TryFrom<S>>::Error: std::error::Error + Send + Sync + 'static,
        S: KubeResource + CustomResourceExt + TryFrom<H>,
        <S as TryFrom<H>>::Error: std::error::Error + Send + Sync + 'static,
    {
        self.spokes.push(Spoke::new::<H, S>(options));
        self
    }

    /// Whether there are spokes (and so conversion to serve).
    #[must_use]
    pub fn has_spokes(&self) -> bool {
        !self.spokes.is_empty()
    }

    /// The hub's `apiVersion` (`group/version`).
    #[must_use]
    pub fn hub_api_version(&self) -> String {
        H::api_version(&()).into_owned()
    }

    /// Every `apiVersion`: the hub's, then the spokes' as declared.
    #[must_use]
    pub fn api_versions(&self) -> Vec<String> {
        std::iter::once(self.hub_api_version())
            .chain(self.spokes.iter().map(|s| s.api_version.clone()))
            .collect()
    }

    /// The spoke of `api_version`, `None` for the hub; an error for a
    /// version neither is.
    fn spoke_of(&self, object: &str, api_version: &str) -> Result<Option<&Spoke>, ConversionError> {
        if api_version == H::api_version(&()) {
            return Ok(None);
        }
        match self.spokes.iter().find(|s| s.api_version == api_version) {
            Some(spoke) => Ok(Some(spoke)),
            None => Err(ConversionError::UnknownVersion {
                object: object.to_owned(),
                api_version: api_version.to_owned(),
                kind: H::kind(&()).into_owned(),
                known: self.api_versions().join(", "),
            }),
        }
    }

    /// `object` (of any version) at `desired_api_version`: through the hub
    /// (spoke → hub → spoke when neither is the hub), its `metadata` and
    /// `.status.fsm` carried through verbatim. An object already at that
    /// version is returned as it is.
    ///
    /// # Errors
    /// [`ConversionError`], naming the object: a version this set does
    /// not know, an object that does not decode as its version's type, or
    /// the user's conversion refusing it.
    pub fn convert(
        &self,
        object: &Value,
        desired_api_version: &str,
    ) -> Result<Value, ConversionError> {
        let name = object_name(object);
        let Some(from) = object.get("apiVersion").and_then(Value::as_str) else {
            return Err(ConversionError::NotAnObject { object: name });
        };
        let target = self.spoke_of(&name, desired_api_version)?;
        let source = self.spoke_of(&name, from)?;
        if from == desired_api_version {
            return Ok(object.clone());
        }
        let hub_version = self.hub_api_version();
        let mut current = object.clone();
        if let Some(spoke) = source {
            current = step(spoke.to_hub, current, &name, from, &hub_version)?;
        }
        if let Some(spoke) = target {
            current = step(
                spoke.from_hub,
                current,
                &name,
                &hub_version,
                desired_api_version,
            )?;
        }
        Ok(carry_through(object, current, desired_api_version))
    }
}

/// One step of a conversion, its error naming the object and versions.
fn step(
    step: Step,
    object: Value,
    name: &str,
    from: &str,
    to: &str,
) -> Result<Value, ConversionError> {
    step(object).map_err(|error| match error {
        StepError::Decode(source) => ConversionError::Decode {
            object: name.to_owned(),
            api_version: from.to_owned(),
            source,
        },
        StepError::Convert(source) => ConversionError::Convert {
            object: name.to_owned(),
            from: from.to_owned(),
            to: to.to_owned(),
            source,
        },
        StepError::Encode(source) => ConversionError::Encode {
            object: name.to_owned(),
            api_version: to.to_owned(),
            source,
        },
    })
}
