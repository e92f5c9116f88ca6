//! Events: core `v1` and `events.k8s.io/v1` Events are one storage, as on
//! the real server, each API presenting it with its own field names.
//!
//! Objects are stored in the core `v1` form, encoded as the real server
//! encodes it (absent times are `null`, `involvedObject`, `source`,
//! `reportingComponent` and `reportingInstance` always present). The
//! `events.k8s.io/v1` names map to the core ones so:
//!
//! | `events.k8s.io/v1` | core `v1` |
//! |---|---|
//! | `regarding` | `involvedObject` |
//! | `note` | `message` |
//! | `reportingController` | `reportingComponent` |
//! | `deprecatedSource` | `source` |
//! | `deprecatedFirstTimestamp`, `deprecatedLastTimestamp`, `deprecatedCount` | `firstTimestamp`, `lastTimestamp`, `count` |
//!
//! and `eventTime`, `series`, `reportingInstance`, `action`, `reason`,
//! `related`, `type` keep their names. Fields neither API knows are dropped.
//!
//! Writes are validated as kube-apiserver 1.20 validates them (checked
//! against it by the conformance suite): the legacy rules for both APIs
//! (the involved object's namespace; with an `eventTime`, the reporting
//! fields and length limits), and for a create through `events.k8s.io` the
//! strict rules (`eventTime`, `type`, the deprecated fields unset,
//! `series`). An update through `events.k8s.io` may change only metadata
//! and `series`, as later versions hold it (1.20 accepts any change: its
//! check compares the new Event with itself).

use serde_json::{Map, Value, json};

use crate::resources::{EVENTS_FIELD_LABELS, ResourceDef};
use crate::status::{ApiError, Cause, Subject};

/// The group of the new Events API.
pub const EVENTS_GROUP: &str = "events.k8s.io";

/// `events.k8s.io/v1` field → core `v1` field, for the renamed ones.
const RENAMED: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// Fields with the same name in both APIs.
const SHARED: [&str; 7] = [
    "eventTime",
    "series",
    "reportingInstance",
    "action",
    "reason",
    "related",
    "type",
];

/// Whether `def` is either Events API.
#[must_use]
pub fn is_event(def: &ResourceDef) -> bool {
    def.kind == "Event" && (def.group.is_empty() || def.group == EVENTS_GROUP)
}

/// Whether `def` is `events.k8s.io` Events.
#[must_use]
pub fn is_events_api(def: &ResourceDef) -> bool {
    def.kind == "Event" && def.group == EVENTS_GROUP
}

/// The core field an `events.k8s.io/v1` field selector selects on.
///
/// # Errors
/// [`ApiError::BadRequest`] for a field the API does not index (the real
/// server's message).
pub fn core_field_label(label: &str) -> Result<&'static str, ApiError> {
    EVENTS_FIELD_LABELS
        .iter()
        .find(|(l, _)| *l == label)
        .map(|(_, core)| *core)
        .ok_or_else(|| ApiError::BadRequest(format!("field label not supported: {label}")))
}

