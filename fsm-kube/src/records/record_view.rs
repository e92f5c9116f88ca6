//! `status NAME`: an object's record, read from where its store keeps it,
//! decoded against the machine and shown to a person (or as JSON).
//!
//! [`fetch`] does the I/O; [`decode`], [`render_text`] and [`render_json`]
//! are pure.

use std::fmt::Write as _;

use fsm_core::text::{human_duration, push_line};
use fsm_core::{DecodeError, Fsm, Machine, RawRecord, StateRecord, Timestamp};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Api, Client};
use serde_json::Value;

use super::ReadError;
use super::names::path_segment;
use super::resource::ResourceInfo;
use crate::store::{
    RecordObjectKind, RecordPlace, StoreKind, belongs_to, legacy_belongs_to,
    legacy_record_object_name, record_object_name,
};

/// What shows instead of a sensitive state's data.
pub const REDACTED: &str = "<redacted: sensitive state>";

/// Where a record was read from, for messages.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Location {
    /// The object's kind, e.g. `Database`.
    pub kind: String,
    /// The object's namespace (`None`: cluster-scoped).
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
    /// Where the store keeps the record, e.g. `.status.fsm` or
    /// `ConfigMap default/db.database.fsm-3c5e8d1f0a`.
    pub record: String,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name)?,
            None => write!(f, "{} {}", self.kind, self.name)?,
        }
        write!(f, " (record in {})", self.record)
    }
}

/// Reads the raw record of object `name` (in `namespace`, for a namespaced
/// resource) from where `store` keeps it: `.status.fsm` of the object for
/// the status store; for the others, the `data.record` key of the
/// ConfigMap or Secret named by [`record_object_name`] (for machine
/// `machine`) when it belongs to the object (its owner UID is the
/// object's), else of the legacy `<name>-fsm` when its owner reference is
/// the object's, as the stores read them. A record object of an earlier
/// object of the same name is no record.
///
/// # Errors
/// [`ReadError::NotFound`] when the object does not exist, [`ReadError::NoRecord`]
/// when it has no record yet, [`ReadError::MemoryStore`] for the ephemeral
/// store (its records live in the operator's memory), [`ReadError::Kube`] for
/// the API's other errors.
pub async fn fetch(
    client: &Client,
    resource: &ResourceInfo,
    machine: &str,
    store: StoreKind,
    namespace: Option<&str>,
    name: &str,
) -> Result<(RawRecord, Location), ReadError> {
    let location = location(client, resource, machine, store, namespace, name)?;
    let gvk = GroupVersionKind::gvk(&resource.group, &resource.version, &resource.kind);
    let api_resource = ApiResource::from_gvk_with_plural(&gvk, &resource.plural);
    let api: Api<DynamicObject> = match &location.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), &path_segment(ns), &api_resource),
        None => Api::all_with(client.clone(), &api_resource),
    };
    let Some(object) = api
        .get_opt(&path_segment(name))
        .await
        .map_err(ReadError::Kube)?
    else {
        return Err(ReadError::NotFound(Box::new(location)));
    };
    read_record(client, resource, machine, store, location, &object).await
}

/// Where the record of object `name` is kept (`namespace`, else the
/// client's, for a namespaced resource), without reading anything.
///
/// # Errors
/// [`ReadError::MemoryStore`] for the ephemeral store,
/// [`ReadError::ClusterScopedObjectStore`] for a record object of a
/// cluster-scoped resource.
pub fn location(
    client: &Client,
    resource: &ResourceInfo,
    machine: &str,
    store: StoreKind,
    namespace: Option<&str>,
    name: &str,
) -> Result<Location, ReadError> {
    let namespace = resource.namespaced.then(|| {
        namespace
            .map(str::to_owned)
            .unwrap_or_else(|| client.default_namespace().to_owned())
    });
    let record_object = record_object_name(name, &resource.group, &resource.kind, machine);
    let record = match (store.place(), &namespace) {
        (RecordPlace::Status, _) => ".status.fsm".to_owned(),
        (RecordPlace::Object(kind), Some(ns)) => format!("{} {ns}/{record_object}", kind.kind()),
        (RecordPlace::Object(_), None) => return Err(ReadError::ClusterScopedObjectStore),
        (RecordPlace::Memory, _) => return Err(ReadError::MemoryStore),
    };
    Ok(Location {
        kind: resource.kind.clone(),
        namespace,
        name: name.to_owned(),
        record,
    })
}

