//! [`MachineGraph`]: a machine's diagram as data (its states, their marks
//! and its arrows), serializable so that tools without the machine's Rust
//! type can read it, and drawn from there as text or SVG.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::diagram::edges;
use crate::layout::{EdgeSpec, Layout, Size, layered};
use crate::machine::Machine;
use crate::text::escape_markup as escape;
use crate::text::text_width;

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

/// A state's box: its least width, the room around its name, its height
/// with and without a count; the size of its name's text.
const BOX_MIN_W: f64 = 96.0;
const BOX_PAD: f64 = 24.0;
const BOX_H_COUNTS: f64 = 44.0;
const BOX_H: f64 = 32.0;
const NAME_SIZE: f64 = 13.0;
/// An arrow's label: its text's size, its height and the room around it.
const LABEL_SIZE: f64 = 10.0;
const LABEL_H: f64 = 13.0;
const LABEL_PAD: f64 = 6.0;

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

    /// The diagram's geometry: a layered layout, top to bottom, of the
    /// states (boxes sized to their names) and the arrows between states
    /// the graph knows (the engine's and signals' with their labels), in
    /// the order of [`MachineGraph::states`] and of the arrows kept.
    fn layout(&self, counts: bool) -> (Layout, Vec<&GraphEdge>) {
        let index = |name: &str| self.states.iter().position(|s| s.name == name);
        let box_height = if counts { BOX_H_COUNTS } else { BOX_H };
        let nodes: Vec<Size> = self
            .states
            .iter()
            .map(|s| Size {
                width: (text_width(&box_title(s), NAME_SIZE, true) + BOX_PAD).max(BOX_MIN_W),
                height: box_height,
            })
            .collect();
        let mut kept = Vec::new();
        let mut specs = Vec::new();
        for edge in &self.edges {
            let (Some(from), Some(to)) = (index(&edge.from), index(&edge.to)) else {
                continue;
            };
            specs.push(EdgeSpec {
                from,
                to,
                label: edge.engine.as_deref().map(|cause| Size {
                    width: text_width(cause, LABEL_SIZE, false) + LABEL_PAD,
                    height: LABEL_H,
                }),
            });
            kept.push(edge);
        }
        let first = self.states.iter().position(|s| s.initial);
        (layered(&nodes, &specs, first), kept)
    }

    /// The diagram as a standalone SVG document, laid out top to bottom in
    /// layers (a Sugiyama-style layout: few crossings, arrows routed
    /// around the boxes, every label in a place of its own, so that a
    /// machine of any size reads); with `counts`, each state's box shows
    /// its number of objects (0 for states not in it). Failed states are
    /// drawn red, ready states green, states with a compensation with a
    /// dashed orange border and `↺`. The engine's arrows are dashed and
    /// labelled with their cause, in red for retries exhausted or a
    /// failure (`failure`), orange for a timeout (`timeout`); a signal's
    /// arrow is dotted blue (`signal`). Every element carries a class
    /// (`state`, `failed`, `ready`, `compensated`, `edge`, `engine`,
    /// `count`, `label`) and each state's group a `data-state` attribute,
    /// for styles and scripts; each label's place is a `label-box`
    /// rectangle. The document has its natural size and a `viewBox`, so
    /// that a page can scale it to its width.
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
        let (layout, kept) = self.layout(counts.is_some());
        let (width, height) = (layout.width.ceil(), layout.height.ceil());
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"fsm-diagram\" \
             data-machine=\"{m}\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" \
             font-family=\"sans-serif\" font-size=\"{NAME_SIZE}\">\n\
             <title>{m}</title>\n<defs>",
            m = escape(&self.machine)
        );
        for cause in Cause::ALL {
            let _ = write!(
                out,
                "<marker id=\"{}\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" \
                 markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\">\
                 <path d=\"M0,0 L10,5 L0,10 z\" fill=\"{}\"/></marker>",
                cause.marker(),
                cause.color()
            );
        }
        out.push_str("</defs>\n");
        for (edge, routed) in kept.iter().zip(&layout.edges) {
            let cause = Cause::of(edge);
            let _ = write!(
                out,
                "<g class=\"{}\" data-from=\"{}\" data-to=\"{}\"><path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.4\"{} marker-end=\"url(#{})\"/>",
                cause.classes(),
                escape(&edge.from),
                escape(&edge.to),
                routed.path,
                cause.color(),
                cause.dash(),
                cause.marker()
            );
            if let (Some(text), Some(place)) = (&edge.engine, routed.label) {
                let _ = write!(
                    out,
                    "<rect class=\"label-box\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#fff\" fill-opacity=\"0.8\"/>\
                     <text class=\"label\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"{LABEL_SIZE}\" fill=\"{}\">{}</text>",
                    place.x,
                    place.y,
                    place.width,
                    place.height,
                    place.x + LABEL_PAD / 2.0,
                    place.y + place.height - 3.0,
                    cause.color(),
                    escape(text)
                );
            }
            out.push_str("</g>\n");
        }
        for (state, frame) in self.states.iter().zip(&layout.boxes) {
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
            let title = escape(&box_title(state));
            let name_y = if counts.is_some() {
                frame.y + 18.0
            } else {
                frame.y + frame.height / 2.0 + 4.5
            };
            let _ = write!(
                out,
                "<g class=\"{}\" data-state=\"{name}\">\
                 <rect class=\"box\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" rx=\"8\" fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"2\"{dash}/>\
                 <text x=\"{:.1}\" y=\"{name_y:.1}\" text-anchor=\"middle\" font-weight=\"bold\">{title}</text>",
                classes.join(" "),
                frame.x,
                frame.y,
                frame.width,
                frame.height,
                frame.center_x(),
            );
            if let Some(counts) = counts {
                let count = counts.get(&state.name).copied().unwrap_or(0);
                let _ = write!(
                    out,
                    "<text class=\"count\" data-state=\"{name}\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#333\">{count}</text>",
                    frame.center_x(),
                    frame.y + 36.0,
                );
            }
            out.push_str("</g>\n");
        }
        out.push_str("</svg>\n");
        out
    }
}