/// The value of a core Event's selectable `field`: `source` is the
/// source's component, or the reporting controller when there is none.
#[must_use]
pub fn selectable_field(event: &Value, field: &str) -> Option<String> {
    if field != "source" {
        return None;
    }
    let component = event["source"]["component"].as_str().unwrap_or_default();
    Some(if component.is_empty() {
        event["reportingComponent"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    } else {
        component.to_string()
    })
}

/// Converts a written Event of `def`'s API to the stored core form.
///
/// # Errors
/// [`ApiError::BadRequest`] for a time that does not parse.
pub fn to_storage(def: &ResourceDef, body: Value) -> Result<Value, ApiError> {
    let Value::Object(mut input) = body else {
        return Ok(body);
    };
    let mut core = Map::new();
    if let Some(meta) = input.remove("metadata") {
        core.insert("metadata".into(), meta);
    }
    if is_events_api(def) {
        for (new, old) in RENAMED {
            if let Some(v) = input.remove(new) {
                core.insert(old.into(), v);
            }
        }
    } else {
        for (_, old) in RENAMED {
            if let Some(v) = input.remove(old) {
                core.insert(old.into(), v);
            }
        }
    }
    for f in SHARED {
        if let Some(v) = input.remove(f) {
            core.insert(f.into(), v);
        }
    }
    let mut core = Value::Object(core);
    encode_core(&mut core)?;
    Ok(core)
}

/// Sets what the real server's encoding of a core Event always carries
/// and drops the empty optional fields, with times in their formats.
fn encode_core(event: &mut Value) -> Result<(), ApiError> {
    let Some(o) = event.as_object_mut() else {
        return Ok(());
    };
    o.insert("apiVersion".into(), json!("v1"));
    o.insert("kind".into(), json!("Event"));
    for f in ["involvedObject", "source"] {
        let empty = o.get(f).is_none_or(Value::is_null);
        if empty {
            o.insert(f.into(), json!({}));
        }
    }
    for f in ["firstTimestamp", "lastTimestamp"] {
        let t = reformat(o.get(f), false)?;
        o.insert(f.into(), t);
    }
    let t = reformat(o.get("eventTime"), true)?;
    o.insert("eventTime".into(), t);
    if let Some(series) = o.get_mut("series").and_then(Value::as_object_mut) {
        let t = reformat(series.get("lastObservedTime"), true)?;
        series.insert("lastObservedTime".into(), t);
    }
    for f in ["reportingComponent", "reportingInstance"] {
        if o.get(f).is_none_or(Value::is_null) {
            o.insert(f.into(), json!(""));
        }
    }
    for f in ["reason", "message", "type", "action"] {
        if o.get(f).is_some_and(|v| v.is_null() || v == "") {
            o.remove(f);
        }
    }
    for f in ["series", "related"] {
        if o.get(f).is_some_and(Value::is_null) {
            o.remove(f);
        }
    }
    if o.get("count").is_some_and(|c| c.is_null() || c == 0) {
        o.remove("count");
    }
    Ok(())
}

/// A time as the real server encodes it: `null` when unset, RFC 3339 in
/// seconds (`metav1.Time`) or microseconds (`MicroTime`).
fn reformat(value: Option<&Value>, micro: bool) -> Result<Value, ApiError> {
    let text = match value {
        None | Some(Value::Null) => return Ok(Value::Null),
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "Event in version \"v1\" cannot be handled as a Event: a time must be a string, got {other}"
            )));
        }
    };
    let t: jiff::Timestamp = text.parse().map_err(|e| {
        ApiError::BadRequest(format!(
            "Event in version \"v1\" cannot be handled as a Event: parsing time {text:?}: {e}"
        ))
    })?;
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(json!(t.strftime(format).to_string()))
}

/// The stored core Event as `def`'s API presents it.
#[must_use]
pub fn present(def: &ResourceDef, stored: &Value) -> Value {
    if !is_events_api(def) {
        return stored.clone();
    }
    let Some(core) = stored.as_object() else {
        return stored.clone();
    };
    let mut out = Map::new();
    if let Some(meta) = core.get("metadata") {
        out.insert("metadata".into(), meta.clone());
    }
    for (new, old) in RENAMED {
        if let Some(v) = core.get(old) {
            out.insert(new.into(), v.clone());
        }
    }
    for f in SHARED {
        if let Some(v) = core.get(f) {
            out.insert(f.into(), v.clone());
        }
    }
    // events.k8s.io/v1's encoding: `eventTime`, `regarding` and
    // `deprecatedSource` always, the deprecated times as `null` when
    // unset; the strings and the count only when set.
    out.entry("eventTime").or_insert(Value::Null);
    out.entry("regarding").or_insert_with(|| json!({}));
    out.entry("deprecatedSource").or_insert_with(|| json!({}));
    out.entry("deprecatedFirstTimestamp").or_insert(Value::Null);
    out.entry("deprecatedLastTimestamp").or_insert(Value::Null);
    for f in ["reportingController", "reportingInstance"] {
        if out.get(f).is_some_and(|v| v == "") {
            out.remove(f);
        }
    }
    out.insert("apiVersion".into(), json!(def.api_version()));
    out.insert("kind".into(), json!("Event"));
    Value::Object(out)
}

