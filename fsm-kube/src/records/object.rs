//! What an object's page and `kubectl fsm describe` show besides its
//! record: its conditions and its recent events.
//!
//! [`conditions`] and [`last_seen`] are pure; [`events`] reads.

use fsm_core::Timestamp;
use k8s_openapi::api::events::v1::Event;
use kube::api::DynamicObject;
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

/// A condition of `.status.conditions`, as strings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Condition {
    /// `Ready`, `Progressing`, `Degraded`, or the operator's own.
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Why, in CamelCase.
    pub reason: String,
    /// For people.
    pub message: String,
}

/// The conditions in `object`'s `.status.conditions`.
pub fn conditions(object: &DynamicObject) -> Vec<Condition> {
    let field = |c: &Value, name: &str| {
        c.get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    object
        .data
        .get("status")
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| Condition {
            type_: field(c, "type"),
            status: field(c, "status"),
            reason: field(c, "reason"),
            message: field(c, "message"),
        })
        .collect()
}

/// When `event` last happened: its series' last observation, its event
/// time, its deprecated last timestamp, else its creation.
pub fn last_seen(event: &Event) -> Option<Timestamp> {
    event
        .series
        .as_ref()
        .map(|s| s.last_observed_time.0)
        .or(event.event_time.as_ref().map(|t| t.0))
        .or(event.deprecated_last_timestamp.as_ref().map(|t| t.0))
        .or(event.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// The `events.k8s.io/v1` Events about `object` (by UID), oldest first,
/// the latest `limit` of them.
///
/// # Errors
/// The API's.
pub async fn events(
    client: &Client,
    object: &DynamicObject,
    limit: usize,
) -> Result<Vec<Event>, kube::Error> {
    let namespace = object.namespace().unwrap_or_else(|| "default".to_owned());
    let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
    let uid = object.uid();
    let mut found: Vec<Event> = api
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.as_ref()) == uid.as_ref())
        .collect();
    found.sort_by_key(last_seen);
    let skip = found.len().saturating_sub(limit);
    Ok(found.split_off(skip))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn conditions_are_read_from_the_status() {
        let object = DynamicObject {
            types: None,
            metadata: Default::default(),
            data: json!({"status": {"conditions": [
                {"type": "Ready", "status": "False", "reason": "Retrying", "message": "m"}
            ]}}),
        };
        assert_eq!(
            conditions(&object),
            [Condition {
                type_: "Ready".into(),
                status: "False".into(),
                reason: "Retrying".into(),
                message: "m".into(),
            }]
        );
        let bare = DynamicObject {
            data: json!({}),
            ..object
        };
        assert!(conditions(&bare).is_empty());
    }
}