/// The raw record of `object` (already read), kept where `location`
/// ([`location`]) says: its `.status.fsm`, or its record object, read as
/// [`fetch`] does.
///
/// # Errors
/// As [`fetch`], but for [`ReadError::NotFound`].
pub async fn read_record(
    client: &Client,
    resource: &ResourceInfo,
    machine: &str,
    store: StoreKind,
    mut location: Location,
    object: &DynamicObject,
) -> Result<(RawRecord, Location), ReadError> {
    let owner = Owner {
        uid: object.metadata.uid.clone().unwrap_or_default(),
        group: &resource.group,
        kind: &resource.kind,
    };
    let namespace = location.namespace.clone();
    let name = location.name.clone();
    let record_object = record_object_name(&name, &resource.group, &resource.kind, machine);
    let found = match (store.place(), &namespace) {
        (RecordPlace::Status, _) => object
            .data
            .get("status")
            .and_then(|s| s.get("fsm"))
            .filter(|v| !v.is_null())
            .map(|value| (RawRecord::Json(value.clone()), None)),
        (RecordPlace::Object(kind), Some(ns)) => {
            record_from_object(client, kind, ns, &record_object, &name, &owner).await?
        }
        (RecordPlace::Object(_), None) | (RecordPlace::Memory, _) => None,
    };
    match found {
        Some((raw, read_from)) => {
            if let (Some(read_from), Some(ns), RecordPlace::Object(kind)) =
                (read_from, &namespace, store.place())
            {
                location.record = format!("{} {ns}/{read_from}", kind.kind());
            }
            Ok((raw, location))
        }
        None => Err(ReadError::NoRecord(Box::new(location))),
    }
}

/// The object whose record is read.
struct Owner<'a> {
    uid: String,
    group: &'a str,
    kind: &'a str,
}

/// The record of object `name` in its record object `record_object` (of
/// `kind`), else in its legacy record object, with the name of the object
/// it was read from; `None` when neither holds a record of `owner`.
async fn record_from_object(
    client: &Client,
    kind: RecordObjectKind,
    namespace: &str,
    record_object: &str,
    name: &str,
    owner: &Owner<'_>,
) -> Result<Option<(RawRecord, Option<String>)>, ReadError> {
    let api = kind.api(client.clone(), Some(&path_segment(namespace)));
    let own = api
        .get_opt(&path_segment(record_object))
        .await
        .map_err(ReadError::Kube)?
        .filter(|o| belongs_to(&o.metadata, &owner.uid));
    let object = match own {
        Some(object) => Some(object),
        None => api
            .get_opt(&path_segment(&legacy_record_object_name(name)))
            .await
            .map_err(ReadError::Kube)?
            .filter(|o| legacy_belongs_to(&o.metadata, &owner.uid, owner.group, owner.kind)),
    };
    let Some(object) = object else {
        return Ok(None);
    };
    Ok(kind
        .raw_record(&object)
        .map(|raw| (raw, object.metadata.name.clone())))
}

/// Decodes `raw` for machine `F`, hiding the data of sensitive states.
///
/// # Errors
/// The [`DecodeError`] the runtime would report (a corrupt record).
pub fn decode<F: Fsm>(raw: &RawRecord) -> Result<StateRecord, DecodeError> {
    let mut record = raw.decode::<F>()?;
    redact(F::machine(), &mut record);
    Ok(record)
}

/// Replaces the data of sensitive states (current and in the compensation
/// trail) with [`REDACTED`].
pub fn redact(machine: &Machine, record: &mut StateRecord) {
    redact_where(record, |state| {
        machine.state(state).is_some_and(|s| s.is_sensitive())
    });
}

/// Replaces the data of the states for which `sensitive` is true (current
/// and in the compensation trail) with [`REDACTED`]: [`redact`] for a
/// tool that knows the machine only from its published graph
/// (`fsm_core::MachineGraph::hides_data_of`).
pub fn redact_where(record: &mut StateRecord, sensitive: impl Fn(&str) -> bool) {
    if sensitive(&record.state) && record.data.is_some() {
        record.data = Some(Value::String(REDACTED.to_owned()));
    }
    for entry in &mut record.trail {
        if sensitive(&entry.state) && entry.data.is_some() {
            entry.data = Some(Value::String(REDACTED.to_owned()));
        }
    }
}

