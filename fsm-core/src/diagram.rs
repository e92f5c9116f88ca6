//! Mermaid and Graphviz renderings of a machine's declared transitions.

use std::fmt::Write;

use crate::Machine;

/// The edges of a machine's diagram, in declaration order: handler targets
/// unlabelled, then the timeout and exhaustion targets labelled.
fn edges(
    machine: &Machine,
) -> impl Iterator<Item = (&'static str, &'static str, Option<&'static str>)> {
    machine.states().iter().flat_map(|s| {
        let name = s.name();
        let next = s.targets().iter().map(move |t| (name, *t, None));
        let timeout = s.timeout_target().map(|t| (name, t, Some("timeout")));
        let exhausted = s
            .exhausted_target()
            .map(|t| (name, t, Some("retries exhausted")));
        next.chain(timeout).chain(exhausted)
    })
}

impl Machine {
    /// The machine as a Mermaid `stateDiagram-v2`.
    ///
    /// The initial state hangs off `[*]`; final and failed states lead to
    /// `[*]`; `on_timeout` and `on_exhausted` edges are labelled. The
    /// implicit edges to the default failed state (a failing handler) are
    /// left out to keep the diagram readable.
    ///
    /// ```
    /// use fsm_core::{Machine, StateMeta};
    ///
    /// static STATES: [StateMeta; 3] = [
    ///     StateMeta::new("Pending").initial().with_handler().next(&["Done"]),
    ///     StateMeta::new("Done").final_state(),
    ///     StateMeta::new("Failed").failed(),
    /// ];
    /// let text = Machine::new("Job", &STATES).mermaid();
    /// assert_eq!(text, "stateDiagram-v2
    ///     [*] --> Pending
    ///     Pending --> Done
    ///     Done --> [*]
    ///     Failed --> [*]
    /// ");
    /// ```
    pub fn mermaid(&self) -> String {
        let mut out = String::from("stateDiagram-v2\n");
        if let Some(initial) = self.initial_state() {
            let _ = writeln!(out, "    [*] --> {}", initial.name());
        }
        for (from, to, label) in edges(self) {
            match label {
                Some(label) => {
                    let _ = writeln!(out, "    {from} --> {to}: {label}");
                }
                None => {
                    let _ = writeln!(out, "    {from} --> {to}");
                }
            }
        }
        for s in self.states().iter().filter(|s| s.is_resting()) {
            let _ = writeln!(out, "    {} --> [*]", s.name());
        }
        out
    }

    /// The machine as a Graphviz `digraph`, with the same edges as
    /// [`Machine::mermaid`]; ready states are drawn with a double border and
    /// failed states in red.
    pub fn dot(&self) -> String {
        let mut out = format!(
            "digraph \"{}\" {{\n    rankdir=LR;\n    node [shape=box, style=rounded];\n    \"[*]\" [shape=point];\n",
            self.name()
        );
        for s in self.states() {
            let mut attrs = Vec::new();
            if s.is_ready() {
                attrs.push("peripheries=2");
            }
            if s.is_failed() {
                attrs.push("color=red");
            }
            if !attrs.is_empty() {
                let _ = writeln!(out, "    \"{}\" [{}];", s.name(), attrs.join(", "));
            }
        }
        if let Some(initial) = self.initial_state() {
            let _ = writeln!(out, "    \"[*]\" -> \"{}\";", initial.name());
        }
        for (from, to, label) in edges(self) {
            match label {
                Some(label) => {
                    let _ = writeln!(out, "    \"{from}\" -> \"{to}\" [label=\"{label}\"];");
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

    use crate::{Machine, StateMeta};

    static STATES: [StateMeta; 5] = [
        StateMeta::new("Provisioning")
            .initial()
            .with_handler()
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
            .on_exhausted("Failed")
            .next(&["Provisioning"]),
        StateMeta::new("Deleted").final_state(),
        StateMeta::new("Failed").failed(),
    ];

    #[test]
    fn mermaid_lists_declared_edges() {
        let expected = "stateDiagram-v2
    [*] --> Provisioning
    Provisioning --> WaitingReady
    WaitingReady --> Ready
    WaitingReady --> Failed: timeout
    Ready --> Provisioning
    Ready --> Failed: retries exhausted
    Deleted --> [*]
    Failed --> [*]
";
        assert_eq!(Machine::new("Db", &STATES).mermaid(), expected);
    }

    #[test]
    fn dot_lists_the_same_edges() {
        let dot = Machine::new("Db", &STATES).dot();
        assert!(dot.starts_with("digraph \"Db\" {"));
        assert!(dot.contains("\"[*]\" -> \"Provisioning\";"));
        assert!(dot.contains("\"WaitingReady\" -> \"Failed\" [label=\"timeout\"];"));
        assert!(dot.contains("\"Ready\" [peripheries=2];"));
        assert!(dot.contains("\"Failed\" [color=red];"));
        assert!(dot.trim_end().ends_with('}'));
    }
}
