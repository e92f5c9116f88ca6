//! [`MachineGraph`]: a machine's diagram as data (its states, their marks
//! and its arrows), serializable so that tools without the machine's Rust
//! type can read it, and drawn from there as text or SVG.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::diagram::edges;
use crate::machine::Machine;
use crate::text::escape_markup as escape;

/// A machine's diagram as data: the same states and arrows as
/// [`Machine::mermaid`], in declaration order.
///
/// ```
/// use fsm_core::{Machine, MachineGraph, StateMeta};
///
/// static STATES: [StateMeta; 3] = [
///     StateMeta::new("Pending").initial().with_handler().next(&["Done"]),
///     StateMeta::new("Done").final_state().ready(),
///     StateMeta::new("Failed").failed(),
/// ];
/// let graph = Machine::new("Job", &STATES).graph();
/// assert_eq!(graph.machine, "Job");
/// assert_eq!(graph.edges[0].from, "Pending");
/// assert_eq!(graph.edges[0].to, "Done");
/// assert!(graph.state("Failed").is_some_and(|s| s.failed));
/// let json = serde_json::to_string(&graph).unwrap();
/// assert_eq!(serde_json::from_str::<MachineGraph>(&json).unwrap(), graph);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineGraph {
    /// The machine's name (the enum's).
    pub machine: String,
    /// The states, in declaration order.
    pub states: Vec<GraphState>,
    /// The arrows: handlers' declared targets, then the engine's own.
    pub edges: Vec<GraphEdge>,
}

/// A state of a [`MachineGraph`] and its marks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphState {
    /// The state's name.
    pub name: String,
    /// The machine starts here.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub initial: bool,
    /// The object is `Ready` here.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ready: bool,
    /// A terminal failure state.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
    /// A resting state without handler.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub r#final: bool,
    /// Its data must never be shown.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sensitive: bool,
    /// It has a compensation, which runs when a later step fails.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compensated: bool,
}

/// An arrow of a [`MachineGraph`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphEdge {
    /// The source state.
    pub from: String,
    /// The target state.
    pub to: String,
    /// `None` for a handler's declared target; `signal NAME` for a
    /// person's signal (`on_signal`); else why the engine takes it by
    /// itself (`timeout`, `exhausted`, `fail`, joined by `, `).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

impl Machine {
    /// The machine's diagram as data.
    pub fn graph(&self) -> MachineGraph {
        MachineGraph {
            machine: self.name().to_owned(),
            states: self
                .states()
                .iter()
                .map(|s| GraphState {
                    name: s.name().to_owned(),
                    initial: s.is_initial(),
                    ready: s.is_ready(),
                    failed: s.is_failed(),
                    r#final: s.is_final(),
                    sensitive: s.is_sensitive(),
                    compensated: s.has_compensation(),
                })
                .collect(),
            edges: edges(self)
                .into_iter()
                .map(|e| GraphEdge {
                    from: e.from.to_owned(),
                    to: e.to.to_owned(),
                    engine: e.engine,
                })
                .collect(),
        }
    }
}

/// Width and height of a state's box, and the gaps between ranks and rows,
/// in SVG user units.
const BOX_W: u32 = 150;
const BOX_H: u32 = 44;
const RANK_GAP: u32 = 90;
const ROW_GAP: u32 = 36;
const MARGIN: u32 = 20;

impl MachineGraph {
    /// The state named `name`.
    pub fn state(&self, name: &str) -> Option<&GraphState> {
        self.states.iter().find(|s| s.name == name)
    }

    /// Whether `state`'s data must be hidden: it is sensitive, or the
    /// graph does not know it (a record newer than the graph).
    pub fn hides_data_of(&self, state: &str) -> bool {
        self.state(state).is_none_or(|s| s.sensitive)
    }

