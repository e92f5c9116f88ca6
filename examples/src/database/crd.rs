//! The `Database` custom resource and the connection Secret it owns.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::{CustomResource, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A database provisioned from the cloud API, seeded, with its connection
/// details published in the Secret `<name>-connection`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "examples.operator-fsm.io",
    version = "v1",
    kind = "Database",
    namespaced,
    status = "DatabaseStatus",
    shortname = "db"
)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseSpec {
    /// `postgres` or `mysql`.
    pub engine: String,
    /// `small`, `medium` or `large`.
    pub size: String,
    /// SQL run once the instance is available.
    #[serde(default)]
    #[schemars(transform = without_default)]
    pub seed: String,
}

/// Drops the `default: ""` schemars derives from `#[serde(default)]`:
/// Kubernetes 1.20 refuses an empty-string default in a CRD schema (it reads
/// it as null), later versions accept it. Nothing is lost: the field stays
/// optional, and an absent seed reads as empty all the same.
fn without_default(schema: &mut schemars::Schema) {
    schema.remove("default");
}

/// The conditions. The machine's record is not here: this operator keeps
/// it in a Secret beside the Database ([`SecretStore`](operator_fsm::SecretStore)),
/// because one of its states holds the database's password.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DatabaseStatus {
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

/// The engines the cloud offers.
pub const ENGINES: [&str; 2] = ["postgres", "mysql"];
/// The sizes the cloud offers.
pub const SIZES: [&str; 3] = ["small", "medium", "large"];

/// The name of the Secret holding the connection details.
pub fn connection_secret_name(database: &Database) -> String {
    format!("{}-connection", database.name_any())
}

/// The connection Secret, owned by `database`.
pub fn connection_secret(
    database: &Database,
    endpoint: &str,
    instance_id: &str,
    username: &str,
    password: &str,
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(connection_secret_name(database)),
            namespace: database.namespace(),
            owner_references: database.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        string_data: Some(BTreeMap::from([
            ("endpoint".to_owned(), endpoint.to_owned()),
            ("instance".to_owned(), instance_id.to_owned()),
            ("username".to_owned(), username.to_owned()),
            ("password".to_owned(), password.to_owned()),
        ])),
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    }
}
