//! `pause`, `resume`, `retry`, `goto` and `signal`: a command appended to
//! the object's `operator-fsm.io/commands` annotation, for the operator to
//! take on its next reconcile (see `fsm_core::Command`).
//!
//! # Expected flow
//! 1. [`check`] refuses, before any write, what cannot be valid whatever
//!    the object's state: a `goto` to a state the published machine does
//!    not have, or to a failed state; a signal no state declares (when the
//!    published machine lists signals); an empty name.
//! 2. [`send`] reads the object (its `resourceVersion` and annotation) and
//!    its record (`commandSeq`: the highest number the operator took),
//!    and [`append`]s: the taken commands are pruned, the new one is
//!    numbered max(highest in the annotation, `commandSeq`) + 1, and a
//!    list the operator would refuse is never written.
//! 3. The annotation is written with a merge patch carrying the
//!    `resourceVersion` read ([`patch_body`]): a write in between (another
//!    person's command, the operator's own record) answers 409, and the
//!    whole read-modify-write runs again, up to [`MAX_ATTEMPTS`] times.
//! 4. With `--wait`, [`wait`] reads the record until its `commandSeq`
//!    reaches the command's number, and [`outcome`] finds what became of
//!    it in the record's `commands` log.
//!
//! # Guarantees
//! Two people sending at once both land, with distinct numbers: the
//! second write is conditional on the version the first one replaced. A
//! command the operator has not taken is never pruned.
//!
//! # Caveats
//! With the ephemeral store the records are in the operator's memory: the
//! plugin cannot prune (it numbers after the annotation's highest) and
//! cannot wait. A state's former names (`renamed_from`) are not published:
//! `goto` takes the current name.

use std::time::Duration;

use fsm_core::{
    Command, CommandAction, CommandListError, MAX_PENDING_COMMANDS, MachineGraph, StateRecord,
    Timestamp,
};
use fsm_kube::cli::ConnectArgs;
use fsm_kube::records::COMMANDS_ANNOTATION;
use fsm_kube::records::ReadError;
use fsm_kube::records::rows;
use fsm_kube::store::RecordPlace;
use kube::api::{Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde_json::{Value, json};

use crate::error::Error;
use crate::target::Target;

/// How many times [`send`] reads, appends and writes before giving up on
/// an object that changes each time (409 Conflict).
pub const MAX_ATTEMPTS: u32 = 10;

/// How often [`wait`] reads the record.
const POLL: Duration = Duration::from_millis(250);

pub use crate::error::SendRefusal;

/// Refuses what no state of the object could accept: a `goto` to a state
/// `graph` does not have, or to a failed state; a signal no state
/// declares, when `graph` lists signals (edges labelled `signal NAME`; a
/// graph without any may come from an operator that does not publish
/// them, and then the operator judges); an empty name. Whether the
/// command suits the object's state when the operator takes it is the
/// operator's judgement.
///
/// # Errors
/// [`SendRefusal`].
pub fn check(action: &CommandAction, graph: &MachineGraph) -> Result<(), SendRefusal> {
    match action {
        CommandAction::Goto(state) if state.is_empty() => Err(SendRefusal::EmptyName("state")),
        CommandAction::Signal(signal) if signal.is_empty() => Err(SendRefusal::EmptyName("signal")),
        CommandAction::Goto(state) => match graph.state(state) {
            None => Err(SendRefusal::UnknownState {
                machine: graph.machine.clone(),
                state: state.clone(),
                states: graph.states.iter().map(|s| s.name.clone()).collect(),
            }),
            Some(s) if s.failed => Err(SendRefusal::FailedState(s.name.clone())),
            Some(_) => Ok(()),
        },
        CommandAction::Signal(signal) => {
            let declared: Vec<(&str, &fsm_core::GraphEdge)> = graph
                .edges
                .iter()
                .filter_map(|e| Some((e.engine.as_deref()?.strip_prefix("signal ")?, e)))
                .collect();
            if declared.is_empty() || declared.iter().any(|(name, _)| name == signal) {
                return Ok(());
            }
            Err(SendRefusal::UndeclaredSignal {
                machine: graph.machine.clone(),
                signal: signal.clone(),
                declared: declared
                    .iter()
                    .map(|(name, e)| format!("{name} ({} → {})", e.from, e.to))
                    .collect(),
            })
        }
        _ => Ok(()),
    }
}

/// The new annotation: the list with the command appended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Appended {
    /// The command added.
    pub command: Command,
    /// The whole list to write, in order of number.
    pub list: Vec<Command>,
    /// How many taken commands were pruned.
    pub pruned: usize,
}

