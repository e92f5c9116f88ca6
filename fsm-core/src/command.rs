//! Commands: what a person asks of one object's machine (pause, resume,
//! retry, go to a state, a signal), and how the record remembers them.
//!
//! A command carries a sequence number. The engine takes the commands of
//! an object in order of their numbers, applies each whose number is above
//! the record's [`StateRecord::command_seq`](crate::StateRecord::command_seq)
//! and commits the new number together with what the command did, in one
//! conditional write: a command is applied once, however often it is seen
//! (a crash before the write sees it again; a conflict decides again; a
//! new leader reads the number the old one committed).
//!
//! The wire form (what `kubectl fsm` writes into the object's
//! `operator-fsm.io/commands` annotation) is a JSON list:
//!
//! ```
//! use fsm_core::{Command, CommandAction};
//!
//! let text = r#"[{"seq": 3, "command": "pause", "by": "alice"},
//!                {"seq": 4, "command": "signal", "arg": "approve"}]"#;
//! let commands = Command::parse_list(text).unwrap();
//! assert_eq!(commands[0].action, CommandAction::Pause);
//! assert_eq!(commands[1].action, CommandAction::Signal("approve".into()));
//! assert_eq!(commands[1].to_string(), "signal approve");
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;

/// How many applied or refused commands a record remembers.
pub const COMMAND_LOG_LIMIT: usize = 10;

/// How many commands one object may carry; a longer list is refused as a
/// whole (a person's tool prunes what the machine has taken).
pub const MAX_PENDING_COMMANDS: usize = 32;

/// What a command asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandAction {
    /// Stop running anything for the object (handlers, compensations,
    /// timeouts, spec changes) until `resume`. Deletion still proceeds.
    Pause,
    /// End a pause. The time paused does not count against the state's
    /// `timeout`.
    Resume,
    /// Run now: a failed object starts again from the initial state (as
    /// `on_failed_spec_change = restart` does); a state waiting for its
    /// next attempt runs at once with its attempts counted from zero; an
    /// unwinding chain tries its current step at once.
    Retry,
    /// Move to the named state: one the current state may move to, one
    /// the object has been in (its history or trail), or the initial state.
    Goto(String),
    /// A named signal the current state declares
    /// (`#[fsm(on_signal(name) = State)]`): it moves to that state.
    Signal(String),
    /// A command this engine does not know; it is refused.
    Unknown(String),
}

/// One command, as a person's tool writes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "WireCommand", into = "WireCommand")]
pub struct Command {
    /// Its sequence number: applied only when above the record's.
    pub seq: u64,
    /// What it asks for.
    pub action: CommandAction,
    /// Who asked, as the tool says (not authenticated: RBAC on the object
    /// decides who may write commands at all).
    pub by: Option<String>,
    /// When it was asked for, as the tool says.
    pub at: Option<Timestamp>,
}

/// The wire form: `{"seq": 4, "command": "goto", "arg": "Serving",
/// "by": "alice", "at": "…"}`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct WireCommand {
    seq: u64,
    command: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    arg: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at: Option<Timestamp>,
}

impl From<WireCommand> for Command {
    fn from(wire: WireCommand) -> Self {
        let action = match (wire.command.as_str(), wire.arg) {
            ("pause", None) => CommandAction::Pause,
            ("resume", None) => CommandAction::Resume,
            ("retry", None) => CommandAction::Retry,
            ("goto", Some(state)) => CommandAction::Goto(state),
            ("signal", Some(signal)) => CommandAction::Signal(signal),
            (name, Some(arg)) => CommandAction::Unknown(format!("{name} {arg}")),
            (name, None) => CommandAction::Unknown(name.to_owned()),
        };
        Command {
            seq: wire.seq,
            action,
            by: wire.by,
            at: wire.at,
        }
    }
}

impl From<Command> for WireCommand {
    fn from(command: Command) -> Self {
        let (name, arg) = match command.action {
            CommandAction::Pause => ("pause".to_owned(), None),
            CommandAction::Resume => ("resume".to_owned(), None),
            CommandAction::Retry => ("retry".to_owned(), None),
            CommandAction::Goto(state) => ("goto".to_owned(), Some(state)),
            CommandAction::Signal(signal) => ("signal".to_owned(), Some(signal)),
            CommandAction::Unknown(text) => (text, None),
        };
        WireCommand {
            seq: command.seq,
            command: name,
            arg,
            by: command.by,
            at: command.at,
        }
    }
}

/// Why a command list could not be read. Nothing in it is applied; the
/// list stays as it is for a person to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommandListError {
    /// Not a JSON list of commands.
    #[error("the command list is malformed: {0}")]
    Malformed(String),
    /// More commands than [`MAX_PENDING_COMMANDS`].
    #[error("the command list holds {found} commands, more than the {limit} allowed")]
    TooMany {
        /// How many it holds.
        found: usize,
        /// The limit.
        limit: usize,
    },
    /// Two commands with one sequence number.
    #[error("two commands have sequence number {0}")]
    DuplicateSeq(u64),
}

impl Command {
    /// A command numbered `seq`, asking for `action`.
    pub fn new(seq: u64, action: CommandAction) -> Self {
        Command {
            seq,
            action,
            by: None,
            at: None,
        }
    }

    /// Says who asked.
    #[must_use]
    pub fn by(mut self, who: impl Into<String>) -> Self {
        self.by = Some(who.into());
        self
    }

