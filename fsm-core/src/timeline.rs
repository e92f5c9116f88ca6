//! An object's life over time, from its record alone: each state it
//! entered (as far back as the record's history goes) with how long it
//! stayed, the marks of what happened on the way (failed attempts and
//! their errors, retries exhausted, timeouts, the next attempt, the
//! commands people sent and what became of them) and the compensation
//! chain. Drawn as text for a terminal ([`Timeline::text`]); the web view
//! draws the same data as a picture. Pure: no request is made.

use std::fmt::Write as _;
use std::time::Duration;

use crate::clock::Timestamp;
use crate::record::StateRecord;
use crate::text::human_duration;

/// A stay in a state: from when it was entered until the next transition
/// (or now).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stay {
    /// The state.
    pub state: String,
    /// The sequence number of the transition that entered it.
    pub seq: u64,
    /// When it was entered.
    pub from: Timestamp,
    /// When it was left; now for the current state.
    pub until: Timestamp,
    /// The object is still in it.
    pub current: bool,
}

impl Stay {
    /// How long the stay lasted (so far, for the current state).
    pub fn duration(&self) -> Duration {
        self.until.duration_since(self.from).unsigned_abs()
    }
}

/// What a [`Mark`] of a timeline stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkKind {
    /// Failed attempts or an error: retries exhausted, a permanent
    /// failure, the failed attempts of the current state so far.
    Error,
    /// A state or an attempt timed out.
    Timeout,
    /// The next attempt of the current state, when scheduled.
    NextAttempt,
    /// A person's command that was applied.
    Command,
    /// A person's command that was refused.
    Refused,
    /// The engine moved by itself for another reason (a spec change).
    Moved,
}

impl MarkKind {
    /// A one-character symbol, for the terminal's timeline.
    pub fn symbol(self) -> char {
        match self {
            MarkKind::Error => '✗',
            MarkKind::Timeout => '◔',
            MarkKind::NextAttempt => '↻',
            MarkKind::Command => '▲',
            MarkKind::Refused => '△',
            MarkKind::Moved => '•',
        }
    }

    /// A name, for classes and legends: `error`, `timeout`,
    /// `next-attempt`, `command`, `refused`, `moved`.
    pub fn name(self) -> &'static str {
        match self {
            MarkKind::Error => "error",
            MarkKind::Timeout => "timeout",
            MarkKind::NextAttempt => "next-attempt",
            MarkKind::Command => "command",
            MarkKind::Refused => "refused",
            MarkKind::Moved => "moved",
        }
    }
}

/// Something that happened at a point of the timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    /// When.
    pub at: Timestamp,
    /// What kind of thing.
    pub kind: MarkKind,
    /// The state it happened in (the one left, for a transition), when
    /// it concerns one: commands concern the object.
    pub state: Option<String>,
    /// What, for people.
    pub text: String,
}

/// The compensation chain on the timeline: the unwinding that ran (or
/// runs), and the compensations still to run, newest state first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compensation {
    /// When unwinding started; `None` when none has started.
    pub from: Option<Timestamp>,
    /// When it ended, or now while it runs.
    pub until: Option<Timestamp>,
    /// It still runs.
    pub running: bool,
    /// Why it ran.
    pub reason: Option<String>,
    /// The states whose compensation would run (or runs) on a failure,
    /// in the order it runs them (the last entered first), with whether
    /// their scope has closed (`true`: only deletion undoes them).
    pub chain: Vec<(String, bool)>,
    /// The steps whose compensation failed for good, with their errors.
    pub failures: Vec<(String, String)>,
}

/// An object's life over time: see the module's documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeline {
    /// Where the timeline starts: the oldest stay or mark.
    pub start: Timestamp,
    /// Where it ends: now, or the next attempt when it is later.
    pub end: Timestamp,
    /// When it was drawn.
    pub now: Timestamp,
    /// The record's history no longer holds the first transitions (it
    /// keeps the latest ones only): the timeline starts later than the
    /// object's life.
    pub truncated: bool,
    /// The stays, oldest first.
    pub stays: Vec<Stay>,
    /// The marks, oldest first.
    pub marks: Vec<Mark>,
    /// The compensation chain, when there is one (ran, runs, or would
    /// run).
    pub compensation: Option<Compensation>,
}

