//! The demo's terminal output: live progress (redrawn in place on a
//! terminal, one line per change otherwise) and the final summary.

use operator_fsm::core::text::terminal_safe;
use std::collections::HashMap;
use std::io::{self, Write};
use std::time::Duration;

use operator_fsm::core::Timestamp;

use super::observe::ObjectView;
use crate::support::human;

/// Live progress for a terminal or a log.
pub struct Progress {
    live: bool,
    drawn: usize,
    last: HashMap<String, (String, u32, bool)>,
    last_periodic: Duration,
    every: Duration,
}

fn key(view: &ObjectView) -> String {
    format!("{}/{}", view.tracked.kind.name(), view.tracked.name)
}

fn mark(view: &ObjectView) -> &'static str {
    if view.at_rest_as_expected() {
        "✔"
    } else if view.unwinding() {
        "↺"
    } else {
        "…"
    }
}

impl Progress {
    /// `live`: redraw a table in place (a terminal); otherwise print a line
    /// per change and a status line every `every`.
    pub fn new(live: bool, every: Duration) -> Self {
        Progress {
            live,
            drawn: 0,
            last: HashMap::new(),
            last_periodic: Duration::ZERO,
            every,
        }
    }

    /// Forgets the table drawn last, so that text written after it stays
    /// and the next table is drawn below.
    pub fn detach(&mut self) {
        self.drawn = 0;
    }

    /// Shows `views` at `elapsed` since the start (`now` on the cluster's
    /// clock).
    ///
    /// # Errors
    /// Writing failed.
    pub fn update(
        &mut self,
        out: &mut impl Write,
        views: &[ObjectView],
        elapsed: Duration,
        now: Timestamp,
    ) -> io::Result<()> {
        if self.live {
            self.redraw(out, views, elapsed, now)
        } else {
            self.log(out, views, elapsed, now)
        }
    }

    fn redraw(
        &mut self,
        out: &mut impl Write,
        views: &[ObjectView],
        elapsed: Duration,
        now: Timestamp,
    ) -> io::Result<()> {
        if self.drawn > 0 {
            // Back to the table's first line, and clear below.
            write!(out, "\x1b[{}F\x1b[J", self.drawn)?;
        }
        let mut lines = vec![
            format!("  operator-fsm demo · {} elapsed", human(elapsed)),
            format!(
                "  {:<13} {:<10} {:<22} {:>7}  {:>9}  {}",
                "KIND", "NAME", "STATE", "ATTEMPT", "IN STATE", "EXPECTED"
            ),
        ];
        for view in views {
            let mut state = view.state().to_owned();
            if view.unwinding() {
                state.push_str(" (compensating)");
            }
            lines.push(format!(
                "{} {:<13} {:<10} {:<22} {:>7}  {:>9}  {}",
                mark(view),
                view.tracked.kind.name(),
                view.tracked.name,
                state,
                view.attempt() + 1,
                human(view.time_in_state(now)),
                view.tracked.expected,
            ));
        }
        for line in &lines {
            writeln!(out, "{line}")?;
        }
        self.drawn = lines.len();
        out.flush()
    }

    fn log(
        &mut self,
        out: &mut impl Write,
        views: &[ObjectView],
        elapsed: Duration,
        now: Timestamp,
    ) -> io::Result<()> {
        for view in views {
            let current = (view.state().to_owned(), view.attempt(), view.unwinding());
            if self.last.get(&key(view)) == Some(&current) {
                continue;
            }
            let mut line = format!("[{:>6}] {:<22} {}", human(elapsed), key(view), view.state());
            if view.unwinding() {
                line.push_str(" (compensating)");
            }
            if view.attempt() > 0 {
                line.push_str(&format!(" · attempt {}", view.attempt() + 1));
            }
            if let Some(error) = view.last_error() {
                line.push_str(&format!(" · last error: {}", terminal_safe(error)));
            }
            writeln!(out, "{line}")?;
            self.last.insert(key(view), current);
        }
        if elapsed >= self.last_periodic + self.every {
            self.last_periodic = elapsed;
            let waiting: Vec<String> = views
                .iter()
                .filter(|v| !v.at_rest_as_expected())
                .map(|v| {
                    format!(
                        "{} in {} for {}",
                        key(v),
                        v.state(),
                        human(v.time_in_state(now))
                    )
                })
                .collect();
            if !waiting.is_empty() {
                writeln!(
                    out,
                    "[{:>6}] waiting: {}",
                    human(elapsed),
                    waiting.join(", ")
                )?;
            }
        }
        out.flush()
    }
}

/// Writes each object's outcome and history.
///
/// # Errors
/// Writing failed.
pub fn summary(out: &mut impl Write, views: &[ObjectView], elapsed: Duration) -> io::Result<()> {
    let ok = views.iter().filter(|v| v.at_rest_as_expected()).count();
    writeln!(out)?;
    writeln!(
        out,
        "Summary: {ok} of {} objects rest in their expected state ({})",
        views.len(),
        human(elapsed)
    )?;
    for view in views {
        writeln!(out)?;
        writeln!(
            out,
            "{} {}: {} (expected {}) — {}",
            if view.at_rest_as_expected() {
                "✔"
            } else {
                "✘"
            },
            key(view),
            view.state(),
            view.tracked.expected,
            view.tracked.story
        )?;
        if let Some(error) = view.last_error() {
            writeln!(out, "    last error: {}", terminal_safe(error))?;
        }
        let start = view.history().first().map(|h| h.at);
        for entry in view.history() {
            let offset = start.map_or(Duration::ZERO, |s| {
                Duration::from_millis(
                    u64::try_from(entry.at.as_millisecond() - s.as_millisecond()).unwrap_or(0),
                )
            });
            let from = entry.from.as_deref().unwrap_or("(start)");
            let reason = entry
                .reason
                .as_deref()
                .map(|r| format!("  [{}]", terminal_safe(r)))
                .unwrap_or_default();
            writeln!(
                out,
                "    {:>3}. {:>7}  {from} → {}{reason}",
                entry.seq,
                format!("+{}", human(offset)),
                entry.to
            )?;
        }
        for command in view
            .record
            .as_ref()
            .map_or(&[][..], |r| r.commands.as_slice())
        {
            let by = command
                .by
                .as_deref()
                .map(|b| format!(" by {}", terminal_safe(b)))
                .unwrap_or_default();
            let outcome = match &command.refused {
                None => "applied".to_owned(),
                Some(reason) => format!("refused: {}", terminal_safe(reason)),
            };
            writeln!(
                out,
                "    command {}: {}{by}, {outcome}",
                command.seq,
                terminal_safe(&command.command)
            )?;
        }
        if let Some(unwind) = view.record.as_ref().and_then(|r| r.compensation.as_ref()) {
            let failures = if unwind.failures.is_empty() {
                "every compensation succeeded".to_owned()
            } else {
                format!("{} compensation(s) failed", unwind.failures.len())
            };
            writeln!(
                out,
                "    compensated after: {} ({failures})",
                terminal_safe(&unwind.reason)
            )?;
        }
    }
    Ok(())
}
