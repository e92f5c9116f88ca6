//! A person's commands ([`Command`]): what each does to the record, or why
//! it is refused. Pure, like the rest of [`Decider`]'s decisions.
//!
//! Every command taken, applied or refused, moves the record's
//! `command_seq` to its number and is logged in the record's `commands`;
//! the decision commits both with what the command did, in one write, so
//! that no command is applied twice.

use std::time::Duration;

use crate::clock::add;
use crate::engine::decide::{Decider, Decision, Forget};
use crate::engine::{Effect, Observed};
use crate::record::StateRecord;
use crate::{
    command::COMMAND_LOG_LIMIT, command::Command, command::CommandAction, command::CommandEntry,
    command::Pause, engine::DecideError, fsm::Fsm, machine::StateMeta,
};

/// What a command does, once it is allowed.
enum Applied {
    /// The record was changed in place; commit it.
    InPlace,
    /// The command led to a decision of its own (a move, a restart, a
    /// failure); commit that.
    Decided(Box<Decision>),
}

impl Decider<'_> {
    /// Takes `command`: applies it, or refuses it with the reason, and
    /// commits either with the command's number.
    ///
    /// # Errors
    /// [`DecideError`] for a machine that cannot build its initial state
    /// or encode the state a command moves to.
    pub fn command<S: Fsm>(
        &self,
        mut record: StateRecord,
        command: &Command,
        observed: &Observed,
    ) -> Result<Decision, DecideError> {
        record.command_seq = command.seq;
        let applied = match self.allowed::<S>(&record, &command.action) {
            Err(refusal) => return Ok(self.refuse(record, command, refusal)),
            Ok(()) => self.apply_command::<S>(&mut record, command, observed)?,
        };
        let mut decision = match applied {
            Applied::InPlace => Decision::commit(record, Some(Duration::ZERO), Vec::new()),
            Applied::Decided(decision) => *decision,
        };
        log(&mut decision.record, self.entry(command, None));
        decision.effects.insert(
            0,
            Effect::CommandApplied {
                seq: command.seq,
                command: command.to_string(),
                by: command.by.clone(),
            },
        );
        // A command is never batched or left for later: its number must be
        // committed with what it did.
        if let crate::engine::Then::Proceed = decision.then {
            decision.then = crate::engine::Then::Commit {
                requeue: Some(Duration::ZERO),
            };
        }
        Ok(decision)
    }

    /// Why `action` may not be applied to `record` now, if it may not.
    fn allowed<S: Fsm>(&self, record: &StateRecord, action: &CommandAction) -> Result<(), String> {
        let state = record.state.as_str();
        let meta = self.meta(state);
        let unwinding = record.compensation.as_ref().is_some_and(|u| u.is_active());
        let paused = record.paused.is_some();
        match action {
            CommandAction::Pause if paused => Err("already paused".to_owned()),
            CommandAction::Resume if !paused => Err("not paused".to_owned()),
            CommandAction::Pause | CommandAction::Resume => Ok(()),
            CommandAction::Retry | CommandAction::Signal(_) if paused => {
                Err("paused: resume first".to_owned())
            }
            CommandAction::Retry if meta.is_some_and(StateMeta::is_final) && !unwinding => {
                Err(format!("{state} is a final state: nothing to retry"))
            }
            CommandAction::Retry => Ok(()),
            CommandAction::Goto(_) | CommandAction::Signal(_) if unwinding => Err(format!(
                "compensation is running in {state}: wait until it rests, then try again"
            )),
            CommandAction::Goto(target) => self.goto_allowed::<S>(record, target).map(|_| ()),
            CommandAction::Signal(signal) => match meta.and_then(|m| m.signal_target(signal)) {
                Some(_) => Ok(()),
                None => Err(takes_no_signal(state, signal, meta)),
            },
            CommandAction::Unknown(text) => Err(format!(
                "unknown command '{text}': the commands are pause, resume, retry, \
                 goto STATE and signal NAME"
            )),
        }
    }

    /// The state `goto target` enters, with its data, when it is allowed:
    /// a state of the machine, not failed, that the current state may move
    /// to, that the object has been in (history or trail), or the initial
    /// state; data-carrying states only with data the record holds.
    fn goto_allowed<S: Fsm>(
        &self,
        record: &StateRecord,
        target: &str,
    ) -> Result<(&'static str, Option<serde_json::Value>), String> {
        let Some(meta) = self.machine.resolve(target) else {
            return Err(format!(
                "machine {} has no state {target}",
                self.machine.name()
            ));
        };
        let name = meta.name();
        if meta.is_failed() {
            return Err(format!(
                "{name} is a failed state: goto moves to a state the workflow can go on from"
            ));
        }
        let current = self.meta(&record.state);
        let declared = current.is_some_and(|m| m.allows(name));
        let visited = record.state == name
            || record.history.iter().any(|h| h.to == name)
            || record.trail.iter().any(|e| e.state == name);
        if !(declared || visited || meta.is_initial()) {
            return Err(format!(
                "{name} is neither a declared target of {}, a state this object has been in, \
                 nor the initial state",
                record.state
            ));
        }
        let data = if meta.is_initial() {
            S::initial_state()
                .and_then(|s| s.to_parts().ok())
                .and_then(|(_, data)| data)
        } else if record.state == name {
            record.data.clone()
        } else {
            record
                .trail
                .iter()
                .rev()
                .find(|e| e.state == name)
                .and_then(|e| e.data.clone())
        };
        if S::from_parts(name, data.as_ref()).is_err() {
            return Err(format!(
                "{name} carries data this object's record does not hold: goto cannot build it"
            ));
        }
        Ok((name, data))
    }

    /// Applies an allowed command.
    fn apply_command<S: Fsm>(
        &self,
        record: &mut StateRecord,
        command: &Command,
        observed: &Observed,
    ) -> Result<Applied, DecideError> {
        let reason = format!("{}", Asked(command));
        Ok(match &command.action {
            CommandAction::Pause => {
                record.paused = Some(Pause {
                    seq: command.seq,
                    by: command.by.clone(),
                    at: self.now,
                });
                Applied::InPlace
            }
            CommandAction::Resume => {
                self.resume(record);
                Applied::InPlace
            }
            CommandAction::Retry => self.retry::<S>(record, reason, observed)?,
            CommandAction::Goto(target) => {
                let Ok((name, data)) = self.goto_allowed::<S>(record, target) else {
                    return Ok(Applied::InPlace);
                };
                record.compensation = None;
                record.last_error = None;
                let entered = self.enter(record, name, data, Some(reason));
                Applied::Decided(Box::new(Decision::commit(
                    record.clone(),
                    Some(Duration::ZERO),
                    vec![entered],
                )))
            }
            CommandAction::Signal(signal) => {
                let Some(target) = self
                    .meta(&record.state)
                    .and_then(|m| m.signal_target(signal))
                else {
                    return Ok(Applied::InPlace);
                };
                if self.meta(target).is_some_and(StateMeta::is_failed) {
                    let decision = self.begin_unwind(record.clone(), reason, target, Vec::new());
                    Applied::Decided(Box::new(decision))
                } else {
                    record.last_error = None;
                    let entered = self.enter(record, target, None, Some(reason));
                    Applied::Decided(Box::new(Decision::commit(
                        record.clone(),
                        Some(Duration::ZERO),
                        vec![entered],
                    )))
                }
            }
            CommandAction::Unknown(_) => Applied::InPlace,
        })
    }

    /// Ends the pause; the time paused does not count against the state's
    /// timeout or its backoff.
    fn resume(&self, record: &mut StateRecord) {
        let Some(pause) = record.paused.take() else {
            return;
        };
        let paused_for = crate::clock::until(pause.at, self.now);
        let entered_at = record.entered_at;
        record.entered_at = add(entered_at, paused_for);
        // The trail entry of the current state keeps matching it (a
        // checkpoint finds it by its entry time).
        if let Some(entry) = record
            .trail
            .last_mut()
            .filter(|e| e.state == record.state && e.entered_at == entered_at)
        {
            entry.entered_at = record.entered_at;
        }
        if let Some(at) = record.next_attempt_at.as_mut() {
            *at = add(*at, paused_for);
        }
        if let Some(unwind) = record.compensation.as_mut().filter(|u| u.is_active())
            && let Some(at) = unwind.next_attempt_at.as_mut()
        {
            *at = add(*at, paused_for);
        }
    }

    /// `retry`: a failed object starts again; anything else runs now.
    fn retry<S: Fsm>(
        &self,
        record: &mut StateRecord,
        reason: String,
        observed: &Observed,
    ) -> Result<Applied, DecideError> {
        if let Some(unwind) = record.compensation.as_mut().filter(|u| u.is_active()) {
            unwind.attempt = 0;
            unwind.next_attempt_at = None;
            return Ok(Applied::InPlace);
        }
        if self.meta(&record.state).is_some_and(StateMeta::is_failed) {
            record.compensation = None;
            let decision = self.start_again::<S>(
                record.clone(),
                reason,
                observed,
                Vec::new(),
                Forget::OpenScope,
            )?;
            return Ok(Applied::Decided(Box::new(decision)));
        }
        record.attempt = 0;
        record.failures_without_attempt = 0;
        record.next_attempt_at = None;
        Ok(Applied::InPlace)
    }

    /// Refuses `command`: only its number and the refusal are committed.
    fn refuse(&self, mut record: StateRecord, command: &Command, reason: String) -> Decision {
        log(&mut record, self.entry(command, Some(reason.clone())));
        let effects = vec![Effect::CommandRefused {
            seq: command.seq,
            command: command.to_string(),
            by: command.by.clone(),
            reason,
        }];
        Decision::commit(record, Some(Duration::ZERO), effects)
    }

    fn entry(&self, command: &Command, refused: Option<String>) -> CommandEntry {
        CommandEntry {
            seq: command.seq,
            command: command.to_string(),
            by: command.by.clone(),
            at: self.now,
            refused,
        }
    }
}

/// Adds `entry` to the record's command log, keeping the newest
/// [`COMMAND_LOG_LIMIT`].
fn log(record: &mut StateRecord, entry: CommandEntry) {
    let excess = (record.commands.len() + 1).saturating_sub(COMMAND_LOG_LIMIT);
    record.commands.drain(..excess);
    record.commands.push(entry);
}

fn takes_no_signal(state: &str, signal: &str, meta: Option<&StateMeta>) -> String {
    let taken: Vec<&str> = meta
        .map(|m| m.signals().iter().map(|(name, _)| *name).collect())
        .unwrap_or_default();
    if taken.is_empty() {
        format!("{state} takes no signals (asked for '{signal}')")
    } else {
        format!(
            "{state} takes no signal '{signal}'; it takes: {}",
            taken.join(", ")
        )
    }
}

/// A command as the history's reason says it: `goto Serving (command 4 by
/// alice)`.
struct Asked<'a>(&'a Command);

impl std::fmt::Display for Asked<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Asked(command) = self;
        write!(f, "{command} (command {}", command.seq)?;
        if let Some(by) = &command.by {
            write!(f, " by {by}")?;
        }
        f.write_str(")")
    }
}