/// Appends `action` (asked `by`, `at`) to the annotation's text `current`
/// (`None`: no annotation) of an object whose record has taken the
/// commands up to `taken` (`None`: unknown, nothing is pruned): prunes the
/// commands numbered `taken` or less, numbers the new one
/// max(highest in the annotation, `taken`) + 1.
///
/// # Errors
/// [`SendRefusal::Unreadable`] for text that is not a list of commands,
/// [`SendRefusal::TooMany`] when [`MAX_PENDING_COMMANDS`] are pending
/// already, [`SendRefusal::Invalid`] for a list the operator would refuse.
pub fn append(
    current: Option<&str>,
    taken: Option<u64>,
    action: CommandAction,
    by: Option<String>,
    at: Timestamp,
) -> Result<Appended, SendRefusal> {
    let mut list: Vec<Command> = match current.map(str::trim) {
        None | Some("") => Vec::new(),
        // Leniently: a list too long for the operator is still pruned.
        Some(text) => {
            serde_json::from_str(text).map_err(|e| SendRefusal::Unreadable(e.to_string()))?
        }
    };
    let highest = list.iter().map(|c| c.seq).chain(taken).max().unwrap_or(0);
    let before = list.len();
    if let Some(taken) = taken {
        list.retain(|c| c.seq > taken);
    }
    let pruned = before - list.len();
    if list.len() >= MAX_PENDING_COMMANDS {
        return Err(SendRefusal::TooMany {
            pending: list.len(),
        });
    }
    let command = Command {
        seq: highest.saturating_add(1),
        action,
        by,
        at: Some(at),
    };
    list.push(command.clone());
    // What the operator will read: the engine's own parser decides.
    let list = Command::parse_list(&Command::list_to_text(&list)).map_err(SendRefusal::Invalid)?;
    Ok(Appended {
        command,
        list,
        pruned,
    })
}

/// The commands of the annotation's text `current` that a record having
/// taken the commands up to `taken` has not taken yet, in order.
///
/// # Errors
/// [`CommandListError`] for an annotation the operator cannot read.
pub fn pending(current: Option<&str>, taken: u64) -> Result<Vec<Command>, CommandListError> {
    let Some(text) = current else {
        return Ok(Vec::new());
    };
    let mut list = Command::parse_list(text)?;
    list.retain(|c| c.seq > taken);
    Ok(list)
}

/// The merge patch that writes `list` as the annotation, on condition
/// that the object is still at `resource_version` (else 409 Conflict).
pub fn patch_body(list: &[Command], resource_version: &str) -> Value {
    json!({
        "metadata": {
            "resourceVersion": resource_version,
            "annotations": { COMMANDS_ANNOTATION: Command::list_to_text(list) },
        }
    })
}

/// What became of a command the operator took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Applied.
    Applied,
    /// Refused, with the operator's reason.
    Refused(String),
    /// Taken, but the record's log (its last ten commands) no longer holds
    /// it: more commands were taken since.
    Forgotten,
}

/// What became of command `seq` by `record`; `None` while not taken.
pub fn outcome(record: &StateRecord, seq: u64) -> Option<Outcome> {
    if record.command_seq < seq {
        return None;
    }
    Some(
        match record.commands.iter().rev().find(|entry| entry.seq == seq) {
            Some(entry) => match &entry.refused {
                None => Outcome::Applied,
                Some(reason) => Outcome::Refused(reason.clone()),
            },
            None => Outcome::Forgotten,
        },
    )
}

/// An object for messages: `namespace/name`, or `name` when
/// cluster-scoped.
pub fn object_text(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    }
}

/// The line that says a command was sent.
pub fn sent_line(command: &Command, object: &str) -> String {
    format!(
        "command {} ({command}) sent to {object}; the operator applies it on its next reconcile\n",
        command.seq
    )
}

/// The line that says what became of a command the operator took (a
/// refusal is an error: [`Error::Refused`]).
pub fn outcome_line(command: &Command, object: &str, outcome: &Outcome) -> String {
    let seq = command.seq;
    match outcome {
        Outcome::Applied => format!("command {seq} ({command}) applied to {object}\n"),
        Outcome::Refused(reason) => {
            format!("command {seq} ({command}) to {object} was refused: {reason}\n")
        }
        Outcome::Forgotten => format!(
            "command {seq} ({command}) was taken by the operator for {object}; \
             its outcome is no longer in the record's log\n"
        ),
    }
}

