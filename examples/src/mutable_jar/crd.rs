//! The `Keycloak` custom resource, and the Job and Deployment it owns.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, ObjectMeta};
use kube::{CustomResource, Resource, ResourceExt};
use operator_fsm::FsmStatus;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::support::digest;

/// A Keycloak server whose image is augmented with provider jars before it
/// is rolled out.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "examples.operator-fsm.io",
    version = "v1",
    kind = "Keycloak",
    namespaced,
    status = "KeycloakStatus",
    shortname = "kc",
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.fsm.state"}"#,
    printcolumn = r#"{"name":"Image","type":"string","jsonPath":".spec.image"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct KeycloakSpec {
    /// The Keycloak distribution to start from.
    pub image: String,
    /// Provider jars baked into the augmented image.
    #[serde(default)]
    pub extensions: Vec<String>,
    /// Server replicas.
    #[serde(default = "one")]
    pub replicas: i32,
}

fn one() -> i32 {
    1
}

/// The machine's record and the conditions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KeycloakStatus {
    /// The state machine's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsm: Option<FsmStatus>,
    /// `Ready`, `Progressing`, `Degraded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// The generation the machine has acted on, at the top of the status
    /// where kstatus (Flux, Argo CD, `kubectl wait`) reads it.
    #[serde(
        default,
        rename = "observedGeneration",
        skip_serializing_if = "Option::is_none"
    )]
    pub observed_generation: Option<i64>,
}

/// What the augmentation of one spec produces: a build Job, named after the
/// spec's digest, that pushes one image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildPlan {
    /// The build Job's name.
    pub job: String,
    /// The augmented image the Job pushes.
    pub image: String,
}

impl BuildPlan {
    /// The plan for `keycloak`'s current spec, pushing to `registry`.
    ///
    /// The same spec always gives the same Job and image, so a build is
    /// never repeated for a spec already built.
    pub fn for_keycloak(keycloak: &Keycloak, registry: &str) -> Self {
        let hash = digest(&(&keycloak.spec.image, &keycloak.spec.extensions));
        let short = &hash[..10];
        let name = keycloak.name_any();
        BuildPlan {
            job: format!("{name}-augment-{short}"),
            image: format!("{registry}/{name}-augmented:{short}"),
        }
    }

    /// The build Job, owned by `keycloak`.
    pub fn job_object(&self, keycloak: &Keycloak) -> Job {
        let mut args = vec!["build".to_owned(), format!("--push={}", self.image)];
        args.extend(
            keycloak
                .spec
                .extensions
                .iter()
                .map(|e| format!("--provider={e}")),
        );
        Job {
            metadata: owned_meta(keycloak, &self.job),
            spec: Some(JobSpec {
                backoff_limit: Some(0),
                template: PodTemplateSpec {
                    metadata: None,
                    spec: Some(PodSpec {
                        restart_policy: Some("Never".to_owned()),
                        containers: vec![Container {
                            name: "augment".to_owned(),
                            image: Some(keycloak.spec.image.clone()),
                            args: Some(args),
                            ..Container::default()
                        }],
                        ..PodSpec::default()
                    }),
                },
                ..JobSpec::default()
            }),
            status: None,
        }
    }
}

/// The label selecting one Keycloak's pods.
pub fn selector_labels(keycloak: &Keycloak) -> BTreeMap<String, String> {
    BTreeMap::from([("app.kubernetes.io/instance".to_owned(), keycloak.name_any())])
}

/// The server Deployment running `image`, owned by `keycloak`.
pub fn deployment(keycloak: &Keycloak, image: &str) -> Deployment {
    let labels = selector_labels(keycloak);
    Deployment {
        metadata: owned_meta(keycloak, &keycloak.name_any()),
        spec: Some(DeploymentSpec {
            replicas: Some(keycloak.spec.replicas),
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
                        name: "keycloak".to_owned(),
                        image: Some(image.to_owned()),
                        args: Some(vec!["start".to_owned(), "--optimized".to_owned()]),
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

/// The image a Deployment's first container runs.
pub fn running_image(deployment: &Deployment) -> Option<&str> {
    deployment
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .image
        .as_deref()
}

fn owned_meta(keycloak: &Keycloak, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: keycloak.namespace(),
        labels: Some(selector_labels(keycloak)),
        owner_references: keycloak.controller_owner_ref(&()).map(|o| vec![o]),
        ..ObjectMeta::default()
    }
}
