//! The benchmark's custom resource and the API work each step does, shared
//! by the Rust operators (the kopf operator does the same in Python).

use std::collections::BTreeMap;

use fsm_kube::FsmStatus;
use fsm_kube::dependents::{Dependent, DependentKind, DesiredSet, SetError};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, PodSpec, PodTemplateSpec, Secret,
    SecretVolumeSource, Service, ServicePort, ServiceSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{CustomResource, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The namespace every benchmark object lives in.
pub const NAMESPACE: &str = "default";
/// The annotation the fourth step puts on the Deployment.
pub const ANNOTATION: &str = "bench.operator-fsm.io/configured";
/// The phases of the workflow, in order; the last one is the resting state.
pub const PHASES: [&str; 5] = [
    "CreatingConfig",
    "CreatingDeployment",
    "WaitingReady",
    "Annotating",
    "Ready",
];
/// Committed transitions per object: the phase changes of the workflow.
pub const TRANSITIONS_PER_OBJECT: u64 = PHASES.len() as u64 - 1;

/// The spec: what the Deployment runs.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "bench.operator-fsm.io",
    version = "v1",
    kind = "BenchApp",
    namespaced,
    status = "BenchAppStatus"
)]
pub struct BenchAppSpec {
    /// The Deployment's image.
    pub image: String,
    /// The Deployment's replicas.
    pub replicas: i32,
}

/// The status: operator-fsm keeps its record in `fsm`, the hand-written and
/// kopf operators their `phase`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BenchAppStatus {
    /// operator-fsm's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsm: Option<FsmStatus>,
    /// operator-fsm's conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// The hand-written and kopf operators' phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

impl BenchApp {
    /// Whether the object rests in its ready state, whichever operator ran
    /// it (the dependents workload's: `DependentsReady` is `True`).
    #[must_use]
    pub fn is_ready(&self) -> bool {
        let Some(status) = &self.status else {
            return false;
        };
        status.phase.as_deref() == Some("Ready")
            || status
                .fsm
                .as_ref()
                .and_then(FsmStatus::state_name)
                .as_deref()
                == Some("Ready")
            || status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "DependentsReady" && c.status == "True")
    }
}

/// The dependents workload's four dependents of `app`: a ConfigMap and a
/// Secret, a Deployment mounting both once they exist, and a Service.
///
/// # Errors
/// None for an app read from the server ([`SetError`] for a malformed set).
pub fn dependents(app: &BenchApp) -> Result<DesiredSet, SetError> {
    let objects = dependent_objects(app);
    DesiredSet::builder()
        .dependent(Dependent::new("config", &objects.config))
        .dependent(Dependent::new("secret", &objects.secret))
        .dependent(Dependent::new("app", &objects.deployment).depends_on(["config", "secret"]))
        .dependent(Dependent::new("service", &objects.service))
        .build()
}

/// The four objects of the dependents workload, as [`dependents`] desires
/// them (names, no owner reference or labels: each operator adds its own).
#[derive(Clone, Debug)]
pub struct DependentObjects {
    /// `<app>-config`, the app's image.
    pub config: ConfigMap,
    /// `<app>-secret`, a token.
    pub secret: Secret,
    /// `<app>`, mounting both.
    pub deployment: Deployment,
    /// `<app>`, port 80.
    pub service: Service,
}