/// What `-o json` prints.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The object's kind.
    pub kind: String,
    /// Its namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// The command, in its wire form (`seq`, `command`, `arg`, `by`, `at`).
    pub command: Command,
    /// `sent`, or with `--wait` `applied`, `refused` or `taken` (taken,
    /// its outcome no longer logged).
    pub outcome: &'static str,
    /// Why the operator refused it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Report {
    /// The report of `command` sent to `name` in `namespace`, taken with
    /// `outcome` when known.
    pub fn new(
        target: &Target,
        namespace: Option<&str>,
        name: &str,
        command: &Command,
        outcome: Option<&Outcome>,
    ) -> Self {
        let (outcome, reason) = match outcome {
            None => ("sent", None),
            Some(Outcome::Applied) => ("applied", None),
            Some(Outcome::Refused(reason)) => ("refused", Some(reason.clone())),
            Some(Outcome::Forgotten) => ("taken", None),
        };
        Report {
            kind: target.resource.kind.clone(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            command: command.clone(),
            outcome,
            reason,
        }
    }
}

/// The user of the kubeconfig context `connect` selects (`--context`, or
/// the current one), from `--kubeconfig` or `$KUBECONFIG` and
/// `~/.kube/config`; `None` without a kubeconfig (in a Pod) or a user.
pub fn kubeconfig_user(connect: &ConnectArgs) -> Option<String> {
    use kube::config::Kubeconfig;
    let config = match &connect.kubeconfig {
        Some(path) => Kubeconfig::read_from(path).ok()?,
        None => Kubeconfig::read().ok()?,
    };
    let context = connect
        .context
        .as_deref()
        .or(config.current_context.as_deref())?;
    config
        .contexts
        .iter()
        .find(|c| c.name == context)?
        .context
        .as_ref()?
        .user
        .clone()
        .filter(|user| !user.is_empty())
}

/// The custom resource as `plural.group`, for messages.
fn resource_name(target: &Target) -> String {
    format!("{}.{}", target.resource.plural, target.resource.group)
}

/// The commands the record of object `name` has taken: `Some(0)` without
/// a record yet, `None` when the records are in the operator's memory.
///
/// # Errors
/// A corrupt record (the operator takes no command until it is fixed),
/// and the API's errors ([`Error::Forbidden`] for a 403).
async fn taken(
    client: &Client,
    target: &Target,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<StateRecord>, Error> {
    match rows::record(client, target, namespace, name).await {
        Ok((record, _)) => Ok(Some(record)),
        Err(ReadError::NoRecord(_) | ReadError::MemoryStore) => Ok(None),
        Err(ReadError::Kube(error)) => {
            let resource = match target.machine.store.place() {
                RecordPlace::Object(kind) => kind.plural().to_owned(),
                RecordPlace::Status | RecordPlace::Memory => resource_name(target),
            };
            Err(Error::from_request(error, "get", &resource, namespace))
        }
        Err(error) => Err(error.into()),
    }
}

/// A command sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    /// The command as written.
    pub command: Command,
    /// How many taken commands were pruned from the annotation.
    pub pruned: usize,
    /// How many read-modify-writes it took (more than 1 after conflicts).
    pub attempts: u32,
}

