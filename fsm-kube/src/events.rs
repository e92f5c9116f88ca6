//! Kubernetes Events for what the engine did: transitions, retries,
//! timeouts, compensation and corrupt records.

use fsm_core::{DecodeError, Effect};
use kube::runtime::events::{Event, EventType};

/// The event for an effect, or `None` for effects not worth an event.
/// Notes carry state names and error messages, never state data.
///
/// kube's `Recorder` folds events with the same type, reason and action
/// into one series (keeping the first note), so the action names the state
/// the event is about: `Enter Ready`, `Retry Seeding`, … Repeats of the same
/// thing still fold; different transitions stay apart.
pub fn for_effect(effect: &Effect) -> Option<Event> {
    let (type_, reason, action, note) = match effect {
        Effect::Entered { from, to, reason } => (
            EventType::Normal,
            "Transitioned",
            format!("Enter {to}"),
            match (from, reason) {
                (Some(from), Some(why)) => format!("{from} → {to}: {why}"),
                (Some(from), None) => format!("{from} → {to}"),
                (None, _) => format!("started in {to}"),
            },
        ),
        Effect::RetryScheduled {
            state,
            attempt,
            delay,
            error,
        } => (
            EventType::Warning,
            "HandlerFailed",
            format!("Retry {state}"),
            format!("{state}: attempt {attempt} failed ({error}); retrying in {delay:?}"),
        ),
        Effect::RetryWithoutAttempt {
            state,
            failures,
            delay,
            error,
        } => (
            EventType::Warning,
            "TransientFailure",
            format!("Retry {state}"),
            format!(
                "{state}: failed transiently ({error}), {failures} in a row; retrying in {delay:?} without spending an attempt"
            ),
        ),
        Effect::RetriesExhausted { state, error } => (
            EventType::Warning,
            "RetriesExhausted",
            format!("Retry {state}"),
            format!("{state}: retries exhausted: {error}"),
        ),
        Effect::Failed { state, reason } => (
            EventType::Warning,
            "Failed",
            format!("Fail {state}"),
            format!("{state}: {reason}"),
        ),
        Effect::TimedOut { state } => (
            EventType::Warning,
            "TimedOut",
            format!("Timeout {state}"),
            format!("{state} timed out"),
        ),
        Effect::UndeclaredTransition { from, to } => (
            EventType::Warning,
            "UndeclaredTransition",
            format!("Enter {to}"),
            format!("the handler of {from} asked for {to}, which {from} does not declare"),
        ),
        Effect::CompensationStarted { reason } => (
            EventType::Warning,
            "Compensating",
            "Compensate".to_owned(),
            format!("compensating: {reason}"),
        ),
        Effect::Compensated { state } => (
            EventType::Normal,
            "Compensated",
            format!("Compensate {state}"),
            format!("compensated {state}"),
        ),
        Effect::CompensationFailed { step, error } => (
            EventType::Warning,
            "CompensationFailed",
            format!("Compensate {step}"),
            format!("compensation of {step} failed for good: {error}"),
        ),
        Effect::CompensationFinished { failures } => (
            EventType::Normal,
            "CompensationFinished",
            "Compensate".to_owned(),
            format!("compensation finished with {failures} failed step(s)"),
        ),
        Effect::Upgraded {
            from,
            to,
            from_version,
            to_version,
        } => (
            EventType::Normal,
            "RecordUpgraded",
            format!("Upgrade {to}"),
            format!(
                "the record of machine version {from_version} was written back as version \
                 {to_version} reads it: {from} → {to}"
            ),
        ),
        Effect::Degraded { state, reason } => (
            EventType::Warning,
            "Degraded",
            format!("Converge {state}"),
            format!("{state} stays but cannot converge: {reason}; trying again on its backoff"),
        ),
        Effect::Recovered { state } => (
            EventType::Normal,
            "Recovered",
            format!("Converge {state}"),
            format!("{state} converged again"),
        ),
        Effect::CommandApplied { seq, command, by } => (
            EventType::Normal,
            "CommandApplied",
            format!("Command {seq}"),
            format!(
                "command {seq} ({command}){} applied",
                by_whom(by.as_deref())
            ),
        ),
        Effect::CommandRefused {
            seq,
            command,
            by,
            reason,
        } => (
            EventType::Warning,
            "CommandRefused",
            format!("Command {seq}"),
            format!(
                "command {seq} ({command}){} refused: {reason}",
                by_whom(by.as_deref())
            ),
        ),
        Effect::SpecChanged { .. } | Effect::Checkpointed { .. } | Effect::Released => return None,
    };
    Some(Event {
        type_,
        reason: reason.to_owned(),
        note: Some(truncate(note)),
        action,
        secondary: None,
    })
}

