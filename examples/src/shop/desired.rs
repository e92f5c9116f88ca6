//! What a `Shop` should have at a given point of an upgrade: its schema
//! and its app, as one desired set.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::ResourceExt;
use operator_fsm::dependents::{Dependent, DependentKind, DesiredSet, SetError};

use super::Shop;

/// Where the shop's images come from: version `N` runs
/// `example.com/shop:vN`.
pub const IMAGE_REPOSITORY: &str = "example.com/shop";

/// The annotation on the app's Deployment saying which version it runs;
/// what `Provisioning` adopts and `Approved` reads.
pub const VERSION_ANNOTATION: &str = "examples.operator-fsm.io/shop-version";

/// The set of `shop` with its schema at version `schema` and its app at
/// version `app`: a ConfigMap `<name>-schema` standing for the database
/// schema, and the Deployment `<name>` running `example.com/shop:v<app>`,
/// applied only once the schema is there.
///
/// Every state converges the whole set (a dependent left out would be
/// pruned): `Serving { version }` wants `(version, version)`, `Migrating`
/// moves the schema first `(to, from)`, `Rolling` the app `(to, to)`, and
/// the compensations go back the same way.
///
/// ```
/// use examples::shop::{Shop, ShopSpec, desired};
///
/// let shop = Shop::new("corner", ShopSpec { version: 2, require_approval: false });
/// let set = desired(&shop, 2, 1).unwrap();
/// assert_eq!(set.keys().collect::<Vec<_>>(), ["schema", "app"]);
/// assert_eq!(set.get("app").unwrap().dependencies(), ["schema"]);
/// ```
///
/// # Errors
/// None for a shop read from the server; [`SetError`] if the set were
/// malformed.
pub fn desired(shop: &Shop, schema: u32, app: u32) -> Result<DesiredSet, SetError> {
    DesiredSet::builder()
        .dependent(Dependent::new("schema", &schema_config_map(shop, schema)))
        .dependent(Dependent::new("app", &app_deployment(shop, app)).depends_on(["schema"]))
        .build()
}

/// The kinds of [`desired`], for the controller's watches.
pub fn kinds() -> [DependentKind; 2] {
    [
        DependentKind::of::<ConfigMap>(),
        DependentKind::of::<Deployment>(),
    ]
}

/// The name of the ConfigMap standing for the shop's schema:
/// `<name>-schema`.
pub fn schema_name(shop: &Shop) -> String {
    format!("{}-schema", shop.name_any())
}

/// The image of `version`.
pub fn image(version: u32) -> String {
    format!("{IMAGE_REPOSITORY}:v{version}")
}

fn schema_config_map(shop: &Shop, version: u32) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(schema_name(shop)),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "version".to_owned(),
            version.to_string(),
        )])),
        ..ConfigMap::default()
    }
}

fn app_deployment(shop: &Shop, version: u32) -> Deployment {
    let name = shop.name_any();
    let labels = BTreeMap::from([("app".to_owned(), name.clone())]);
    Deployment {
        metadata: ObjectMeta {
            name: Some(name),
            annotations: Some(BTreeMap::from([(
                VERSION_ANNOTATION.to_owned(),
                version.to_string(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "shop".to_owned(),
                        image: Some(image(version)),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}