/// What kind of mark a history entry's `reason` makes.
fn reason_kind(reason: &str) -> MarkKind {
    if reason.contains("timed out") {
        MarkKind::Timeout
    } else if reason.contains("(command ") {
        MarkKind::Command
    } else if reason.contains("exhausted") || reason.contains("fail") || reason.contains("error") {
        MarkKind::Error
    } else {
        MarkKind::Moved
    }
}

impl Timeline {
    /// The timeline of `record` as of `now`.
    ///
    /// ```
    /// use fsm_core::{HistoryEntry, StateRecord, Timeline};
    ///
    /// let at = |s: &str| s.parse().unwrap();
    /// let record: StateRecord = serde_json::from_value(serde_json::json!({
    ///     "schemaVersion": 1, "machineVersion": 1, "state": "Seeding",
    ///     "enteredAt": "2026-01-01T00:01:00Z", "attempt": 2,
    ///     "lastError": "connection refused",
    ///     "history": [
    ///         {"seq": 1, "to": "Pending", "at": "2026-01-01T00:00:00Z"},
    ///         {"seq": 2, "from": "Pending", "to": "Seeding", "at": "2026-01-01T00:01:00Z"}
    ///     ]
    /// })).unwrap();
    /// let timeline = Timeline::of(&record, at("2026-01-01T00:03:00Z"));
    /// assert_eq!(timeline.stays.len(), 2);
    /// assert_eq!(timeline.stays[0].duration().as_secs(), 60);
    /// assert!(timeline.stays[1].current);
    /// assert!(timeline.marks[0].text.contains("connection refused"));
    /// ```
    pub fn of(record: &StateRecord, now: Timestamp) -> Self {
        let mut stays: Vec<Stay> = Vec::new();
        let mut marks: Vec<Mark> = Vec::new();
        for (i, entry) in record.history.iter().enumerate() {
            let next = record.history.get(i + 1);
            let current = next.is_none() && entry.to == record.state;
            stays.push(Stay {
                state: entry.to.clone(),
                seq: entry.seq,
                from: entry.at,
                until: next.map_or(now, |n| n.at).max(entry.at),
                current,
            });
            if let Some(reason) = &entry.reason {
                let from = entry.from.as_deref().unwrap_or("?");
                marks.push(Mark {
                    at: entry.at,
                    kind: reason_kind(reason),
                    state: entry.from.clone(),
                    text: format!("{from} → {}: {reason}", entry.to),
                });
            }
        }
        if !stays.last().is_some_and(|s| s.current) {
            // No history (or a history that does not reach the current
            // state): the current state from its entry.
            stays.push(Stay {
                state: record.state.clone(),
                seq: record.transitions,
                from: record.entered_at,
                until: now.max(record.entered_at),
                current: true,
            });
        }
        if record.attempt > 0 || record.failures_without_attempt > 0 {
            let error = record.last_error.as_deref().unwrap_or("no error kept");
            let text = if record.attempt > 0 {
                format!(
                    "{} failed attempt{} so far in {}, the last: {error}",
                    record.attempt,
                    if record.attempt == 1 { "" } else { "s" },
                    record.state
                )
            } else {
                format!(
                    "{} failure{} in a row in {} (no attempt spent), the last: {error}",
                    record.failures_without_attempt,
                    if record.failures_without_attempt == 1 {
                        ""
                    } else {
                        "s"
                    },
                    record.state
                )
            };
            marks.push(Mark {
                at: now,
                kind: MarkKind::Error,
                state: Some(record.state.clone()),
                text,
            });
        }
        if let Some(next) = record.next_attempt_at {
            marks.push(Mark {
                at: next,
                kind: MarkKind::NextAttempt,
                state: Some(record.state.clone()),
                text: format!("next attempt in {}", record.state),
            });
        }
        for command in &record.commands {
            let by = command
                .by
                .as_deref()
                .map(|by| format!(" by {by}"))
                .unwrap_or_default();
            let (kind, outcome) = match &command.refused {
                None => (MarkKind::Command, "applied".to_owned()),
                Some(why) => (MarkKind::Refused, format!("refused: {why}")),
            };
            marks.push(Mark {
                at: command.at,
                kind,
                state: None,
                text: format!(
                    "command #{} {}{by}: {outcome}",
                    command.seq, command.command
                ),
            });
        }
        marks.sort_by_key(|m| m.at);
        let compensation = Self::compensation(record, now);
        let mut start = stays.first().map_or(now, |s| s.from);
        start = marks.iter().map(|m| m.at).fold(start, Timestamp::min);
        if let Some(from) = compensation.as_ref().and_then(|c| c.from) {
            start = start.min(from);
        }
        let end = marks
            .iter()
            .map(|m| m.at)
            .chain(stays.iter().map(|s| s.until))
            .fold(now, Timestamp::max);
        Timeline {
            start,
            end,
            now,
            truncated: record.history.first().is_some_and(|e| e.seq > 1),
            stays,
            marks,
            compensation,
        }
    }