    /// Reads a command list (the annotation's text), in order of sequence
    /// number.
    ///
    /// # Errors
    /// [`CommandListError`] for text that is not a list of commands, a list
    /// longer than [`MAX_PENDING_COMMANDS`], or a sequence number used twice.
    pub fn parse_list(text: &str) -> Result<Vec<Command>, CommandListError> {
        let mut commands: Vec<Command> =
            serde_json::from_str(text).map_err(|e| CommandListError::Malformed(e.to_string()))?;
        if commands.len() > MAX_PENDING_COMMANDS {
            return Err(CommandListError::TooMany {
                found: commands.len(),
                limit: MAX_PENDING_COMMANDS,
            });
        }
        commands.sort_by_key(|c| c.seq);
        if let Some(pair) = commands.windows(2).find(|w| w[0].seq == w[1].seq) {
            return Err(CommandListError::DuplicateSeq(pair[0].seq));
        }
        Ok(commands)
    }

    /// The list as its wire text.
    pub fn list_to_text(commands: &[Command]) -> String {
        // Plain strings and numbers: encoding cannot fail.
        serde_json::to_string(commands).unwrap_or_else(|_| "[]".to_owned())
    }
}

impl fmt::Display for CommandAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandAction::Pause => f.write_str("pause"),
            CommandAction::Resume => f.write_str("resume"),
            CommandAction::Retry => f.write_str("retry"),
            CommandAction::Goto(state) => write!(f, "goto {state}"),
            CommandAction::Signal(signal) => write!(f, "signal {signal}"),
            CommandAction::Unknown(text) => write!(f, "{text}"),
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.action.fmt(f)
    }
}

/// A pause in force.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pause {
    /// The command that paused.
    pub seq: u64,
    /// Who asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// When the pause was applied.
    pub at: Timestamp,
}

/// A command the engine took, applied or refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandEntry {
    /// Its sequence number.
    pub seq: u64,
    /// What it asked for, as text (`goto Serving`).
    pub command: String,
    /// Who asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// When the engine took it.
    pub at: Timestamp,
    /// Why it was refused; `None` when it was applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl CommandEntry {
    /// Whether the command was applied.
    pub fn applied(&self) -> bool {
        self.refused.is_none()
    }
}

/// A state that stays but reports that it cannot reach what it keeps
/// converged ([`Transition::degraded`](crate::Transition::degraded)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Degraded {
    /// What the handler said.
    pub reason: String,
    /// When the state first reported it, since it last succeeded; the
    /// wait before the next try grows with the time since.
    pub since: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_form_reads_every_action_and_writes_it_back() {
        let text = r#"[{"seq":1,"command":"pause"},{"seq":2,"command":"resume"},
            {"seq":3,"command":"retry"},{"seq":4,"command":"goto","arg":"Serving"},
            {"seq":5,"command":"signal","arg":"approve","by":"bob"}]"#;
        let commands = Command::parse_list(text).unwrap();
        let actions: Vec<_> = commands.iter().map(|c| c.action.clone()).collect();
        assert_eq!(
            actions,
            [
                CommandAction::Pause,
                CommandAction::Resume,
                CommandAction::Retry,
                CommandAction::Goto("Serving".into()),
                CommandAction::Signal("approve".into()),
            ]
        );
        assert_eq!(commands[4].by.as_deref(), Some("bob"));
        let again = Command::parse_list(&Command::list_to_text(&commands)).unwrap();
        assert_eq!(again, commands);
    }

    #[test]
    fn unknown_commands_and_missing_arguments_are_read_as_unknown() {
        let commands = Command::parse_list(
            r#"[{"seq":1,"command":"explode"},{"seq":2,"command":"goto"},
                {"seq":3,"command":"pause","arg":"now"}]"#,
        )
        .unwrap();
        assert_eq!(commands[0].action, CommandAction::Unknown("explode".into()));
        assert_eq!(commands[1].action, CommandAction::Unknown("goto".into()));
        assert_eq!(
            commands[2].action,
            CommandAction::Unknown("pause now".into())
        );
    }

    #[test]
    fn lists_come_back_in_order_of_sequence_number() {
        let commands =
            Command::parse_list(r#"[{"seq":9,"command":"resume"},{"seq":2,"command":"pause"}]"#)
                .unwrap();
        assert_eq!(commands.iter().map(|c| c.seq).collect::<Vec<_>>(), [2, 9]);
    }

    #[test]
    fn bad_lists_are_refused_whole_with_what_is_wrong() {
        for (text, expected) in [
            ("{}", "malformed"),
            ("[{\"command\":\"pause\"}]", "malformed"),
            ("[{\"seq\":-1,\"command\":\"pause\"}]", "malformed"),
            ("not json", "malformed"),
            (
                "[{\"seq\":1,\"command\":\"pause\"},{\"seq\":1,\"command\":\"retry\"}]",
                "sequence number 1",
            ),
        ] {
            let error = Command::parse_list(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
        }
        let many: Vec<_> = (1..=33)
            .map(|seq| Command::new(seq, CommandAction::Retry))
            .collect();
        let error = Command::parse_list(&Command::list_to_text(&many)).unwrap_err();
        assert_eq!(
            error,
            CommandListError::TooMany {
                found: 33,
                limit: 32
            }
        );
    }
}
