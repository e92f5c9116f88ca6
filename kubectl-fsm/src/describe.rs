//! `describe NAME`: an object's record (through the operator CLI's
//! [`record_view::render_text`]: with a pause in force and the commands
//! taken), the commands not taken yet, its conditions and its recent
//! events.
//!
//! With `--timeline`, the record's timeline follows it
//! ([`render_timeline`]).
//!
//! [`render_pending`], [`render_conditions`], [`render_events`] and
//! [`render_timeline`] are pure; [`describe`] reads.

use fsm_core::text::{human_duration, push_line};
use fsm_core::{StateRecord, Timeline, Timestamp};
use fsm_kube::records::COMMANDS_ANNOTATION;
use fsm_kube::records::{ReadError, record_view};
use k8s_openapi::api::events::v1::Event;
use kube::{Client, ResourceExt};

use crate::error::Error;
use crate::send;
use crate::target::Target;
use fsm_kube::records::object::{self, Condition, conditions, last_seen};
use fsm_kube::records::rows;

/// How many of the latest events `describe` shows.
const EVENTS_SHOWN: usize = 10;

/// The `Conditions:` section.
pub fn render_conditions(conditions: &[Condition]) -> String {
    let mut out = String::from("Conditions:\n");
    if conditions.is_empty() {
        out.push_str("  <none>\n");
    }
    for c in conditions {
        push_line(
            &mut out,
            format_args!(
                "  {:<12} {:<7} {:<20} {}",
                c.type_, c.status, c.reason, c.message
            ),
        );
    }
    out
}

/// The `Pending commands:` section: the commands of the annotation's text
/// `annotation` numbered above `taken` (the record's `commandSeq`), which
/// the operator has not taken yet, with who sent them and how long ago (as
/// of `now`); nothing when there are none.
pub fn render_pending(annotation: Option<&str>, taken: u64, now: Timestamp) -> String {
    let pending = match send::pending(annotation, taken) {
        Ok(pending) if pending.is_empty() => return String::new(),
        Ok(pending) => pending,
        Err(error) => {
            return format!(
                "Pending commands:\n  <unreadable, the operator takes none of them: {error}>\n"
            );
        }
    };
    let mut out = String::from("Pending commands:\n");
    for command in pending {
        let by = command
            .by
            .as_deref()
            .map(|by| format!(" by {by}"))
            .unwrap_or_default();
        let sent = command
            .at
            .map(|at| {
                format!(
                    ", sent {at} ({} ago)",
                    human_duration(now.duration_since(at).unsigned_abs())
                )
            })
            .unwrap_or_default();
        push_line(
            &mut out,
            format_args!("  #{:<3} {command}{by}{sent}", command.seq),
        );
    }
    out
}

/// The `Events:` section: the latest ten of `events`, oldest
/// first, with how long ago (as of `now`) and how many times.
pub fn render_events(events: &[Event], now: Timestamp) -> String {
    let mut sorted: Vec<&Event> = events.iter().collect();
    sorted.sort_by_key(|e| last_seen(e));
    let latest = &sorted[sorted.len().saturating_sub(EVENTS_SHOWN)..];
    let mut out = String::from("Events:\n");
    if latest.is_empty() {
        out.push_str("  <none>\n");
    }
    for event in latest {
        let age = last_seen(event).map_or_else(
            || "?".to_owned(),
            |at| {
                format!(
                    "{} ago",
                    human_duration(now.duration_since(at).unsigned_abs())
                )
            },
        );
        let count = event.series.as_ref().map_or(1, |s| s.count);
        let times = if count > 1 {
            format!(" (x{count})")
        } else {
            String::new()
        };
        push_line(
            &mut out,
            format_args!(
                "  {:<8} {:<20} {age}{times}: {}",
                event.type_.as_deref().unwrap_or("Normal"),
                event.reason.as_deref().unwrap_or_default(),
                event.note.as_deref().unwrap_or_default()
            ),
        );
    }
    out
}

/// How many characters wide the lane of `describe --timeline` is.
pub const TIMELINE_WIDTH: usize = 40;

/// The `Timeline:` section of `describe --timeline`: the record's
/// [`Timeline`] as of `now`, drawn as text.
pub fn render_timeline(record: &StateRecord, now: Timestamp) -> String {
    Timeline::of(record, now).text(TIMELINE_WIDTH)
}