/// The four objects of `app`'s dependents workload.
#[must_use]
pub fn dependent_objects(app: &BenchApp) -> DependentObjects {
    let name = app.name_any();
    let meta = |name: String| ObjectMeta {
        name: Some(name),
        ..ObjectMeta::default()
    };
    let config = ConfigMap {
        metadata: meta(config_map_name(app)),
        data: Some(BTreeMap::from([(
            "image".to_owned(),
            app.spec.image.clone(),
        )])),
        ..ConfigMap::default()
    };
    let secret = Secret {
        metadata: meta(format!("{name}-secret")),
        string_data: None,
        data: Some(BTreeMap::from([(
            "token".to_owned(),
            ByteString(name.clone().into_bytes()),
        )])),
        ..Secret::default()
    };
    let labels = BTreeMap::from([("app".to_owned(), name.clone())]);
    let deployment = Deployment {
        metadata: meta(name.clone()),
        spec: Some(DeploymentSpec {
            replicas: Some(app.spec.replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".into(),
                        image: Some(app.spec.image.clone()),
                        ..Container::default()
                    }],
                    volumes: Some(vec![
                        Volume {
                            name: "config".into(),
                            config_map: Some(ConfigMapVolumeSource {
                                name: config_map_name(app),
                                ..ConfigMapVolumeSource::default()
                            }),
                            ..Volume::default()
                        },
                        Volume {
                            name: "secret".into(),
                            secret: Some(SecretVolumeSource {
                                secret_name: Some(format!("{name}-secret")),
                                ..SecretVolumeSource::default()
                            }),
                            ..Volume::default()
                        },
                    ]),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    };
    let service = Service {
        metadata: meta(name.clone()),
        spec: Some(ServiceSpec {
            selector: Some(labels),
            ports: Some(vec![ServicePort {
                port: 80,
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    };
    DependentObjects {
        config,
        secret,
        deployment,
        service,
    }
}

/// The kinds of [`dependents`].
#[must_use]
pub fn dependent_kinds() -> [DependentKind; 4] {
    [
        DependentKind::of::<ConfigMap>(),
        DependentKind::of::<Secret>(),
        DependentKind::of::<Deployment>(),
        DependentKind::of::<Service>(),
    ]
}

/// The name of the ConfigMap of `app`.
#[must_use]
pub fn config_map_name(app: &BenchApp) -> String {
    format!("{}-config", app.name_any())
}

/// Step 1: creates the ConfigMap (an existing one is fine: steps are
/// idempotent).
///
/// # Errors
/// The API's error.
pub async fn create_config_map(client: &kube::Client, app: &BenchApp) -> Result<(), kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(config_map_name(app)),
            owner_references: app.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "image".to_owned(),
            app.spec.image.clone(),
        )])),
        ..ConfigMap::default()
    };
    ignore_exists(api.create(&PostParams::default(), &cm).await)
}

/// Step 2: creates the Deployment (an existing one is fine).
///
/// # Errors
/// The API's error.
pub async fn create_deployment(client: &kube::Client, app: &BenchApp) -> Result<(), kube::Error> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let name = app.name_any();
    let labels = BTreeMap::from([("app".to_owned(), name.clone())]);
    let deployment = Deployment {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(labels.clone()),
            owner_references: app.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(app.spec.replicas),
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
                        name: "app".into(),
                        image: Some(app.spec.image.clone()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    };
    ignore_exists(api.create(&PostParams::default(), &deployment).await)
}

/// Step 3: whether the Deployment has rolled out (one GET).
///
/// # Errors
/// The API's error.
pub async fn deployment_ready(client: &kube::Client, app: &BenchApp) -> Result<bool, kube::Error> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    Ok(api
        .get_opt(&app.name_any())
        .await?
        .is_some_and(|d| rolled_out(&d)))
}

/// Whether `deployment` has rolled out its current generation: observed,
/// and every replica updated and ready (what a hand-written operator
/// checks; operator-fsm's dependents have it built in).
fn rolled_out(deployment: &Deployment) -> bool {
    let generation = deployment.metadata.generation.unwrap_or(0);
    let want = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let Some(status) = deployment.status.as_ref() else {
        return false;
    };
    status.observed_generation.unwrap_or(0) >= generation
        && status.updated_replicas.unwrap_or(0) >= want
        && status.ready_replicas.unwrap_or(0) >= want
}

/// Step 4: patches the annotation onto the Deployment.
///
/// # Errors
/// The API's error.
pub async fn annotate(client: &kube::Client, app: &BenchApp) -> Result<(), kube::Error> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let patch = serde_json::json!({"metadata": {"annotations": {ANNOTATION: "true"}}});
    api.patch(
        &app.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map(drop)
}

fn ignore_exists<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(()),
        Err(e) => Err(e),
    }
}

/// A client from the kubeconfig in `KUBECONFIG`, as an operator in a
/// cluster-less test would build it.
///
/// # Errors
/// The kubeconfig's or the client's error.
pub async fn client() -> Result<kube::Client, kube::Error> {
    kube::Client::try_default().await
}