    /// The diagram for a terminal: one line per state with its marks, then
    /// its arrows.
    ///
    /// ```text
    /// Job
    ///   Pending  (initial)
    ///     → Done
    ///     → Failed  [exhausted, fail]
    ///   Done  (ready, final)
    ///   Failed  (failed)
    /// ```
    pub fn text(&self) -> String {
        let mut out = format!("{}\n", self.machine);
        for state in &self.states {
            let marks = marks(state);
            if marks.is_empty() {
                let _ = writeln!(out, "  {}", state.name);
            } else {
                let _ = writeln!(out, "  {}  ({})", state.name, marks.join(", "));
            }
            for edge in self.edges.iter().filter(|e| e.from == state.name) {
                match &edge.engine {
                    Some(cause) => {
                        let _ = writeln!(out, "    → {}  [{cause}]", edge.to);
                    }
                    None => {
                        let _ = writeln!(out, "    → {}", edge.to);
                    }
                }
            }
        }
        out
    }

    /// Each state's rank: its distance from the initial state over the
    /// handlers' arrows, then over the engine's; states reached by neither
    /// come last.
    fn ranks(&self) -> Vec<usize> {
        let index = |name: &str| self.states.iter().position(|s| s.name == name);
        let mut rank: Vec<Option<usize>> = vec![None; self.states.len()];
        let mut queue: std::collections::VecDeque<usize> = self
            .states
            .iter()
            .position(|s| s.initial)
            .into_iter()
            .collect();
        for &start in &queue {
            rank[start] = Some(0);
        }
        for engine in [false, true] {
            if engine {
                queue = (0..self.states.len())
                    .filter(|&i| rank[i].is_some())
                    .collect();
            }
            while let Some(at) = queue.pop_front() {
                let next_rank = rank[at].unwrap_or(0) + 1;
                for edge in self
                    .edges
                    .iter()
                    .filter(|e| e.from == self.states[at].name && e.engine.is_some() == engine)
                {
                    if let Some(to) = index(&edge.to)
                        && rank[to].is_none()
                    {
                        rank[to] = Some(next_rank);
                        queue.push_back(to);
                    }
                }
            }
        }
        let last = rank.iter().flatten().max().map_or(0, |r| r + 1);
        rank.into_iter().map(|r| r.unwrap_or(last)).collect()
    }