/// The text in a state's box: its name, and `↺` when it has a
/// compensation.
fn box_title(state: &GraphState) -> String {
    if state.compensated {
        format!("{} ↺", state.name)
    } else {
        state.name.clone()
    }
}

/// What an arrow of the SVG says by its look.
#[derive(Clone, Copy)]
enum Cause {
    /// A handler's declared target: solid grey.
    Declared,
    /// The engine's on a timeout: dashed orange.
    Timeout,
    /// The engine's on exhausted retries or a failure: dashed red.
    Failure,
    /// A person's signal: dotted blue.
    Signal,
}

impl Cause {
    const ALL: [Cause; 4] = [
        Cause::Declared,
        Cause::Timeout,
        Cause::Failure,
        Cause::Signal,
    ];

    fn of(edge: &GraphEdge) -> Self {
        match edge.engine.as_deref() {
            None => Cause::Declared,
            Some(label) if label.starts_with("signal") => Cause::Signal,
            Some(label) if label.contains("timeout") => Cause::Timeout,
            Some(_) => Cause::Failure,
        }
    }

    fn classes(self) -> &'static str {
        match self {
            Cause::Declared => "edge",
            Cause::Timeout => "edge engine timeout",
            Cause::Failure => "edge engine failure",
            Cause::Signal => "edge engine signal",
        }
    }

    fn color(self) -> &'static str {
        match self {
            Cause::Declared => "#555",
            Cause::Timeout => "#b86e00",
            Cause::Failure => "#b3261e",
            Cause::Signal => "#2f5fa8",
        }
    }

    fn dash(self) -> &'static str {
        match self {
            Cause::Declared => "",
            Cause::Timeout | Cause::Failure => " stroke-dasharray=\"5 4\"",
            Cause::Signal => " stroke-dasharray=\"2 3\"",
        }
    }

    fn marker(self) -> &'static str {
        match self {
            Cause::Declared => "arrow",
            Cause::Timeout => "arrow-timeout",
            Cause::Failure => "arrow-failure",
            Cause::Signal => "arrow-signal",
        }
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
