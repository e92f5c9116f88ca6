//! Mermaid and Graphviz renderings of a machine: the transitions its
//! handlers declare, the ones the engine takes by itself (timeout, retries
//! exhausted, failure), and the states that have a compensation.

use std::fmt::Write;

use crate::{machine::Machine, machine::StateMeta};

/// The note on a state no workflow can enter
/// ([`Machine::unreachable_states`]).
pub(crate) const UNREACHABLE: &str = "unreachable";

/// The note on a state from which no declared path leads to rest
/// ([`Machine::states_that_never_rest`]).
pub(crate) const NEVER_RESTS: &str = "never rests";

/// One arrow of a diagram.
pub(crate) struct Edge {
    pub(crate) from: &'static str,
    pub(crate) to: &'static str,
    /// `None` for a handler's declared `next` target; `signal NAME` for a
    /// person's signal; else what makes the engine take it by itself
    /// (`timeout`, `exhausted`, `fail`, joined by `, ` when several lead to
    /// the same state).
    pub(crate) engine: Option<String>,
}

/// The edges the engine takes by itself out of `state`, grouped by target:
/// `timeout` (to `on_timeout`, else the default failed state, when the
/// state has a timeout or an `on_timeout`), `exhausted` (to `on_exhausted`,
/// else the default failed state) and `fail` (a permanent error or
/// `Transition::fail`, to the default failed state). Only states with a
/// handler have them.
pub(crate) fn engine_edges(machine: &Machine, state: &StateMeta) -> Vec<(&'static str, String)> {
    if !state.has_handler() {
        return Vec::new();
    }
    let failed = machine.default_failed().map(StateMeta::name);
    let timeout = state
        .timeout_target()
        .or_else(|| state.state_timeout().and(failed));
    let exhausted = state.exhausted_target().or(failed);
    let causes = [
        (timeout, "timeout"),
        (exhausted, "exhausted"),
        (failed, "fail"),
    ];
    let mut grouped: Vec<(&'static str, String)> = Vec::new();
    for (target, cause) in causes {
        let Some(target) = target else { continue };
        match grouped.iter_mut().find(|(t, _)| *t == target) {
            Some((_, label)) => {
                label.push_str(", ");
                label.push_str(cause);
            }
            None => grouped.push((target, cause.to_owned())),
        }
    }
    grouped
}

/// The edges of a machine's diagram, state by state in declaration order:
/// the handler's declared targets, then the engine's edges.
pub(crate) fn edges(machine: &Machine) -> Vec<Edge> {
    let mut out = Vec::new();
    for s in machine.states() {
        let from = s.name();
        out.extend(s.targets().iter().map(|to| Edge {
            from,
            to,
            engine: None,
        }));
        out.extend(s.signals().iter().map(|&(signal, to)| Edge {
            from,
            to,
            engine: Some(format!("signal {signal}")),
        }));
        out.extend(
            engine_edges(machine, s)
                .into_iter()
                .map(|(to, label)| Edge {
                    from,
                    to,
                    engine: Some(label),
                }),
        );
    }
    out
}

/// What a state's compensation is called in a diagram: its function's
/// name (the last segment of its path), or `compensated` when unnamed.
fn compensation(state: &StateMeta) -> Option<String> {
    if !state.has_compensation() {
        return None;
    }
    Some(match state.compensation_name() {
        Some(name) => {
            let short = name.rsplit("::").next().unwrap_or(name).trim();
            format!("compensate {short}")
        }
        None => "compensated".to_owned(),
    })
}

impl Machine {
    /// The machine as a Mermaid `stateDiagram-v2`.
    ///
    /// The initial state hangs off `[*]`; final and failed states lead to
    /// `[*]`. A handler's declared targets are plain arrows; the arrows the
    /// engine takes by itself are labelled with why: `timeout` (to
    /// `on_timeout`, else the default failed state), `exhausted` (retries
    /// exhausted: to `on_exhausted`, else the default failed state) and
    /// `fail` (a permanent error or `Transition::fail`), causes that lead
    /// to the same state sharing one arrow. A state with a compensation
    /// gets a note naming it; the compensations run in reverse order of
    /// entry when the workflow fails, before it rests in the failed state.
    /// A state no workflow can enter gets the note `unreachable`, one from
    /// which no declared path leads to rest the note `never rests` (see
    /// [`Machine::unreachable_states`] and
    /// [`Machine::states_that_never_rest`]).
    ///
    /// ```
    /// use fsm_core::{Machine, StateMeta};
    ///
    /// static STATES: [StateMeta; 3] = [
    ///     StateMeta::new("Pending").initial().with_handler().compensated_by("undo").next(&["Done"]),
    ///     StateMeta::new("Done").final_state(),
    ///     StateMeta::new("Failed").failed(),
    /// ];
    /// let text = Machine::new("Job", &STATES).mermaid();
    /// assert_eq!(text, "stateDiagram-v2
    ///     [*] --> Pending
    ///     Pending --> Done
    ///     Pending --> Failed: exhausted, fail
    ///     note right of Pending : compensate undo
    ///     Done --> [*]
    ///     Failed --> [*]
    /// ");
    /// ```
    pub fn mermaid(&self) -> String {
        let mut out = String::from("stateDiagram-v2\n");
        if let Some(initial) = self.initial_state() {
            let _ = writeln!(out, "    [*] --> {}", initial.name());
        }
        for Edge { from, to, engine } in edges(self) {
            match engine {
                Some(label) => {
                    let _ = writeln!(out, "    {from} --> {to}: {label}");
                }
                None => {
                    let _ = writeln!(out, "    {from} --> {to}");
                }
            }
        }
        for s in self.states() {
            if let Some(note) = compensation(s) {
                let _ = writeln!(out, "    note right of {} : {note}", s.name());
            }
        }
        for name in self.unreachable_states() {
            let _ = writeln!(out, "    note left of {name} : {UNREACHABLE}");
        }
        for name in self.states_that_never_rest() {
            let _ = writeln!(out, "    note left of {name} : {NEVER_RESTS}");
        }
        for s in self.states().iter().filter(|s| s.is_resting()) {
            let _ = writeln!(out, "    {} --> [*]", s.name());
        }
        out
    }

    /// The machine as a Graphviz `digraph`, with the same edges as
    /// [`Machine::mermaid`]: the engine's edges dashed and labelled, a
    /// state with a compensation labelled with it; ready states are drawn
    /// with a double border, failed states in red, and the states marked
    /// in [`Machine::mermaid`] with a dashed border and their note.
    ///
    /// ```
    /// use fsm_core::{Machine, StateMeta};
    ///
    /// static STATES: [StateMeta; 3] = [
    ///     StateMeta::new("Pending").initial().with_handler().compensated_by("undo").next(&["Done"]),
    ///     StateMeta::new("Done").final_state(),
    ///     StateMeta::new("Failed").failed(),
    /// ];
    /// let text = Machine::new("Job", &STATES).dot();
    /// assert!(text.contains("\"Pending\" [label=\"Pending\\ncompensate undo\"];"));
    /// assert!(text.contains("\"Pending\" -> \"Failed\" [label=\"exhausted, fail\", style=dashed];"));
    /// ```
    pub fn dot(&self) -> String {
        let mut out = format!(
            "digraph \"{}\" {{\n    rankdir=LR;\n    node [shape=box, style=rounded];\n    \"[*]\" [shape=point];\n",
            self.name()
        );
        let unreachable = self.unreachable_states();
        let restless = self.states_that_never_rest();
        for s in self.states() {
            let mut attrs = Vec::new();
            let mut notes: Vec<String> = compensation(s).into_iter().collect();
            if unreachable.contains(&s.name()) {
                notes.push(UNREACHABLE.to_owned());
            }
            if restless.contains(&s.name()) {
                notes.push(NEVER_RESTS.to_owned());
            }
            if !notes.is_empty() {
                let mut label = s.name().to_owned();
                for note in notes {
                    label.push_str("\\n");
                    label.push_str(&note);
                }
                attrs.push(format!("label=\"{label}\""));
            }
            if unreachable.contains(&s.name()) || restless.contains(&s.name()) {
                attrs.push("style=\"rounded,dashed\"".to_owned());
            }
            if s.is_ready() {
                attrs.push("peripheries=2".to_owned());
            }
            if s.is_failed() {
                attrs.push("color=red".to_owned());
            }
            if !attrs.is_empty() {
                let _ = writeln!(out, "    \"{}\" [{}];", s.name(), attrs.join(", "));
            }
        }
        if let Some(initial) = self.initial_state() {
            let _ = writeln!(out, "    \"[*]\" -> \"{}\";", initial.name());
        }
        for Edge { from, to, engine } in edges(self) {
            match engine {
                Some(label) => {
                    let _ = writeln!(
                        out,
                        "    \"{from}\" -> \"{to}\" [label=\"{label}\", style=dashed];"
                    );
                }
                None => {
                    let _ = writeln!(out, "    \"{from}\" -> \"{to}\";");
                }
            }
        }
        out.push_str("}\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::{machine::Machine, machine::StateMeta};

    static STATES: [StateMeta; 5] = [
        StateMeta::new("Provisioning")
            .initial()
            .with_handler()
            .compensated_by("handlers::undo_provision")
            .next(&["WaitingReady"]),
        StateMeta::new("WaitingReady")
            .with_handler()
            .with_data()
            .timeout(Duration::from_secs(600))
            .on_timeout("Failed")
            .next(&["Ready"]),
        StateMeta::new("Ready")
            .ready()
            .with_handler()
            .with_data()
            .on_exhausted("Provisioning")
            .next(&["Provisioning"]),
        StateMeta::new("Deleted").final_state(),
        StateMeta::new("Failed").failed(),
    ];

    #[test]
    fn mermaid_draws_declared_and_engine_edges_and_compensations() {
        let expected = "stateDiagram-v2
    [*] --> Provisioning
    Provisioning --> WaitingReady
    Provisioning --> Failed: exhausted, fail
    WaitingReady --> Ready
    WaitingReady --> Failed: timeout, exhausted, fail
    Ready --> Provisioning
    Ready --> Provisioning: exhausted
    Ready --> Failed: fail
    note right of Provisioning : compensate undo_provision
    note left of Deleted : unreachable
    Deleted --> [*]
    Failed --> [*]
";
        assert_eq!(Machine::new("Db", &STATES).mermaid(), expected);
    }

    #[test]
    fn dot_draws_the_same_edges_with_the_engines_dashed() {
        let expected = r#"digraph "Db" {
    rankdir=LR;
    node [shape=box, style=rounded];
    "[*]" [shape=point];
    "Provisioning" [label="Provisioning\ncompensate undo_provision"];
    "Ready" [peripheries=2];
    "Deleted" [label="Deleted\nunreachable", style="rounded,dashed"];
    "Failed" [color=red];
    "[*]" -> "Provisioning";
    "Provisioning" -> "WaitingReady";
    "Provisioning" -> "Failed" [label="exhausted, fail", style=dashed];
    "WaitingReady" -> "Ready";
    "WaitingReady" -> "Failed" [label="timeout, exhausted, fail", style=dashed];
    "Ready" -> "Provisioning";
    "Ready" -> "Provisioning" [label="exhausted", style=dashed];
    "Ready" -> "Failed" [label="fail", style=dashed];
}
"#;
        assert_eq!(Machine::new("Db", &STATES).dot(), expected);
    }

    #[test]
    fn engine_edges_lead_to_the_on_failure_state_among_several() {
        static SEVERAL: [StateMeta; 4] = [
            StateMeta::new("Waiting")
                .initial()
                .with_handler()
                .with_compensation()
                .timeout(Duration::from_secs(5))
                .next(&["Done"]),
            StateMeta::new("Done").final_state(),
            StateMeta::new("Broken").failed(),
            StateMeta::new("Cancelled").failed(),
        ];
        let expected = "stateDiagram-v2
    [*] --> Waiting
    Waiting --> Done
    Waiting --> Cancelled: timeout, exhausted, fail
    note right of Waiting : compensated
    note left of Broken : unreachable
    Done --> [*]
    Broken --> [*]
    Cancelled --> [*]
";
        let machine = Machine::new("Job", &SEVERAL).on_failure("Cancelled");
        assert_eq!(machine.mermaid(), expected);
        // Without a default failed state (an invalid machine), only the
        // declared edges are drawn.
        let ambiguous = Machine::new("Job", &SEVERAL).mermaid();
        assert!(ambiguous.contains("    Waiting --> Done\n"), "{ambiguous}");
        assert!(!ambiguous.contains("Waiting --> Broken"), "{ambiguous}");
        assert!(!ambiguous.contains("Waiting --> Cancelled"), "{ambiguous}");
    }

    #[test]
    fn states_no_workflow_enters_or_that_never_rest_are_marked() {
        static MARKED: [StateMeta; 5] = [
            StateMeta::new("Start")
                .initial()
                .with_handler()
                .next(&["Poll"]),
            StateMeta::new("Poll").with_handler().next(&["Poll"]),
            StateMeta::new("Orphan").with_handler().next(&["Done"]),
            StateMeta::new("Done").final_state(),
            StateMeta::new("Failed").failed(),
        ];
        let machine = Machine::new("Marked", &MARKED);
        let mermaid = machine.mermaid();
        assert!(
            mermaid.contains("    note left of Orphan : unreachable\n"),
            "{mermaid}"
        );
        assert!(
            mermaid.contains("    note left of Done : unreachable\n"),
            "{mermaid}"
        );
        assert!(
            mermaid.contains("    note left of Start : never rests\n"),
            "{mermaid}"
        );
        assert!(
            mermaid.contains("    note left of Poll : never rests\n"),
            "{mermaid}"
        );
        assert!(!mermaid.contains("Failed :"), "{mermaid}");
        let dot = machine.dot();
        assert!(
            dot.contains(r#""Orphan" [label="Orphan\nunreachable", style="rounded,dashed"];"#),
            "{dot}"
        );
        assert!(
            dot.contains(r#""Poll" [label="Poll\nnever rests", style="rounded,dashed"];"#),
            "{dot}"
        );
    }
}
