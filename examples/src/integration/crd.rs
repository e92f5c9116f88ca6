//! The `Integration` custom resource, in the shape of Apache Camel K's.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, ObjectMeta};
use kube::{CustomResource, Resource, ResourceExt};
use operator_fsm::FsmStatus;
use operator_fsm::dependents::attempt_name;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::support::digest;

/// The label carrying a kit's digest on its build Jobs.
pub const KIT_DIGEST_LABEL: &str = "camel.apache.org/kit-digest";

/// A Camel integration: routes and the dependencies they need, built into an
/// integration kit (an image) and run as a Deployment.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "examples.operator-fsm.io",
    version = "v1",
    kind = "Integration",
    namespaced,
    status = "IntegrationStatus",
    shortname = "it",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.fsm.state"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct IntegrationSpec {
    /// The routes, in Camel's YAML DSL.
    pub source: String,
    /// Maven dependencies the kit must contain (`camel:kafka`, ...).
    #[serde(default)]
    pub dependencies: Vec<String>,
    /// Replicas of the running integration. Not part of the kit: changing
    /// it redeploys without a rebuild.
    #[serde(default = "one")]
    pub replicas: i32,
}

fn one() -> i32 {
    1
}

/// The machine's record and the conditions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IntegrationStatus {
    /// The state machine's record (its state is the phase).
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

impl IntegrationSpec {
    /// The digest of what goes into the kit (source and dependencies, not
    /// replicas), as Camel K computes one to decide whether to rebuild.
    pub fn kit_digest(&self) -> String {
        digest(&(&self.source, &self.dependencies))[..12].to_owned()
    }
}

/// The image of the kit build Jobs.
pub const BUILDER_IMAGE: &str = "registry.local/camel-k/builder:2";

/// The kit image for `digest`: one repository of kits, each tagged with
/// its digest. A kit never changes once built, so it has a tag of its own:
/// an image without one is `latest`, which the kubelet pulls again at every
/// pod start (`imagePullPolicy: Always`), while a tag lets a node reuse the
/// kit it has (`IfNotPresent`).
pub fn kit_image(digest: &str) -> String {
    format!("registry.local/camel-k/kit:{digest}")
}

/// The base name of the build Jobs of `digest`; each attempt's Job adds
/// the attempt number ([`kit_job_name`]).
fn kit_job_base(integration: &Integration, digest: &str) -> String {
    format!("{}-kit-{digest}", integration.name_any())
}

/// The name of the build Job of `digest` for attempt `attempt`.
pub fn kit_job_name(integration: &Integration, digest: &str, attempt: u32) -> String {
    attempt_name(&kit_job_base(integration, digest), attempt)
}

/// The build Job of the kit `digest`, owned by `integration`, under its
/// base name: `Dependent::per_attempt` names each attempt's.
pub fn kit_job(integration: &Integration, digest: &str) -> Job {
    let mut meta = owned_meta(integration, &kit_job_base(integration, digest));
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .insert(KIT_DIGEST_LABEL.to_owned(), digest.to_owned());
    Job {
        metadata: meta,
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    restart_policy: Some("Never".to_owned()),
                    containers: vec![Container {
                        name: "builder".to_owned(),
                        image: Some(BUILDER_IMAGE.to_owned()),
                        args: Some(
                            std::iter::once(format!("--push={}", kit_image(digest)))
                                .chain(
                                    integration
                                        .spec
                                        .dependencies
                                        .iter()
                                        .map(|d| format!("--dependency={d}")),
                                )
                                .collect(),
                        ),
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

/// The Deployment running `image`, owned by `integration`.
pub fn integration_deployment(integration: &Integration, image: &str) -> Deployment {
    let labels = BTreeMap::from([(
        "camel.apache.org/integration".to_owned(),
        integration.name_any(),
    )]);
    Deployment {
        metadata: owned_meta(integration, &integration.name_any()),
        spec: Some(DeploymentSpec {
            replicas: Some(integration.spec.replicas),
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
                        name: "integration".to_owned(),
                        image: Some(image.to_owned()),
                        env: Some(vec![EnvVar {
                            name: "CAMEL_K_ROUTES".to_owned(),
                            value: Some(integration.spec.source.clone()),
                            ..EnvVar::default()
                        }]),
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

fn owned_meta(integration: &Integration, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: integration.namespace(),
        labels: Some(BTreeMap::from([(
            "camel.apache.org/integration".to_owned(),
            integration.name_any(),
        )])),
        owner_references: integration.controller_owner_ref(&()).map(|o| vec![o]),
        ..ObjectMeta::default()
    }
}
