//! The `Shop` custom resource.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use operator_fsm::FsmStatus;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An online shop that runs one version of its app for months and is
/// upgraded in place: the app (a Deployment) and its database schema (a
/// ConfigMap standing for it) follow `version`, one migration at a time.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "examples.operator-fsm.io",
    version = "v1",
    kind = "Shop",
    namespaced,
    status = "ShopStatus",
    printcolumn = r#"{"name":"Version","type":"integer","jsonPath":".spec.version"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.fsm.state"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ShopSpec {
    /// The version of the app the shop should run. Changing it upgrades
    /// (or downgrades) the shop: migrate the schema, then roll the app.
    pub version: u32,
    /// Whether an upgrade waits for a person's approval (`kubectl fsm
    /// signal SHOP approve`, or `reject`) before it migrates anything.
    #[serde(default)]
    pub require_approval: bool,
}

/// The machine's record and the conditions the runtime keeps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ShopStatus {
    /// The state machine's record ([`ShopState`](super::ShopState)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsm: Option<FsmStatus>,
    /// `Ready`, `Progressing`, `Degraded`, `DependentsReady`, and the
    /// others the runtime maintains.
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
