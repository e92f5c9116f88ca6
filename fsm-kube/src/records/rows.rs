//! Records of the objects of a [`Watched`] resource, read where its store
//! keeps them (through the operator CLI's [`record_view::fetch`]), decoded
//! without the machine's Rust type, with the data of sensitive states
//! hidden, and summarized as [`Row`]s.
//!
//! [`decode`] and [`Row::from_record`] are pure; [`row`] and [`rows`] read.

use fsm_core::{DecodeError, MachineGraph, RawRecord, SCHEMA_VERSION, StateRecord, Timestamp};
use kube::{Client, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::ReadError;
use super::record_view;
use super::watched::Watched;

/// Decodes `raw` by the record format alone, and hides the data of the
/// states `graph` says are sensitive (or does not know).
///
/// # Errors
/// [`DecodeError::Malformed`] (not a record) or
/// [`DecodeError::NewerSchema`].
pub fn decode(raw: &RawRecord, graph: &MachineGraph) -> Result<StateRecord, DecodeError> {
    let value = match raw {
        RawRecord::Json(value) => value.clone(),
        RawRecord::Decoded(_) => raw.as_json(),
        RawRecord::Text(text) => serde_json::from_str::<Value>(text)
            .map_err(|e| DecodeError::Malformed(e.to_string()))?,
    };
    let version = value
        .get("schemaVersion")
        .and_then(Value::as_u64)
        .ok_or_else(|| DecodeError::Malformed("missing schemaVersion".to_owned()))?;
    if version > u64::from(SCHEMA_VERSION) {
        return Err(DecodeError::NewerSchema {
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    let mut record: StateRecord =
        serde_json::from_value(value).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    record_view::redact_where(&mut record, |state| graph.hides_data_of(state));
    Ok(record)
}

/// One object's line in `get` and `watch`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// The object's name.
    pub name: String,
    /// Its namespace (`None`: cluster-scoped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The current state (`None` without a readable record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Failed attempts of the current state's handler.
    #[serde(default)]
    pub attempt: u32,
    /// When the current state was entered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entered_at: Option<Timestamp>,
    /// When the handler runs again after a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<Timestamp>,
    /// The last failure of the current state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Compensation is running.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compensating: bool,
    /// Why there is no state: no record yet, a corrupt record, records in
    /// the operator's memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl Row {
    /// The row of an object whose record is `record`.
    pub fn from_record(name: &str, namespace: Option<&str>, record: &StateRecord) -> Self {
        Row {
            name: name.to_owned(),
            namespace: namespace.map(str::to_owned),
            state: Some(record.state.clone()),
            attempt: record.attempt,
            entered_at: Some(record.entered_at),
            next_attempt_at: record.next_attempt_at,
            last_error: record.last_error.clone(),
            compensating: record.compensation.as_ref().is_some_and(|u| u.is_active()),
            problem: None,
        }
    }

    /// The row of an object without a readable record.
    pub fn without_record(name: &str, namespace: Option<&str>, problem: String) -> Self {
        Row {
            name: name.to_owned(),
            namespace: namespace.map(str::to_owned),
            state: None,
            attempt: 0,
            entered_at: None,
            next_attempt_at: None,
            last_error: None,
            compensating: false,
            problem: Some(problem),
        }
    }
}

/// The record of object `name`, decoded, and where it was read.
///
/// # Errors
/// As [`record_view::fetch`]; a record that does not decode is
/// [`ReadError::CorruptRecord`].
pub async fn record(
    client: &Client,
    target: &Watched,
    namespace: Option<&str>,
    name: &str,
) -> Result<(StateRecord, record_view::Location), ReadError> {
    let (raw, location) = record_view::fetch(
        client,
        &target.resource,
        &target.machine.graph.machine,
        target.machine.store,
        namespace,
        name,
    )
    .await?;
    decoded(&raw, location, target)
}

/// The record of `object`, already read (the web view's object page
/// reads the object once for both), decoded.
///
/// # Errors
/// As [`record`], but for [`ReadError::NotFound`].
pub async fn record_of(
    client: &Client,
    target: &Watched,
    object: &kube::api::DynamicObject,
) -> Result<(StateRecord, record_view::Location), ReadError> {
    let location = record_view::location(
        client,
        &target.resource,
        &target.machine.graph.machine,
        target.machine.store,
        object.namespace().as_deref(),
        &object.name_any(),
    )?;
    let (raw, location) = record_view::read_record(
        client,
        &target.resource,
        &target.machine.graph.machine,
        target.machine.store,
        location,
        object,
    )
    .await?;
    decoded(&raw, location, target)
}

/// `raw`, read at `location`, decoded for `target`'s machine; a record
/// that does not decode is [`ReadError::CorruptRecord`].
fn decoded(
    raw: &RawRecord,
    location: record_view::Location,
    target: &Watched,
) -> Result<(StateRecord, record_view::Location), ReadError> {
    match decode(raw, &target.machine.graph) {
        Ok(record) => Ok((record, location)),
        Err(error) => Err(ReadError::CorruptRecord {
            location: Box::new(location),
            error,
        }),
    }
}

/// The row of object `name`; `None` when the object is gone.
///
/// # Errors
/// The API's errors; a missing or unreadable record is a row with a
/// [`problem`](Row::problem).
pub async fn row(
    client: &Client,
    target: &Watched,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<Row>, ReadError> {
    let namespace = namespace.filter(|_| target.resource.namespaced);
    match record(client, target, namespace, name).await {
        Ok((record, _)) => Ok(Some(Row::from_record(name, namespace, &record))),
        Err(ReadError::NotFound(_)) => Ok(None),
        Err(ReadError::NoRecord(_)) => Ok(Some(Row::without_record(
            name,
            namespace,
            "no record yet".to_owned(),
        ))),
        Err(ReadError::CorruptRecord { error, .. }) => Ok(Some(Row::without_record(
            name,
            namespace,
            format!("corrupt record: {error}"),
        ))),
        Err(error @ (ReadError::MemoryStore | ReadError::ClusterScopedObjectStore)) => Ok(Some(
            Row::without_record(name, namespace, error.to_string()),
        )),
        Err(error) => Err(error),
    }
}

/// The rows of the objects in `namespace` (`None`: every namespace), by
/// namespace and name.
///
/// # Errors
/// The API's errors.
pub async fn rows(
    client: &Client,
    target: &Watched,
    namespace: Option<&str>,
) -> Result<Vec<Row>, ReadError> {
    let objects = target
        .api(client, namespace)
        .list(&Default::default())
        .await
        .map_err(ReadError::Kube)?;
    let mut rows = Vec::new();
    for object in &objects.items {
        let ns = object.namespace();
        if let Some(row) = row(client, target, ns.as_deref(), &object.name_any()).await? {
            rows.push(row);
        }
    }
    rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(rows)
}

/// A row with its kind, as the web view's `/api/objects` and its events
/// send it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindRow {
    /// The resource's kind.
    pub kind: String,
    /// The row.
    #[serde(flatten)]
    pub row: Row,
}

#[cfg(test)]
mod tests {
    use fsm_core::{Machine, StateMeta};
    use serde_json::json;

    use super::*;

    static STATES: [StateMeta; 3] = [
        StateMeta::new("Pending")
            .initial()
            .with_handler()
            .with_data()
            .next(&["Secret"]),
        StateMeta::new("Secret")
            .with_handler()
            .with_data()
            .sensitive()
            .next(&["Done"]),
        StateMeta::new("Done").final_state(),
    ];

    fn graph() -> MachineGraph {
        Machine::new("Job", &STATES).graph()
    }

    fn stored(state: &str) -> Value {
        json!({
            "schemaVersion": 1,
            "state": state,
            "data": {"token": "hunter2"},
            "enteredAt": "2026-01-01T00:00:00Z",
            "attempt": 2,
            "lastError": "refused",
            "nextAttemptAt": "2026-01-01T00:00:30Z",
        })
    }

    #[test]
    fn a_record_decodes_without_the_machines_type() {
        let record = decode(&RawRecord::Json(stored("Pending")), &graph()).unwrap();
        assert_eq!(record.state, "Pending");
        assert_eq!(record.data, Some(json!({"token": "hunter2"})));
        let row = Row::from_record("j1", Some("ns"), &record);
        assert_eq!(row.state.as_deref(), Some("Pending"));
        assert_eq!(row.attempt, 2);
        assert_eq!(row.last_error.as_deref(), Some("refused"));
    }

    #[test]
    fn sensitive_and_unknown_states_lose_their_data() {
        for state in ["Secret", "RenamedLater"] {
            let text = RawRecord::Text(stored(state).to_string());
            let record = decode(&text, &graph()).unwrap();
            assert_eq!(
                record.data,
                Some(Value::String(record_view::REDACTED.to_owned())),
                "{state}"
            );
        }
    }

    #[test]
    fn newer_and_malformed_records_are_refused() {
        let mut newer = stored("Pending");
        newer["schemaVersion"] = json!(SCHEMA_VERSION + 1);
        assert!(matches!(
            decode(&RawRecord::Json(newer), &graph()),
            Err(DecodeError::NewerSchema { .. })
        ));
        assert!(matches!(
            decode(&RawRecord::Text("{".into()), &graph()),
            Err(DecodeError::Malformed(_))
        ));
    }
}