/// The record for a person, as of `now`:
///
/// ```text
/// Widget default/w1 (record in .status.fsm)
/// State:        Configuring {"config_map":"w1-config"}
/// Entered:      2026-01-01T00:00:00Z (1m30s ago)
/// Attempt:      2, next at 2026-01-01T00:01:40Z (in 10s)
/// Last error:   connection refused
/// Generation:   3
/// Transitions:  2
/// Paused:       since 2026-01-01T00:01:00Z (30s ago) by alice, command #4; nothing runs until resume
/// Commands:     taken up to #4
///   #3   2026-01-01T00:00:50Z  goto Nowhere by bob: refused: machine Widget has no state Nowhere
///   #4   2026-01-01T00:01:00Z  pause by alice: applied
/// History:
///   #1  2026-01-01T00:00:00Z  → Pending
///   #2  2026-01-01T00:00:00Z  Pending → Configuring
/// ```
pub fn render_text(location: &Location, record: &StateRecord, now: Timestamp) -> String {
    let mut out = String::new();
    push_line(&mut out, format_args!("{location}"));
    let data = match &record.data {
        Some(Value::String(s)) if s == REDACTED => format!(" {s}"),
        Some(value) => format!(" {value}"),
        None => String::new(),
    };
    push_line(
        &mut out,
        format_args!("State:        {}{data}", record.state),
    );
    push_line(
        &mut out,
        format_args!(
            "Entered:      {} ({} ago)",
            record.entered_at,
            human(now.duration_since(record.entered_at))
        ),
    );
    let mut attempt = record.attempt.to_string();
    if let Some(next) = record.next_attempt_at {
        let _ = write!(attempt, ", next at {next}");
        let wait = next.duration_since(now);
        if wait.is_positive() {
            let _ = write!(attempt, " (in {})", human(wait));
        } else {
            attempt.push_str(" (due)");
        }
    }
    push_line(&mut out, format_args!("Attempt:      {attempt}"));
    if let Some(error) = &record.last_error {
        push_line(&mut out, format_args!("Last error:   {error}"));
    }
    if let Some(generation) = record.observed_generation {
        push_line(&mut out, format_args!("Generation:   {generation}"));
    }
    push_line(
        &mut out,
        format_args!("Transitions:  {}", record.transitions),
    );
    if let Some(pause) = &record.paused {
        let by = pause
            .by
            .as_deref()
            .map(|by| format!(" by {by}"))
            .unwrap_or_default();
        push_line(
            &mut out,
            format_args!(
                "Paused:       since {} ({} ago){by}, command #{}; nothing runs until resume",
                pause.at,
                human(now.duration_since(pause.at)),
                pause.seq
            ),
        );
    }
    if record.command_seq > 0 {
        push_line(
            &mut out,
            format_args!("Commands:     taken up to #{}", record.command_seq),
        );
        for entry in &record.commands {
            let by = entry
                .by
                .as_deref()
                .map(|by| format!(" by {by}"))
                .unwrap_or_default();
            let outcome = match &entry.refused {
                None => "applied".to_owned(),
                Some(reason) => format!("refused: {reason}"),
            };
            push_line(
                &mut out,
                format_args!(
                    "  #{:<3} {}  {}{by}: {outcome}",
                    entry.seq, entry.at, entry.command
                ),
            );
        }
    }
    if let Some(unwind) = &record.compensation {
        let progress = match unwind.finished_at {
            Some(at) => format!("finished at {at}"),
            None => format!("running since {}", unwind.started_at),
        };
        push_line(
            &mut out,
            format_args!("Compensation: {progress}: {}", unwind.reason),
        );
        for failure in &unwind.failures {
            push_line(
                &mut out,
                format_args!("  failed: {}: {}", failure.step, failure.error),
            );
        }
    }
    if !record.history.is_empty() {
        push_line(&mut out, format_args!("History:"));
        for entry in &record.history {
            let from = entry
                .from
                .as_deref()
                .map(|f| format!("{f} "))
                .unwrap_or_default();
            let reason = entry
                .reason
                .as_deref()
                .map(|r| format!("  ({r})"))
                .unwrap_or_default();
            push_line(
                &mut out,
                format_args!(
                    "  #{:<3} {}  {from}→ {}{reason}",
                    entry.seq, entry.at, entry.to
                ),
            );
        }
    }
    out
}

