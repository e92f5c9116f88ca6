//! A spoke version with its two conversions through the hub, erased to
//! functions on JSON objects so that versions of different types sit in
//! one list.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::Value;

use super::options::VersionOptions;
use crate::KubeResource;

/// Why one step (spoke to hub, or hub to spoke) failed, before the object
/// and versions are named ([`super::ConversionError`]).
#[derive(Debug)]
pub(crate) enum StepError {
    /// The input does not decode as its type.
    Decode(serde_json::Error),
    /// The user's `TryFrom` refused it.
    Convert(Box<dyn std::error::Error + Send + Sync>),
    /// The output does not serialize.
    Encode(serde_json::Error),
}

/// A conversion of a whole object, as JSON.
pub(crate) type Step = fn(Value) -> Result<Value, StepError>;

/// One spoke: its `apiVersion`, how it is offered, its CRD (one version)
/// and its conversions to and from the hub.
#[derive(Clone)]
pub(crate) struct Spoke {
    pub(crate) api_version: String,
    pub(crate) version: String,
    pub(crate) options: VersionOptions,
    pub(crate) crd: fn() -> CustomResourceDefinition,
    pub(crate) to_hub: Step,
    pub(crate) from_hub: Step,
}

impl std::fmt::Debug for Spoke {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spoke")
            .field("api_version", &self.api_version)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Spoke {
    /// Spoke `S` of hub `H`.
    pub(crate) fn new<H, S>(options: VersionOptions) -> Self
    where
        H: KubeResource + TryFrom<S>,
        <H as TryFrom<S>>::Error: std::error::Error + Send + Sync + 'static,
        S: KubeResource + CustomResourceExt + TryFrom<H>,
        <S as TryFrom<H>>::Error: std::error::Error + Send + Sync + 'static,
    {
        Spoke {
            api_version: S::api_version(&()).into_owned(),
            version: S::version(&()).into_owned(),
            options,
            crd: S::crd,
            to_hub: convert::<S, H>,
            from_hub: convert::<H, S>,
        }
    }
}

/// Reads `object` as `From`, converts it with the user's `TryFrom`, and
/// writes the result.
fn convert<From, To>(object: Value) -> Result<Value, StepError>
where
    From: KubeResource,
    To: KubeResource + TryFrom<From>,
    <To as TryFrom<From>>::Error: std::error::Error + Send + Sync + 'static,
{
    let from: From = serde_json::from_value(object).map_err(StepError::Decode)?;
    let to = To::try_from(from).map_err(|error| StepError::Convert(Box::new(error)))?;
    serde_json::to_value(to).map_err(StepError::Encode)
}