/// Sends `action`, asked `by`, to object `name` in `namespace` (already
/// resolved: `None` for a cluster-scoped resource): [`check`], then reads,
/// [`append`]s and writes conditionally, again after each 409 Conflict.
///
/// # Errors
/// [`Error::NotSent`] (invalid, unreadable annotation, too many pending),
/// [`Error::ObjectNotFound`], [`Error::KeptChanging`] after
/// [`MAX_ATTEMPTS`] conflicts, [`Error::Forbidden`] for a 403, the API's
/// other errors and a corrupt record.
pub async fn send(
    client: &Client,
    target: &Target,
    namespace: Option<&str>,
    name: &str,
    action: CommandAction,
    by: Option<String>,
) -> Result<Sent, Error> {
    let object = object_text(namespace, name);
    let not_sent = |why| Error::NotSent {
        object: object.clone(),
        why,
    };
    check(&action, &target.machine.graph).map_err(not_sent)?;
    let api = target.api(client, namespace);
    let resource = resource_name(target);
    for attempt in 1..=MAX_ATTEMPTS {
        // The object first, then the record: a record read later has taken
        // at least as much, and pruning by it is still right.
        let current = api
            .get_opt(name)
            .await
            .map_err(|e| Error::from_request(e, "get", &resource, namespace))?
            .ok_or_else(|| Error::ObjectNotFound(format!("{} {object}", target.resource.kind)))?;
        let record = taken(client, target, namespace, name).await?;
        let taken = match (&record, target.machine.store.place()) {
            (_, RecordPlace::Memory) => None,
            (Some(record), _) => Some(record.command_seq),
            (None, _) => Some(0),
        };
        let annotation = current.annotations().get(COMMANDS_ANNOTATION);
        let appended = append(
            annotation.map(String::as_str),
            taken,
            action.clone(),
            by.clone(),
            Timestamp::now(),
        )
        .map_err(not_sent)?;
        let version = current.resource_version().unwrap_or_default();
        let body = patch_body(&appended.list, &version);
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => {
                return Ok(Sent {
                    command: appended.command,
                    pruned: appended.pruned,
                    attempts: attempt,
                });
            }
            Err(kube::Error::Api(status)) if status.is_conflict() => {
                // Someone wrote in between: read again, a little later the
                // more often it happened (spread by the clock's nanoseconds
                // so that two senders part).
                let spread = u64::from(Timestamp::now().subsec_nanosecond().unsigned_abs() % 50);
                tokio::time::sleep(Duration::from_millis(u64::from(attempt) * 20 + spread)).await;
            }
            Err(error) => return Err(Error::from_request(error, "patch", &resource, namespace)),
        }
    }
    Err(Error::KeptChanging {
        object,
        attempts: MAX_ATTEMPTS,
    })
}

/// Whether `--wait` can tell when a command to `target` is taken.
///
/// # Errors
/// [`Error::CannotWait`] for the ephemeral store.
pub fn can_wait(target: &Target) -> Result<(), Error> {
    match target.machine.store.place() {
        RecordPlace::Memory => Err(Error::CannotWait(ReadError::MemoryStore)),
        RecordPlace::Status | RecordPlace::Object(_) => Ok(()),
    }
}

/// Waits, up to `timeout`, until the record of object `name` has taken
/// `command`, and says what became of it.
///
/// # Errors
/// [`Error::WaitTimedOut`], the errors of reading the record.
pub async fn wait(
    client: &Client,
    target: &Target,
    namespace: Option<&str>,
    name: &str,
    command: &Command,
    timeout: Duration,
) -> Result<Outcome, Error> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let record = taken(client, target, namespace, name).await?;
        if let Some(outcome) = record.as_ref().and_then(|r| outcome(r, command.seq)) {
            return Ok(outcome);
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Err(Error::WaitTimedOut {
                seq: command.seq,
                command: command.to_string(),
                object: object_text(namespace, name),
                waited: fsm_core::text::human_duration(timeout),
                taken: record.map_or(0, |r| r.command_seq),
            });
        }
        tokio::time::sleep(POLL.min(deadline - now)).await;
    }
}

#[cfg(test)]
mod tests {
    use fsm_core::{CommandEntry, Machine, StateMeta};

    use super::*;

    fn at() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn seqs(list: &[Command]) -> Vec<u64> {
        list.iter().map(|c| c.seq).collect()
    }

    fn text(seqs: &[u64]) -> String {
        let list: Vec<Command> = seqs
            .iter()
            .map(|&seq| Command::new(seq, CommandAction::Retry))
            .collect();
        Command::list_to_text(&list)
    }

    #[test]
    fn the_first_command_is_number_one_with_who_and_when() {
        let appended = append(
            None,
            Some(0),
            CommandAction::Pause,
            Some("alice".into()),
            at(),
        )
        .unwrap();
        assert_eq!(appended.command.seq, 1);
        assert_eq!(appended.command.by.as_deref(), Some("alice"));
        assert_eq!(appended.command.at, Some(at()));
        assert_eq!(appended.list, std::slice::from_ref(&appended.command));
        assert_eq!(appended.pruned, 0);
    }

