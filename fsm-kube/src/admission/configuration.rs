//! The `ValidatingWebhookConfiguration` that sends the resource's writes
//! to the operator's admission webhook.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ServiceReference, ValidatingWebhook, ValidatingWebhookConfiguration,
    WebhookClientConfig,
};
use kube::api::ObjectMeta;

use crate::records::ResourceInfo;

/// The path the operator serves its admission webhook at.
pub const VALIDATE_PATH: &str = "/validate";

/// Where the API server reaches the webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdmissionClient {
    /// The operator's Service (`namespace`/`name`, port 443), in the
    /// cluster.
    Service {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
    },
    /// A URL (an operator run outside the cluster).
    Url(String),
}

/// The configuration sending creates, updates (of the object and its
/// status) and deletes of `resource` to the webhook at `client`, at
/// `resource`'s version (a write at another version is converted to it
/// first: `matchPolicy: Equivalent`), trusted
/// through `ca_bundle` (PEM). Calls fail closed (`failurePolicy: Fail`)
/// within 10 s; the webhook has no side effects.
///
/// ```
/// use fsm_kube::{AdmissionClient, validating_webhook_configuration};
/// use fsm_kube::records::ResourceInfo;
///
/// let resource = ResourceInfo {
///     group: "example.io".into(), version: "v1".into(), kind: "Database".into(),
///     plural: "databases".into(), namespaced: true,
/// };
/// let client = AdmissionClient::Service { namespace: "ops".into(), name: "db-operator".into() };
/// let config = validating_webhook_configuration(&resource, &client, b"-----BEGIN CERTIFICATE-----\n");
/// let webhook = &config.webhooks.unwrap()[0];
/// assert_eq!(webhook.name, "databases.example.io.operator-fsm.io");
/// assert_eq!(webhook.client_config.service.as_ref().unwrap().path.as_deref(), Some("/validate"));
/// ```
pub fn validating_webhook_configuration(
    resource: &ResourceInfo,
    client: &AdmissionClient,
    ca_bundle: &[u8],
) -> ValidatingWebhookConfiguration {
    let name = format!("{}.{}.operator-fsm.io", resource.plural, resource.group);
    let mut client_config = WebhookClientConfig {
        ca_bundle: Some(ByteString(ca_bundle.to_vec())),
        ..WebhookClientConfig::default()
    };
    match client {
        AdmissionClient::Service { namespace, name } => {
            client_config.service = Some(ServiceReference {
                namespace: namespace.clone(),
                name: name.clone(),
                path: Some(VALIDATE_PATH.to_owned()),
                port: Some(443),
            });
        }
        AdmissionClient::Url(url) => client_config.url = Some(url.clone()),
    }
    let scope = if resource.namespaced {
        "Namespaced"
    } else {
        "Cluster"
    };
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        },
        webhooks: Some(vec![ValidatingWebhook {
            name,
            admission_review_versions: vec!["v1".to_owned()],
            side_effects: "None".to_owned(),
            failure_policy: Some("Fail".to_owned()),
            timeout_seconds: Some(10),
            match_policy: Some("Equivalent".to_owned()),
            client_config,
            rules: Some(vec![RuleWithOperations {
                api_groups: Some(vec![resource.group.clone()]),
                // The machine's version alone: with `matchPolicy:
                // Equivalent` the API server converts a write at another
                // version to it first, so the rules' paths (the hub's
                // fields) always apply.
                api_versions: Some(vec![resource.version.clone()]),
                operations: Some(["CREATE", "UPDATE", "DELETE"].map(str::to_owned).to_vec()),
                resources: Some(vec![
                    resource.plural.clone(),
                    format!("{}/status", resource.plural),
                ]),
                scope: Some(scope.to_owned()),
            }]),
            ..ValidatingWebhook::default()
        }]),
    }
}