/// The record as pretty JSON (camelCase, as stored; sensitive data
/// redacted by [`decode`]).
///
/// # Errors
/// Serialization failed (not expected).
pub fn render_json(record: &StateRecord) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(record).map(|mut s| {
        s.push('\n');
        s
    })
}

/// A span for people ([`human_duration`]), negative ones with a `-`.
fn human(span: jiff::SignedDuration) -> String {
    let sign = if span.is_negative() { "-" } else { "" };
    format!("{sign}{}", human_duration(span.unsigned_abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a record carries from the cluster is printed escaped: no
    /// escape sequence reaches the terminal, no value starts a line of its
    /// own.
    #[test]
    fn escape_sequences_and_newlines_from_the_record_are_printed_escaped() {
        let t = |s: &str| -> Timestamp { s.parse().unwrap() };
        let mut record: StateRecord = serde_json::from_value(serde_json::json!({
            "schemaVersion": fsm_core::SCHEMA_VERSION,
            "state": "Ready",
            "enteredAt": "2026-01-01T00:00:00Z",
            "lastError": "boom\u{1b}]0;pwned\u{7}\u{1b}[2J\nState:        Done",
            "history": [{"seq": 1, "to": "Ready", "at": "2026-01-01T00:00:00Z",
                         "reason": "x\u{9b}31m\u{202e}evil"}],
        }))
        .unwrap();
        record.commands = vec![fsm_core::CommandEntry {
            seq: 1,
            command: "pause".into(),
            by: Some("eve\u{1b}[8m".into()),
            at: t("2026-01-01T00:00:00Z"),
            refused: None,
        }];
        record.command_seq = 1;
        let location = Location {
            kind: "Widget".into(),
            namespace: None,
            name: "w1".into(),
            record: ".status.fsm".into(),
        };
        let text = render_text(&location, &record, t("2026-01-01T00:01:00Z"));
        assert!(
            !text.chars().any(|c| c != '\n' && c.is_control()),
            "{text:?}"
        );
        assert!(!text.contains('\u{202e}'), "{text:?}");
        assert!(
            text.contains(
                "Last error:   boom\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\nState:        Done\n"
            ),
            "{text}"
        );
        assert_eq!(text.matches("\nState:").count(), 1, "{text}");
    }

    #[test]
    fn a_pause_and_the_commands_taken_show_with_who_when_and_outcome() {
        use fsm_core::{CommandEntry, Pause};
        let t = |s: &str| -> Timestamp { s.parse().unwrap() };
        let mut record: StateRecord = serde_json::from_value(serde_json::json!({
            "schemaVersion": fsm_core::SCHEMA_VERSION,
            "state": "Ready",
            "enteredAt": "2026-01-01T00:00:00Z",
        }))
        .unwrap();
        record.command_seq = 4;
        record.paused = Some(Pause {
            seq: 4,
            by: Some("alice".into()),
            at: t("2026-01-01T00:01:00Z"),
        });
        record.commands = vec![
            CommandEntry {
                seq: 3,
                command: "goto Nowhere".into(),
                by: Some("bob".into()),
                at: t("2026-01-01T00:00:50Z"),
                refused: Some("machine Widget has no state Nowhere".into()),
            },
            CommandEntry {
                seq: 4,
                command: "pause".into(),
                by: Some("alice".into()),
                at: t("2026-01-01T00:01:00Z"),
                refused: None,
            },
        ];
        let location = Location {
            kind: "Widget".into(),
            namespace: None,
            name: "w1".into(),
            record: ".status.fsm".into(),
        };
        let text = render_text(&location, &record, t("2026-01-01T00:01:30Z"));
        assert!(
            text.contains(
                "Paused:       since 2026-01-01T00:01:00Z (30s ago) by alice, command #4; \
                 nothing runs until resume\n\
                 Commands:     taken up to #4\n  \
                 #3   2026-01-01T00:00:50Z  goto Nowhere by bob: refused: machine Widget has no state Nowhere\n  \
                 #4   2026-01-01T00:01:00Z  pause by alice: applied\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn spans_read_as_durations_with_their_sign() {
        let s = jiff::SignedDuration::from_secs;
        assert_eq!(human(s(312)), "5m12s");
        assert_eq!(human(s(-5)), "-5s");
    }
}