    #[test]
    fn numbers_follow_the_highest_of_the_annotation_and_the_record() {
        // Pending 4 and 5, taken up to 3: the next is 6.
        let appended = append(
            Some(&text(&[4, 5])),
            Some(3),
            CommandAction::Retry,
            None,
            at(),
        )
        .unwrap();
        assert_eq!(seqs(&appended.list), [4, 5, 6]);
        // All pruned before (annotation empty), taken up to 7: the next is 8,
        // never a number the operator would skip as taken.
        let appended = append(None, Some(7), CommandAction::Retry, None, at()).unwrap();
        assert_eq!(appended.command.seq, 8);
        // Taken up to 9 though the annotation still holds 8 and 9.
        let appended = append(
            Some(&text(&[8, 9])),
            Some(9),
            CommandAction::Retry,
            None,
            at(),
        )
        .unwrap();
        assert_eq!(seqs(&appended.list), [10]);
    }

    #[test]
    fn taken_commands_are_pruned_and_pending_ones_kept() {
        let appended = append(
            Some(&text(&[1, 2, 3, 4])),
            Some(2),
            CommandAction::Resume,
            None,
            at(),
        )
        .unwrap();
        assert_eq!(seqs(&appended.list), [3, 4, 5]);
        assert_eq!(appended.pruned, 2);
        // Unknown (records in memory): nothing is pruned.
        let appended = append(
            Some(&text(&[1, 2])),
            None,
            CommandAction::Resume,
            None,
            at(),
        )
        .unwrap();
        assert_eq!(seqs(&appended.list), [1, 2, 3]);
    }

    #[test]
    fn a_full_list_is_refused_unless_pruning_makes_room() {
        let full: Vec<u64> = (1..=32).collect();
        let error = append(
            Some(&text(&full)),
            Some(0),
            CommandAction::Retry,
            None,
            at(),
        )
        .unwrap_err();
        assert_eq!(error, SendRefusal::TooMany { pending: 32 });
        assert!(
            error.to_string().contains("is the operator running"),
            "{error}"
        );
        let appended = append(
            Some(&text(&full)),
            Some(1),
            CommandAction::Retry,
            None,
            at(),
        )
        .unwrap();
        assert_eq!(appended.list.len(), 32);
        assert_eq!(appended.command.seq, 33);
        // Longer than the operator reads (someone wrote it by hand), but
        // mostly taken: pruned back to a list it reads.
        let long: Vec<u64> = (1..=40).collect();
        let appended = append(
            Some(&text(&long)),
            Some(39),
            CommandAction::Retry,
            None,
            at(),
        )
        .unwrap();
        assert_eq!(seqs(&appended.list), [40, 41]);
    }

    #[test]
    fn an_unreadable_annotation_or_a_list_the_operator_refuses_is_not_written_over() {
        let error = append(Some("pause!"), Some(0), CommandAction::Pause, None, at()).unwrap_err();
        assert!(matches!(error, SendRefusal::Unreadable(_)), "{error:?}");
        assert!(error.to_string().contains("kubectl annotate"), "{error}");
        let error = append(
            Some(&text(&[5, 5])),
            Some(0),
            CommandAction::Pause,
            None,
            at(),
        )
        .unwrap_err();
        assert_eq!(
            error,
            SendRefusal::Invalid(CommandListError::DuplicateSeq(5))
        );
        // A blank annotation holds nothing to lose.
        let appended = append(Some("  "), Some(0), CommandAction::Pause, None, at()).unwrap();
        assert_eq!(seqs(&appended.list), [1]);
    }

    #[test]
    fn the_write_is_conditional_on_the_version_read() {
        let list = [Command::new(1, CommandAction::Goto("Done".into())).by("bob")];
        let body = patch_body(&list, "42");
        assert_eq!(body["metadata"]["resourceVersion"], "42");
        let written = body["metadata"]["annotations"][COMMANDS_ANNOTATION]
            .as_str()
            .unwrap();
        assert_eq!(
            written,
            r#"[{"seq":1,"command":"goto","arg":"Done","by":"bob"}]"#
        );
        assert_eq!(Command::parse_list(written).unwrap(), list);
    }

    static STATES: [StateMeta; 3] = [
        StateMeta::new("Pending").initial(),
        StateMeta::new("Done").final_state(),
        StateMeta::new("Failed").failed(),
    ];