/// The columns of the real server's Event table (both APIs): no NAME
/// first; SUBOBJECT, SOURCE, FIRST SEEN, COUNT and NAME only with `-o wide`.
#[must_use]
pub fn table_columns() -> Vec<Value> {
    [
        ("Last Seen", 0),
        ("Type", 0),
        ("Reason", 0),
        ("Object", 0),
        ("Subobject", 1),
        ("Source", 1),
        ("Message", 0),
        ("First Seen", 1),
        ("Count", 1),
        ("Name", 1),
    ]
    .into_iter()
    .map(|(name, priority)| {
        // Count's cells are integers, its column says string (sic).
        json!({"name": name, "type": "string", "format": "", "description": "", "priority": priority})
    })
    .collect()
}

/// The cells of an Event's row (`event` as `def`'s API presents it), as
/// the real server prints them.
#[must_use]
pub fn table_cells(def: &ResourceDef, event: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let core = if is_events_api(def) {
        to_storage(def, event.clone()).unwrap_or_else(|_| event.clone())
    } else {
        event.clone()
    };
    let since = |v: &Value| crate::time::age(v.as_str().unwrap_or_default(), now);
    let first = if core["firstTimestamp"].is_string() {
        since(&core["firstTimestamp"])
    } else {
        since(&core["eventTime"])
    };
    let mut last = if core["lastTimestamp"].is_string() {
        since(&core["lastTimestamp"])
    } else {
        first.clone()
    };
    let mut count = core["count"].as_i64().unwrap_or(0);
    // Later versions print the series' count; 1.20 prints one more.
    if core["series"].is_object() {
        last = since(&core["series"]["lastObservedTime"]);
        count = core["series"]["count"].as_i64().unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let involved = &core["involvedObject"];
    let kind = text(involved, "kind").to_lowercase();
    let target = match text(involved, "name") {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let first_non_empty = |a: &'_ str, b: &'_ str| {
        if a.is_empty() {
            b.to_string()
        } else {
            a.to_string()
        }
    };
    let component = first_non_empty(
        text(&core["source"], "component"),
        text(&core, "reportingComponent"),
    );
    let instance = first_non_empty(
        text(&core["source"], "host"),
        text(&core, "reportingInstance"),
    );
    let source = if instance.is_empty() {
        component
    } else {
        format!("{component}, {instance}")
    };
    vec![
        json!(last),
        json!(text(&core, "type")),
        json!(text(&core, "reason")),
        json!(target),
        json!(text(involved, "fieldPath")),
        json!(source),
        json!(text(&core, "message").trim()),
        json!(first),
        json!(count),
        json!(text(&core["metadata"], "name")),
    ]
}

const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

fn text<'a>(event: &'a Value, field: &str) -> &'a str {
    event[field].as_str().unwrap_or_default()
}

fn required(field: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired".into(),
        message: "Required value".into(),
        field: field.into(),
    }
}

fn is_set(v: &Value) -> bool {
    !v.is_null()
}

/// The legacy rules every Event write passes (`ns`: the Event's namespace).
fn legacy_causes(event: &Value, ns: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let involved_ns = event["involvedObject"]["namespace"]
        .as_str()
        .unwrap_or_default();
    let mismatch = || {
        Cause::invalid(
            "involvedObject.namespace",
            involved_ns,
            "does not match event.namespace",
        )
    };
    if is_set(&event["eventTime"]) {
        if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
            causes.push(mismatch());
        }
        let controller = text(event, "reportingComponent");
        if controller.is_empty() {
            causes.push(required("reportingController"));
            causes.push(Cause::invalid(
                "reportingController",
                "",
                "name part must be non-empty",
            ));
        } else if let Some(problem) = crate::validation::label_key_problem(controller) {
            causes.push(Cause::invalid("reportingController", controller, &problem));
        }
        let instance = text(event, "reportingInstance");
        if instance.is_empty() {
            causes.push(required("reportingInstance"));
        }
        let limits = [
            (
                instance.len(),
                REPORTING_INSTANCE_LIMIT,
                // Sic: the real server's field path.
                "repotingIntance",
            ),
            (text(event, "action").len(), ACTION_LIMIT, "action"),
            (text(event, "reason").len(), REASON_LIMIT, "reason"),
            (text(event, "message").len(), NOTE_LIMIT, "message"),
        ];
        for (len, limit, field) in limits {
            if len > limit {
                causes.push(Cause::invalid(
                    field,
                    "",
                    &format!("can have at most {limit} characters"),
                ));
            }
        }
    } else if involved_ns.is_empty() {
        if !ns.is_empty() && ns != "default" {
            causes.push(mismatch());
        }
    } else if ns != involved_ns {
        causes.push(mismatch());
    }
    causes
}