    /// The diagram as a standalone SVG document, laid out left to right in
    /// ranks (each state at its distance from the initial state over the
    /// handlers' arrows, then the engine's); with `counts`, each state's box
    /// shows its number of objects (0 for states not in it). Failed states are drawn
    /// red, ready states green, states with a compensation with a dashed
    /// orange border and `↺`; the engine's arrows are dashed and labelled.
    /// Every element carries a class (`state`, `failed`, `ready`,
    /// `compensated`, `edge`, `engine`, `count`) and each state's group a
    /// `data-state` attribute, for styles and scripts.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use fsm_core::{Machine, StateMeta};
    ///
    /// static STATES: [StateMeta; 2] = [
    ///     StateMeta::new("Pending").initial().with_handler().next(&["Done"]),
    ///     StateMeta::new("Done").final_state(),
    /// ];
    /// let graph = Machine::new("Job", &STATES).graph();
    /// let counts = BTreeMap::from([("Done".to_owned(), 3)]);
    /// let svg = graph.svg(Some(&counts));
    /// assert!(svg.starts_with("<svg"));
    /// assert!(svg.contains(r#"data-state="Done""#));
    /// assert!(svg.contains(r#"<text class="count" data-state="Done""#));
    /// assert!(!graph.svg(None).contains(r#"class="count""#));
    /// ```
    pub fn svg(&self, counts: Option<&BTreeMap<String, usize>>) -> String {
        let ranks = self.ranks();
        let mut rows_in_rank: BTreeMap<usize, u32> = BTreeMap::new();
        let positions: Vec<(u32, u32)> = ranks
            .iter()
            .map(|&rank| {
                let row = rows_in_rank.entry(rank).or_insert(0);
                let at = (
                    MARGIN + to_u32(rank) * (BOX_W + RANK_GAP),
                    MARGIN + 30 + *row * (BOX_H + ROW_GAP),
                );
                *row += 1;
                at
            })
            .collect();
        let width = positions.iter().map(|p| p.0 + BOX_W).max().unwrap_or(0) + MARGIN;
        let height = positions.iter().map(|p| p.1 + BOX_H).max().unwrap_or(0) + MARGIN + 30;
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"fsm-diagram\" \
             data-machine=\"{m}\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" \
             font-family=\"sans-serif\" font-size=\"13\">\n\
             <title>{m}</title>\n\
             <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" \
             markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\">\
             <path d=\"M0,0 L10,5 L0,10 z\" fill=\"#555\"/></marker></defs>\n",
            m = escape(&self.machine)
        );
        let index = |name: &str| self.states.iter().position(|s| s.name == name);
        for (n, edge) in self.edges.iter().enumerate() {
            let (Some(from), Some(to)) = (index(&edge.from), index(&edge.to)) else {
                continue;
            };
            let (fx, fy) = positions[from];
            let (tx, ty) = positions[to];
            let forward = ranks[to] > ranks[from];
            let class = if edge.engine.is_some() {
                "edge engine"
            } else {
                "edge"
            };
            let dash = if edge.engine.is_some() {
                " stroke-dasharray=\"5 4\""
            } else {
                ""
            };
            let (path, label_at) = if forward {
                let (x1, y1) = (fx + BOX_W, fy + BOX_H / 2);
                let (x2, y2) = (tx, ty + BOX_H / 2);
                let mid = x1.midpoint(x2);
                (
                    format!("M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}"),
                    (mid, y1.midpoint(y2)),
                )
            } else {
                // Back (or same-rank) arrows loop over the boxes, each a
                // little higher than the last so that they stay apart.
                let lift = 18 + to_u32(n % 4) * 6;
                let (x1, y1) = (fx + BOX_W / 2, fy);
                let (x2, y2) = (tx + BOX_W / 2 + 10, ty);
                let top = y1.min(y2).saturating_sub(lift);
                (
                    format!("M{x1},{y1} C{x1},{top} {x2},{top} {x2},{y2}"),
                    (x1.midpoint(x2), top + 4),
                )
            };
            let _ = writeln!(
                out,
                "<g class=\"{class}\"><path d=\"{path}\" fill=\"none\" stroke=\"#555\"{dash} marker-end=\"url(#arrow)\"/>"
            );
            if let Some(cause) = &edge.engine {
                let _ = write!(
                    out,
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"10\" fill=\"#777\">{}</text>",
                    label_at.0,
                    label_at.1.saturating_sub(3),
                    escape(cause)
                );
            }
            out.push_str("</g>\n");
        }
        for (state, &(x, y)) in self.states.iter().zip(&positions) {
            let mut classes = vec!["state"];
            let (mut stroke, mut fill) = ("#456", "#f4f7fb");
            if state.ready {
                classes.push("ready");
                (stroke, fill) = ("#2a7a3a", "#eef8f0");
            }
            if state.failed {
                classes.push("failed");
                (stroke, fill) = ("#b3261e", "#fdecea");
            }
            let mut dash = "";
            if state.compensated {
                classes.push("compensated");
                stroke = "#c77800";
                dash = " stroke-dasharray=\"6 3\"";
            }
            let name = escape(&state.name);
            let mark = if state.compensated { " ↺" } else { "" };
            let name_y = if counts.is_some() { y + 18 } else { y + 27 };
            let _ = write!(
                out,
                "<g class=\"{}\" data-state=\"{name}\">\
                 <rect x=\"{x}\" y=\"{y}\" width=\"{BOX_W}\" height=\"{BOX_H}\" rx=\"8\" fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"2\"{dash}/>\
                 <text x=\"{}\" y=\"{name_y}\" text-anchor=\"middle\" font-weight=\"bold\">{name}{mark}</text>",
                classes.join(" "),
                x + BOX_W / 2,
            );
            if let Some(counts) = counts {
                let count = counts.get(&state.name).copied().unwrap_or(0);
                let _ = write!(
                    out,
                    "<text class=\"count\" data-state=\"{name}\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#333\">{count}</text>",
                    x + BOX_W / 2,
                    y + 35,
                );
            }
            out.push_str("</g>\n");
        }
        out.push_str("</svg>\n");
        out
    }
}