    fn compensation(record: &StateRecord, now: Timestamp) -> Option<Compensation> {
        let chain: Vec<(String, bool)> = record
            .trail
            .iter()
            .rev()
            .map(|entry| (entry.state.clone(), entry.closed))
            .collect();
        let unwind = record.compensation.as_ref();
        if chain.is_empty() && unwind.is_none() {
            return None;
        }
        Some(Compensation {
            from: unwind.map(|u| u.started_at),
            until: unwind.map(|u| u.finished_at.unwrap_or(now)),
            running: unwind.is_some_and(|u| u.finished_at.is_none()),
            reason: unwind.map(|u| u.reason.clone()),
            chain,
            failures: unwind
                .map(|u| {
                    u.failures
                        .iter()
                        .map(|f| (f.step.clone(), f.error.clone()))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// Where `at` falls on the timeline, from 0 (its start) to 1 (its end).
    pub fn fraction(&self, at: Timestamp) -> f64 {
        let span = self.end.duration_since(self.start).as_secs_f64();
        if span <= 0.0 {
            return 0.0;
        }
        (at.duration_since(self.start).as_secs_f64() / span).clamp(0.0, 1.0)
    }

    /// How long after the timeline's start `at` is, for people (`+1m05s`).
    pub fn offset(&self, at: Timestamp) -> String {
        let after = at.duration_since(self.start).unsigned_abs();
        if after.is_zero() {
            "+0s".to_owned()
        } else {
            format!("+{}", human_duration(after))
        }
    }

    /// The timeline for a terminal, one line per stay and mark in order of
    /// time: when (after the start), a lane `width` characters wide with
    /// the stay's bar (`█`) or the mark's symbol ([`MarkKind::symbol`]) at
    /// its place in time, and what it was; then the compensation chain.
    ///
    /// ```text
    /// Timeline: 2026-01-01T00:00:00Z to now (3m), oldest first
    ///   +0s     ▕███████████████               ▏ #1 Pending 1m
    ///   +1m     ▕              ████████████████▏ #2 Seeding 2m (now)
    ///   +3m     ▕                              ✗ 2 failed attempts so far in Seeding, the last: connection refused
    /// ```
    pub fn text(&self, width: usize) -> String {
        let width = width.max(8);
        let column = |at: Timestamp| -> usize {
            // A fraction in [0, 1] of a small width: the cast is exact
            // enough and cannot overflow.
            let cells = (width - 1) as f64;
            (self.fraction(at) * cells).round() as usize
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Timeline: {} to {} ({}), oldest first{}",
            self.start,
            if self.end > self.now {
                "the next attempt"
            } else {
                "now"
            },
            human_duration(self.end.duration_since(self.start).unsigned_abs()),
            if self.truncated {
                "; earlier transitions are no longer in the record's history"
            } else {
                ""
            }
        );
        // Each line: when it happened, the lane, the text.
        let mut lines: Vec<(Timestamp, u8, String, String)> = Vec::new();
        for stay in &self.stays {
            let (from, until) = (column(stay.from), column(stay.until).max(column(stay.from)));
            let mut lane = vec![' '; width];
            for cell in &mut lane[from..=until.min(width - 1)] {
                *cell = '█';
            }
            let now = if stay.current { " (now)" } else { "" };
            lines.push((
                stay.from,
                0,
                lane.into_iter().collect(),
                format!(
                    "#{} {} {}{now}",
                    stay.seq,
                    stay.state,
                    human_duration(stay.duration())
                ),
            ));
        }
        for mark in &self.marks {
            let mut lane = vec![' '; width];
            lane[column(mark.at).min(width - 1)] = mark.kind.symbol();
            lines.push((mark.at, 1, lane.into_iter().collect(), mark.text.clone()));
        }
        if let Some(Compensation {
            from: Some(from),
            until: Some(until),
            running,
            reason,
            ..
        }) = &self.compensation
        {
            let mut lane = vec![' '; width];
            let (first, last) = (column(*from), column(*until).max(column(*from)));
            for cell in &mut lane[first..=last.min(width - 1)] {
                *cell = '░';
            }
            let state = if *running { "running" } else { "done" };
            lines.push((
                *from,
                2,
                lane.into_iter().collect(),
                format!(
                    "compensation ({state}, {}): {}",
                    human_duration(until.duration_since(*from).unsigned_abs()),
                    reason.as_deref().unwrap_or_default()
                ),
            ));
        }
        lines.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        for (at, _, lane, text) in lines {
            let _ = writeln!(out, "  {:<8}▕{lane}▏ {text}", self.offset(at));
        }
        if let Some(compensation) = &self.compensation {
            if !compensation.chain.is_empty() {
                let chain: Vec<String> = compensation
                    .chain
                    .iter()
                    .map(|(state, closed)| {
                        if *closed {
                            format!("{state} (closed scope: on deletion only)")
                        } else {
                            state.clone()
                        }
                    })
                    .collect();
                let _ = writeln!(
                    out,
                    "  compensation chain, in the order it runs: {}",
                    chain.join(" → ")
                );
            }
            for (step, error) in &compensation.failures {
                let _ = writeln!(out, "  compensation of {step} failed for good: {error}");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::CommandEntry;
    use crate::record::{HistoryEntry, TrailEntry, Unwind, UnwindFailure};

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn entry(
        seq: u64,
        from: Option<&str>,
        to: &str,
        at: &str,
        reason: Option<&str>,
    ) -> HistoryEntry {
        HistoryEntry {
            seq,
            from: from.map(str::to_owned),
            to: to.to_owned(),
            at: t(at),
            reason: reason.map(str::to_owned),
        }
    }

    fn record() -> StateRecord {
        let mut record: StateRecord = serde_json::from_value(serde_json::json!({
            "schemaVersion": 1, "machineVersion": 1, "state": "Failed",
            "enteredAt": "2026-01-01T00:05:00Z"
        }))
        .unwrap();
        record.history = vec![
            entry(1, None, "Pending", "2026-01-01T00:00:00Z", None),
            entry(
                2,
                Some("Pending"),
                "Provisioning",
                "2026-01-01T00:01:00Z",
                None,
            ),
            entry(
                3,
                Some("Provisioning"),
                "Failed",
                "2026-01-01T00:05:00Z",
                Some("retries exhausted in Provisioning after 3 attempts: 422"),
            ),
        ];
        record.trail = vec![TrailEntry {
            state: "Provisioning".into(),
            data: None,
            entered_at: t("2026-01-01T00:01:00Z"),
            closed: false,
        }];
        record.compensation = Some(Unwind {
            reason: "retries exhausted".into(),
            target: Some("Failed".into()),
            restart: false,
            attempt: 0,
            next_attempt_at: None,
            failures: vec![UnwindFailure {
                step: "Provisioning".into(),
                error: "gone".into(),
            }],
            started_at: t("2026-01-01T00:05:00Z"),
            finished_at: Some(t("2026-01-01T00:05:10Z")),
        });
        record.commands = vec![
            CommandEntry {
                seq: 1,
                command: "retry".into(),
                by: Some("alice".into()),
                at: t("2026-01-01T00:06:00Z"),
                refused: Some("Failed is a final state".into()),
            },
            CommandEntry {
                seq: 2,
                command: "pause".into(),
                by: None,
                at: t("2026-01-01T00:02:00Z"),
                refused: None,
            },
        ];
        record
    }

    #[test]
    fn stays_marks_and_the_chain_come_from_the_record() {
        let timeline = Timeline::of(&record(), t("2026-01-01T00:10:00Z"));
        let stays: Vec<_> = timeline
            .stays
            .iter()
            .map(|s| (s.state.as_str(), s.duration().as_secs(), s.current))
            .collect();
        assert_eq!(
            stays,
            [
                ("Pending", 60, false),
                ("Provisioning", 240, false),
                ("Failed", 300, true)
            ]
        );
        let kinds: Vec<_> = timeline.marks.iter().map(|m| m.kind).collect();
        assert_eq!(
            kinds,
            [MarkKind::Command, MarkKind::Error, MarkKind::Refused]
        );
        assert!(timeline.marks[1].text.contains("after 3 attempts: 422"));
        let compensation = timeline.compensation.as_ref().unwrap();
        assert_eq!(compensation.chain, [("Provisioning".to_owned(), false)]);
        assert!(!compensation.running);
        assert!(!timeline.truncated);
        assert_eq!(timeline.start, t("2026-01-01T00:00:00Z"));
        assert_eq!(timeline.end, t("2026-01-01T00:10:00Z"));
    }

    #[test]
    fn the_text_puts_each_line_at_its_time() {
        let text = Timeline::of(&record(), t("2026-01-01T00:10:00Z")).text(11);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("Timeline: 2026-01-01T00:00:00Z to now (10m00s)"),
            "{text}"
        );
        assert_eq!(
            lines[1], "  +0s     ▕██         ▏ #1 Pending 1m00s",
            "{text}"
        );
        assert_eq!(
            lines[2], "  +1m00s  ▕ █████     ▏ #2 Provisioning 4m00s",
            "{text}"
        );
        assert_eq!(
            lines[3], "  +2m00s  ▕  ▲        ▏ command #2 pause: applied",
            "{text}"
        );
        assert!(lines[4].contains("#3 Failed 5m00s (now)"), "{text}");
        assert_eq!(
            lines[5],
            "  +5m00s  ▕     ✗     ▏ Provisioning → Failed: retries exhausted in Provisioning after 3 attempts: 422"
        );
        assert_eq!(
            lines[6],
            "  +5m00s  ▕     ░     ▏ compensation (done, 10s): retries exhausted"
        );
        assert_eq!(
            lines[7],
            "  +6m00s  ▕      △    ▏ command #1 retry by alice: refused: Failed is a final state"
        );
        assert!(
            text.contains("compensation chain, in the order it runs: Provisioning\n"),
            "{text}"
        );
        assert!(
            text.contains("compensation of Provisioning failed for good: gone"),
            "{text}"
        );
    }

    #[test]
    fn the_current_attempts_and_the_next_one_are_marked() {
        let mut record = record();
        record.state = "Provisioning".into();
        record.history.truncate(2);
        record.history.remove(0);
        record.attempt = 2;
        record.last_error = Some("refused".into());
        record.next_attempt_at = Some(t("2026-01-01T00:12:00Z"));
        record.compensation = None;
        record.trail.clear();
        let timeline = Timeline::of(&record, t("2026-01-01T00:10:00Z"));
        assert!(timeline.truncated);
        assert_eq!(timeline.end, t("2026-01-01T00:12:00Z"));
        assert!(timeline.stays[0].current);
        let error = timeline
            .marks
            .iter()
            .find(|m| m.kind == MarkKind::Error)
            .unwrap();
        assert_eq!(
            error.text,
            "2 failed attempts so far in Provisioning, the last: refused"
        );
        assert!(
            timeline
                .marks
                .iter()
                .any(|m| m.kind == MarkKind::NextAttempt)
        );
        assert!(timeline.compensation.is_none());
        assert!(timeline.text(20).contains("to the next attempt"));
    }

    #[test]
    fn a_record_without_history_has_its_current_stay() {
        let mut record = record();
        record.history.clear();
        let timeline = Timeline::of(&record, t("2026-01-01T00:06:00Z"));
        assert_eq!(timeline.stays.len(), 1);
        assert_eq!(timeline.stays[0].state, "Failed");
        assert_eq!(timeline.stays[0].duration().as_secs(), 60);
    }
}