/// What `describe` prints for object `name` in `namespace`: its record,
/// or why it has none (with `timeline`, then its timeline), then its
/// conditions and events, as of `now`.
///
/// # Errors
/// [`ReadError::NotFound`] when the object does not exist, the
/// API's errors.
pub async fn describe(
    client: &Client,
    target: &Target,
    namespace: Option<&str>,
    name: &str,
    timeline: bool,
    now: Timestamp,
) -> Result<String, Error> {
    let namespace = target
        .resource
        .namespaced
        .then(|| namespace.map_or_else(|| client.default_namespace().to_owned(), str::to_owned));
    let mut taken = 0;
    let mut out = match rows::record(client, target, namespace.as_deref(), name).await {
        Ok((record, location)) => {
            taken = record.command_seq;
            let mut text = record_view::render_text(&location, &record, now);
            if timeline {
                text.push_str(&render_timeline(&record, now));
            }
            text
        }
        Err(ReadError::NotFound(location)) => return Err(ReadError::NotFound(location).into()),
        Err(
            error @ (ReadError::NoRecord(_)
            | ReadError::CorruptRecord { .. }
            | ReadError::MemoryStore
            | ReadError::ClusterScopedObjectStore),
        ) => format!("{}/{name}: {error}\n", target.resource.kind),
        Err(error) => return Err(error.into()),
    };
    let object = target
        .api(client, namespace.as_deref())
        .get(name)
        .await
        .map_err(Error::Kube)?;
    out.push_str(&render_pending(
        object
            .annotations()
            .get(COMMANDS_ANNOTATION)
            .map(String::as_str),
        taken,
        now,
    ));
    out.push_str(&render_conditions(&conditions(&object)));
    // Listing events needs a permission of its own: without it, say so.
    match object::events(client, &object, EVENTS_SHOWN).await {
        Ok(events) => out.push_str(&render_events(&events, now)),
        Err(error) => {
            out.push_str("Events:\n");
            push_line(&mut out, format_args!("  <cannot list them: {error}>"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::events::v1::EventSeries;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn conditions_show_as_columns() {
        let found = [Condition {
            type_: "Ready".into(),
            status: "False".into(),
            reason: "Retrying".into(),
            message: "in state A, attempt 1 failed: x".into(),
        }];
        assert_eq!(
            render_conditions(&found),
            "Conditions:\n  Ready        False   Retrying             in state A, attempt 1 failed: x\n"
        );
        assert_eq!(render_conditions(&[]), "Conditions:\n  <none>\n");
    }

    #[test]
    fn events_show_the_latest_oldest_first_with_their_count() {
        let event = |reason: &str, at: &str, count: i32| Event {
            reason: Some(reason.into()),
            type_: Some("Warning".into()),
            note: Some(format!("{reason} note")),
            event_time: Some(MicroTime(t(at))),
            series: (count > 1).then(|| EventSeries {
                count,
                last_observed_time: MicroTime(t(at)),
            }),
            ..Event::default()
        };
        let events = [
            event("Later", "2026-01-01T00:01:00Z", 3),
            event("Earlier", "2026-01-01T00:00:00Z", 1),
        ];
        let text = render_events(&events, t("2026-01-01T00:02:00Z"));
        assert_eq!(
            text,
            "Events:\n  Warning  Earlier              2m00s ago: Earlier note\n  Warning  Later                1m00s ago (x3): Later note\n"
        );
    }

    #[test]
    fn event_notes_conditions_and_commands_from_the_cluster_print_escaped() {
        let hostile = "x\u{1b}]0;pwned\u{7}\u{1b}[2J\nforged line";
        let event = Event {
            reason: Some("Failed".into()),
            type_: Some("Warning".into()),
            note: Some(hostile.into()),
            event_time: Some(MicroTime(t("2026-01-01T00:00:00Z"))),
            ..Event::default()
        };
        let condition = Condition {
            type_: "Ready".into(),
            status: "False".into(),
            reason: "Retrying".into(),
            message: hostile.into(),
        };
        let annotation = format!(
            r#"[{{"seq":1,"command":"pause","by":{}}}]"#,
            serde_json::to_string(hostile).unwrap()
        );
        for text in [
            render_events(&[event], t("2026-01-01T00:01:00Z")),
            render_conditions(&[condition]),
            render_pending(Some(&annotation), 0, t("2026-01-01T00:01:00Z")),
        ] {
            assert!(
                !text.chars().any(|c| c != '\n' && c.is_control()),
                "{text:?}"
            );
            assert!(!text.contains("\nforged line"), "{text}");
            assert!(text.contains("\\u{1b}]0;pwned"), "{text}");
        }
    }

    #[test]
    fn pending_commands_show_with_who_and_when_and_taken_ones_do_not() {
        let annotation = r#"[{"seq":3,"command":"pause","by":"alice","at":"2026-01-01T00:00:00Z"},
            {"seq":4,"command":"goto","arg":"Done"}]"#;
        assert_eq!(
            render_pending(Some(annotation), 2, t("2026-01-01T00:00:30Z")),
            "Pending commands:\n  #3   pause by alice, sent 2026-01-01T00:00:00Z (30s ago)\n  #4   goto Done\n"
        );
        assert_eq!(
            render_pending(Some(annotation), 4, t("2026-01-01T00:00:30Z")),
            ""
        );
        assert_eq!(render_pending(None, 0, t("2026-01-01T00:00:30Z")), "");
        let unreadable = render_pending(Some("pause"), 0, t("2026-01-01T00:00:30Z"));
        assert!(unreadable.contains("<unreadable"), "{unreadable}");
    }
}
