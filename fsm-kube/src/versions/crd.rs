//! The multi-version CRD of a [`Versions`]: one entry per version, from
//! each type's own schema (kube's `merge_crds`), with its flags.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, CustomResourceDefinitionVersion,
    WebhookClientConfig, WebhookConversion,
};
use kube::CustomResourceExt;
use kube::core::crd::merge_crds;

use super::error::VersionsError;
use super::options::VersionOptions;
use super::registry::Versions;
use crate::KubeResource;

impl<H> Versions<H>
where
    H: KubeResource + CustomResourceExt,
{
    /// The CRD of every version: the hub's first, then the spokes' as
    /// declared, each with the schema of its own type, `served`,
    /// `storage` (the hub's unless a spoke says
    /// [`storage`](VersionOptions::storage)), `deprecated` and
    /// `deprecationWarning`. Without spokes, exactly `H::crd()`. The
    /// conversion is left unset: [`WebhookTarget::set_on`] sets it.
    ///
    /// # Errors
    /// [`VersionsError`]: two storage versions, a version declared twice,
    /// or a spoke of another group, kind or scope.
    pub fn crd(&self) -> Result<CustomResourceDefinition, VersionsError> {
        if self.spokes.is_empty() {
            return Ok(H::crd());
        }
        let hub = H::version(&()).into_owned();
        let mut names = vec![hub.clone()];
        for spoke in &self.spokes {
            if names.contains(&spoke.version) {
                return Err(VersionsError::Duplicate(spoke.api_version.clone()));
            }
            names.push(spoke.version.clone());
        }
        let storage: Vec<&str> = self
            .spokes
            .iter()
            .filter(|s| s.options.is_storage())
            .map(|s| s.version.as_str())
            .collect();
        let stored = match storage.as_slice() {
            [] => hub.as_str(),
            [one] => one,
            several => return Err(VersionsError::SeveralStorageVersions(several.join(", "))),
        };
        let crds = std::iter::once(H::crd())
            .chain(self.spokes.iter().map(|s| (s.crd)()))
            .collect();
        let mut crd = merge_crds(crds, stored).map_err(VersionsError::Merge)?;
        let mut versions = std::mem::take(&mut crd.spec.versions);
        for name in &names {
            if let Some(at) = versions.iter().position(|v| &v.name == name) {
                crd.spec.versions.push(versions.remove(at));
            }
        }
        let hub_options = VersionOptions::default();
        for version in &mut crd.spec.versions {
            let options = self
                .spokes
                .iter()
                .find(|s| s.version == version.name)
                .map_or(&hub_options, |s| &s.options);
            apply(version, options, version.name == stored);
        }
        Ok(crd)
    }
}

/// Sets a version's flags.
fn apply(version: &mut CustomResourceDefinitionVersion, options: &VersionOptions, storage: bool) {
    version.served = options.is_served();
    version.storage = storage;
    version.deprecated = options.is_deprecated().then_some(true);
    version.deprecation_warning = options.deprecation_warning().map(str::to_owned);
}

/// Where the API server reaches the conversion webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookTarget {
    /// A URL (`https://HOST:PORT/convert`), for an operator run outside
    /// the cluster.
    Url(String),
    /// The operator's Service in the cluster, on `port`, at
    /// [`CONVERT_PATH`](WebhookTarget::CONVERT_PATH).
    Service {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
        /// The Service's port.
        port: i32,
    },
}

impl WebhookTarget {
    /// The path the operator serves conversion on.
    pub const CONVERT_PATH: &str = "/convert";

    /// Sets `crd`'s `spec.conversion` to the `Webhook` strategy
    /// (`conversionReviewVersions: ["v1"]`) here, trusting `ca_bundle`
    /// (PEM) for its certificate.
    pub fn set_on(&self, crd: &mut CustomResourceDefinition, ca_bundle: &[u8]) {
        let mut client = WebhookClientConfig {
            ca_bundle: Some(k8s_openapi::ByteString(ca_bundle.to_vec())),
            ..WebhookClientConfig::default()
        };
        match self {
            WebhookTarget::Url(url) => client.url = Some(url.clone()),
            WebhookTarget::Service {
                namespace,
                name,
                port,
            } => {
                client.service = Some(
                k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::ServiceReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    path: Some(Self::CONVERT_PATH.to_owned()),
                    port: Some(*port),
                },
            );
            }
        }
        crd.spec.conversion = Some(CustomResourceConversion {
            strategy: "Webhook".to_owned(),
            webhook: Some(WebhookConversion {
                client_config: Some(client),
                conversion_review_versions: vec!["v1".to_owned()],
            }),
        });
    }
}