/// ` by alice`, or nothing when the command does not say who asked.
fn by_whom(by: Option<&str>) -> String {
    by.map(|who| format!(" by {who}")).unwrap_or_default()
}

/// The event for an object whose command list cannot be read.
pub fn for_unreadable_commands(error: &fsm_core::CommandListError) -> Event {
    Event {
        type_: EventType::Warning,
        reason: "CommandsUnreadable".to_owned(),
        note: Some(truncate(format!(
            "{error}; no command in annotation {} is applied until it is fixed",
            crate::records::COMMANDS_ANNOTATION
        ))),
        action: "Command".to_owned(),
        secondary: None,
    }
}

/// The event for a record that cannot be decoded.
pub fn for_corrupt(error: &DecodeError) -> Event {
    Event {
        type_: EventType::Warning,
        reason: "CorruptRecord".to_owned(),
        note: Some(truncate(format!(
            "{error}; reconciling stops until the record is fixed"
        ))),
        action: "Load".to_owned(),
        secondary: None,
    }
}

/// The event for a record that would exceed a size limit (the error names
/// the size and the limit).
pub fn for_too_large(error: &fsm_core::StoreError) -> Event {
    Event {
        type_: EventType::Warning,
        reason: crate::conditions::TOO_LARGE_REASON.to_owned(),
        note: Some(truncate(format!(
            "{error}; nothing was written, the last committed record is kept"
        ))),
        action: "Commit".to_owned(),
        secondary: None,
    }
}

/// The event for an object of `size` bytes too large for the finalizer its
/// machine needs (the server's `refusal`): nothing was written to it, and
/// nothing runs until it shrinks.
pub fn for_object_too_large(size: usize, refusal: &str) -> Event {
    Event {
        type_: EventType::Warning,
        reason: crate::conditions::OBJECT_TOO_LARGE_REASON.to_owned(),
        note: Some(truncate(format!(
            "the object ({size} bytes) is too large for the finalizer its machine needs: the \
             server refused it ({refusal}); nothing was written and nothing runs until the \
             object is made smaller"
        ))),
        action: "AddFinalizer".to_owned(),
        secondary: None,
    }
}

/// The event for a record written by machine version `found`, newer than
/// this replica's `supported`: the record is left untouched.
pub fn for_newer_record(found: u32, supported: u32) -> Event {
    Event {
        type_: EventType::Warning,
        reason: crate::conditions::NEWER_RECORD_REASON.to_owned(),
        note: Some(format!(
            "the record was written by version {found} of the machine, newer than this \
             replica's {supported}; it is left untouched"
        )),
        action: "Load".to_owned(),
        secondary: None,
    }
}

/// Event notes are limited to 1 KiB by the API server.
fn truncate(mut note: String) -> String {
    const LIMIT: usize = 1024;
    if note.len() > LIMIT {
        let mut cut = LIMIT - 3;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
        note.push_str("...");
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_are_normal_and_failures_warnings() {
        let entered = for_effect(&Effect::Entered {
            from: Some("A".into()),
            to: "B".into(),
            reason: None,
        })
        .unwrap();
        assert_eq!(entered.type_, EventType::Normal);
        assert_eq!(entered.note.as_deref(), Some("A → B"));
        assert_eq!(entered.action, "Enter B");
        let timed_out = for_effect(&Effect::TimedOut { state: "A".into() }).unwrap();
        assert_eq!(timed_out.type_, EventType::Warning);
        assert!(for_effect(&Effect::Released).is_none());
    }

    #[test]
    fn an_upgraded_record_and_a_newer_one_name_both_versions() {
        let upgraded = for_effect(&Effect::Upgraded {
            from: "Provisioning".into(),
            to: "Starting".into(),
            from_version: 1,
            to_version: 2,
        })
        .unwrap();
        assert_eq!(upgraded.type_, EventType::Normal);
        assert_eq!(upgraded.reason, "RecordUpgraded");
        assert_eq!(
            upgraded.note.as_deref(),
            Some(
                "the record of machine version 1 was written back as version 2 reads it: \
                 Provisioning → Starting"
            )
        );
        let newer = for_newer_record(3, 2);
        assert_eq!(newer.type_, EventType::Warning);
        assert_eq!(newer.reason, "RecordFromNewerVersion");
        assert!(newer.note.unwrap().contains("version 3"));
    }

    #[test]
    fn long_notes_are_cut_on_a_char_boundary() {
        let note = truncate("é".repeat(1000));
        assert!(note.len() <= 1024);
        assert!(note.ends_with("..."));
    }
}