/// The marks of a state for [`MachineGraph::text`].
fn marks(state: &GraphState) -> Vec<&'static str> {
    [
        (state.initial, "initial"),
        (state.ready, "ready"),
        (state.failed, "failed"),
        (state.r#final, "final"),
        (state.sensitive, "sensitive"),
        (state.compensated, "compensated"),
    ]
    .into_iter()
    .filter_map(|(on, mark)| on.then_some(mark))
    .collect()
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX / 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StateMeta;

    static STATES: [StateMeta; 4] = [
        StateMeta::new("Pending")
            .initial()
            .with_handler()
            .compensated_by("undo")
            .next(&["Running"]),
        StateMeta::new("Running")
            .with_handler()
            .sensitive()
            .next(&["Done", "Pending"]),
        StateMeta::new("Done").final_state().ready(),
        StateMeta::new("Failed").failed(),
    ];
    static MACHINE: Machine = Machine::new("Job", &STATES);

    #[test]
    fn the_graph_has_every_state_with_its_marks_and_every_diagram_arrow() {
        let graph = MACHINE.graph();
        let names: Vec<_> = graph.states.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["Pending", "Running", "Done", "Failed"]);
        assert!(graph.states[0].initial && graph.states[0].compensated);
        assert!(graph.states[1].sensitive);
        let arrows = graph.edges.len();
        let mermaid_arrows = MACHINE.mermaid().matches(" --> ").count();
        // Mermaid adds `[*] --> Pending` and one `--> [*]` per resting state.
        assert_eq!(arrows + 1 + 2, mermaid_arrows);
    }

    #[test]
    fn unknown_and_sensitive_states_hide_their_data() {
        let graph = MACHINE.graph();
        assert!(graph.hides_data_of("Running"));
        assert!(graph.hides_data_of("Renamed"));
        assert!(!graph.hides_data_of("Pending"));
    }

    #[test]
    fn ranks_follow_declared_arrows_first() {
        assert_eq!(MACHINE.graph().ranks(), [0, 1, 2, 1]);
    }

    #[test]
    fn the_text_lists_states_marks_and_arrows() {
        let text = MACHINE.graph().text();
        assert_eq!(
            text,
            "Job
  Pending  (initial, compensated)
    → Running
    → Failed  [exhausted, fail]
  Running  (sensitive)
    → Done
    → Pending
    → Failed  [exhausted, fail]
  Done  (ready, final)
  Failed  (failed)
"
        );
    }

    #[test]
    fn the_svg_marks_failed_and_compensated_states_and_shows_counts() {
        let counts = BTreeMap::from([("Running".to_owned(), 2), ("Failed".to_owned(), 1)]);
        let svg = MACHINE.graph().svg(Some(&counts));
        assert!(svg.contains(r#"class="state failed" data-state="Failed""#));
        assert!(svg.contains(r#"class="state compensated" data-state="Pending""#));
        assert!(svg.contains(r#"<text class="count" data-state="Running" x="#));
        let count_of = |state: &str| {
            let at = svg
                .find(&format!(r#"class="count" data-state="{state}""#))
                .unwrap();
            let text = &svg[at..];
            let start = text.find('>').unwrap() + 1;
            let end = text.find('<').unwrap();
            text[start..end].to_owned()
        };
        assert_eq!(count_of("Running"), "2");
        assert_eq!(count_of("Failed"), "1");
        assert_eq!(count_of("Done"), "0");
        assert_eq!(
            svg.matches("class=\"edge").count(),
            MACHINE.graph().edges.len()
        );
        assert_eq!(svg.matches("<svg").count(), 1);
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn names_are_escaped_in_svg() {
        assert_eq!(escape(r#"<a & "b">"#), "&lt;a &amp; &quot;b&quot;&gt;");
    }
}