fn series_causes(event: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let series = &event["series"];
    if series.is_object() {
        if series["count"].as_i64().unwrap_or(0) < 2 {
            causes.push(Cause::invalid("series.count", "", "should be at least 2"));
        }
        if !is_set(&series["lastObservedTime"]) {
            causes.push(required("series.lastObservedTime"));
        }
    }
    causes
}

/// The strict rules of a create through `events.k8s.io`.
fn strict_create_causes(event: &Value) -> Vec<Cause> {
    let mut causes = series_causes(event);
    if !is_set(&event["eventTime"]) {
        causes.push(required("eventTime"));
    }
    let ty = text(event, "type");
    if ty != "Normal" && ty != "Warning" {
        causes.push(Cause::invalid(
            "type",
            "",
            &format!("has invalid value: {ty}"),
        ));
    }
    for f in ["firstTimestamp", "lastTimestamp"] {
        if is_set(&event[f]) {
            causes.push(Cause::invalid(f, "", "needs to be unset"));
        }
    }
    if event["count"].as_i64().unwrap_or(0) != 0 {
        causes.push(Cause::invalid("count", "", "needs to be unset"));
    }
    if !text(&event["source"], "component").is_empty() || !text(&event["source"], "host").is_empty()
    {
        causes.push(Cause::invalid("source", "", "needs to be unset"));
    }
    causes
}