    #[test]
    fn goto_an_unknown_or_failed_state_is_refused_locally_signals_are_not_judged() {
        let graph = Machine::new("Job", &STATES).graph();
        let error = check(&CommandAction::Goto("Nowhere".into()), &graph).unwrap_err();
        assert_eq!(
            error.to_string(),
            "machine Job has no state \"Nowhere\" (its states: Pending, Done, Failed)"
        );
        let error = check(&CommandAction::Goto("Failed".into()), &graph).unwrap_err();
        assert_eq!(error, SendRefusal::FailedState("Failed".into()));
        assert_eq!(check(&CommandAction::Goto("Done".into()), &graph), Ok(()));
        assert_eq!(
            check(&CommandAction::Signal("approve".into()), &graph),
            Ok(())
        );
        assert_eq!(
            check(&CommandAction::Signal(String::new()), &graph),
            Err(SendRefusal::EmptyName("signal"))
        );
        assert_eq!(check(&CommandAction::Pause, &graph), Ok(()));
    }

    #[test]
    fn a_signal_no_state_declares_is_refused_when_the_graph_lists_signals() {
        let mut graph = Machine::new("Job", &STATES).graph();
        graph.edges.push(fsm_core::GraphEdge {
            from: "Pending".into(),
            to: "Done".into(),
            engine: Some("signal approve".into()),
        });
        assert_eq!(
            check(&CommandAction::Signal("approve".into()), &graph),
            Ok(())
        );
        let error = check(&CommandAction::Signal("reject".into()), &graph).unwrap_err();
        assert_eq!(
            error.to_string(),
            "no state of machine Job declares signal \"reject\" (the signals: approve (Pending → Done))"
        );
    }

    fn record(command_seq: u64, log: Vec<CommandEntry>) -> StateRecord {
        let mut record: StateRecord = serde_json::from_value(json!({
            "schemaVersion": fsm_core::SCHEMA_VERSION,
            "state": "Pending",
            "enteredAt": "2026-01-01T00:00:00Z",
        }))
        .unwrap();
        record.command_seq = command_seq;
        record.commands = log;
        record
    }

    fn entry(seq: u64, refused: Option<&str>) -> CommandEntry {
        CommandEntry {
            seq,
            command: "retry".into(),
            by: None,
            at: at(),
            refused: refused.map(str::to_owned),
        }
    }

    #[test]
    fn the_outcome_is_read_from_the_log_once_taken() {
        let log = vec![entry(3, None), entry(4, Some("paused: resume first"))];
        assert_eq!(outcome(&record(2, vec![]), 3), None);
        assert_eq!(outcome(&record(4, log.clone()), 3), Some(Outcome::Applied));
        assert_eq!(
            outcome(&record(4, log.clone()), 4),
            Some(Outcome::Refused("paused: resume first".into()))
        );
        assert_eq!(outcome(&record(4, log), 1), Some(Outcome::Forgotten));
    }

    #[test]
    fn pending_commands_are_those_above_what_was_taken() {
        assert_eq!(seqs(&pending(Some(&text(&[2, 3, 4])), 2).unwrap()), [3, 4]);
        assert_eq!(pending(None, 5).unwrap(), []);
        assert!(pending(Some("nope"), 0).is_err());
    }

    #[test]
    fn messages_name_the_command_and_the_object() {
        let command = Command::new(4, CommandAction::Pause);
        assert_eq!(
            sent_line(&command, &object_text(Some("shop"), "a")),
            "command 4 (pause) sent to shop/a; the operator applies it on its next reconcile\n"
        );
        assert_eq!(
            outcome_line(&command, "a", &Outcome::Applied),
            "command 4 (pause) applied to a\n"
        );
    }

    #[test]
    fn the_user_is_the_contexts() {
        let dir = std::env::temp_dir().join(format!("kubectl-fsm-user-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://x'}}]\n\
             users: [{name: alice@c, user: {}}, {name: bob, user: {}}]\n\
             contexts: [{name: a, context: {cluster: c, user: alice@c}}, {name: b, context: {cluster: c, user: bob}}]\n\
             current-context: a\n",
        )
        .unwrap();
        let mut connect = ConnectArgs {
            kubeconfig: Some(path.clone()),
            context: None,
        };
        assert_eq!(kubeconfig_user(&connect).as_deref(), Some("alice@c"));
        connect.context = Some("b".into());
        assert_eq!(kubeconfig_user(&connect).as_deref(), Some("bob"));
        connect.context = Some("nope".into());
        assert_eq!(kubeconfig_user(&connect), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