/// The strict rules of an update through `events.k8s.io`: a changed
/// `series` must be valid, and nothing else but metadata may change.
/// (kube-apiserver 1.20 compares the new Event with itself here, a bug
/// fixed since, so it accepts any change.)
fn strict_update_causes(new: &Value, old: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if new["series"] != old["series"] {
        causes.extend(series_causes(new));
    }
    // The real server's order, `reason` twice included.
    for f in [
        "involvedObject",
        "reason",
        "message",
        "source",
        "firstTimestamp",
        "lastTimestamp",
        "count",
        "reason",
        "type",
        "eventTime",
        "action",
        "related",
        "reportingComponent",
        "reportingInstance",
    ] {
        if new[f] != old[f] {
            let value = match &new[f] {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            let field = if f == "reportingComponent" {
                "reportingController"
            } else {
                f
            };
            causes.push(Cause::invalid(field, &value, "field is immutable"));
        }
    }
    causes
}

/// Validates a stored-form Event written through `def`'s API: `old` is
/// the stored Event an update replaces, `None` for a create.
///
/// # Errors
/// [`ApiError::Invalid`] with every broken rule.
pub fn validate(
    def: &ResourceDef,
    ns: &str,
    name: &str,
    event: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let mut causes = legacy_causes(event, ns);
    if is_events_api(def) {
        match old {
            None => causes.extend(strict_create_causes(event)),
            Some(old) => causes.extend(strict_update_causes(event, old)),
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        // Named as the real server names it for both APIs: the stored
        // (core) kind, without a group.
        Err(ApiError::Invalid(Subject::new("", "Event", name), causes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defs() -> (ResourceDef, ResourceDef) {
        let r = crate::builtins::registry();
        let core = r.get("", "v1", "events").unwrap();
        let new = r.get(EVENTS_GROUP, "v1", "events").unwrap();
        ((*core).clone(), (*new).clone())
    }

    #[test]
    fn an_events_api_event_reads_back_through_both_apis() {
        let (core, new) = defs();
        let written = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e1", "namespace": "ns"},
            "eventTime": "2026-01-01T00:00:00Z",
            "regarding": {"kind": "Widget", "name": "w1", "namespace": "ns"},
            "note": "it happened", "reason": "Happened", "type": "Normal",
            "action": "Reconcile", "reportingController": "fsm.example.com/op",
            "reportingInstance": "op-1", "involvedObject": {"name": "ignored"},
        });
        let stored = to_storage(&new, written).unwrap();
        assert_eq!(stored["involvedObject"]["name"], "w1");
        assert_eq!(stored["message"], "it happened");
        assert_eq!(stored["reportingComponent"], "fsm.example.com/op");
        assert_eq!(stored["eventTime"], "2026-01-01T00:00:00.000000Z");
        assert_eq!(stored["firstTimestamp"], Value::Null);
        assert_eq!(stored["source"], json!({}));
        assert_eq!(present(&core, &stored), stored);
        let back = present(&new, &stored);
        assert_eq!(back["regarding"]["name"], "w1");
        assert_eq!(back["note"], "it happened");
        assert_eq!(back["deprecatedSource"], json!({}));
        assert_eq!(back["deprecatedLastTimestamp"], Value::Null);
        assert!(back.get("involvedObject").is_none());
        assert!(back.get("deprecatedCount").is_none());
        validate(&new, "ns", "e1", &stored, None).unwrap();
    }

    #[test]
    fn events_api_creates_need_the_new_fields() {
        let (core, new) = defs();
        let legacy = to_storage(
            &core,
            json!({"metadata": {"name": "e"}, "involvedObject": {"namespace": "ns"},
                   "count": 3, "source": {"component": "kubelet"},
                   "firstTimestamp": "2026-01-01T00:00:00Z"}),
        )
        .unwrap();
        validate(&core, "ns", "e", &legacy, None).unwrap();
        let ApiError::Invalid(_, causes) = validate(&new, "ns", "e", &legacy, None).unwrap_err()
        else {
            panic!("not Invalid")
        };
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            ["eventTime", "type", "firstTimestamp", "count", "source"]
        );
        let elsewhere = validate(&core, "other", "e", &legacy, None).unwrap_err();
        assert!(
            elsewhere
                .to_string()
                .contains("does not match event.namespace")
        );
    }

    #[test]
    fn source_selects_the_component_or_the_reporting_controller() {
        let e = json!({"source": {}, "reportingComponent": "op"});
        assert_eq!(selectable_field(&e, "source").as_deref(), Some("op"));
        let e = json!({"source": {"component": "kubelet"}, "reportingComponent": "op"});
        assert_eq!(selectable_field(&e, "source").as_deref(), Some("kubelet"));
        assert_eq!(selectable_field(&e, "reason"), None);
        assert_eq!(
            core_field_label("regarding.name").unwrap(),
            "involvedObject.name"
        );
        assert_eq!(core_field_label("note").unwrap_err().reason(), "BadRequest");
    }

    #[test]
    fn both_apis_list_one_storage_with_their_selectors() {
        use crate::cluster::{Cluster, ListQuery};
        use crate::selectors::FieldSelector;
        let mut c = Cluster::new(100, 16, 1);
        let core = c.registry.get("", "v1", "events").unwrap();
        let new = c.registry.get(EVENTS_GROUP, "v1", "events").unwrap();
        let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let body = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e1"}, "eventTime": "2027-01-15T08:00:00.000000Z",
            "regarding": {"kind": "Widget", "name": "w1", "namespace": "default"},
            "note": "n", "reason": "R", "type": "Normal",
            "reportingController": "op", "reportingInstance": "op-0",
        });
        c.create(&new, "default", body, false, now).unwrap();
        let names = |c: &Cluster, def: &ResourceDef, selector: &str| -> Vec<String> {
            let q = ListQuery {
                fields: FieldSelector::parse(selector).unwrap(),
                ..ListQuery::default()
            };
            c.list(def, Some("default"), &q).unwrap()["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(names(&c, &core, "involvedObject.name=w1,source=op"), ["e1"]);
        assert_eq!(
            names(&c, &core, "reportingComponent=other"),
            Vec::<String>::new()
        );
        assert_eq!(
            names(&c, &new, "regarding.name=w1,reportingController=op"),
            ["e1"]
        );
        let listed = c
            .list(&core, Some("default"), &ListQuery::default())
            .unwrap();
        assert_eq!(listed["items"][0]["message"], "n");
        let q = ListQuery {
            fields: FieldSelector::parse("involvedObject.name=w1").unwrap(),
            ..ListQuery::default()
        };
        assert_eq!(c.list(&new, None, &q).unwrap_err().reason(), "BadRequest");
    }
}
