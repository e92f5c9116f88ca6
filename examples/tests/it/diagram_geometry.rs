//! The diagrams' geometry, read back from the SVG they are drawn as: for
//! every example machine and for a generated machine of 50 states, every
//! box and label lies inside the canvas, no two boxes overlap, no two
//! labels overlap, no label lies over a box, every arrow starts on the
//! border of the box it leaves and ends on the border of the box it
//! enters, and no arrow passes through a box it does not join or over
//! another arrow's label.

use std::collections::BTreeMap;

use examples::database::DbState;
use examples::integration::IntegrationPhase;
use examples::mutable_jar::JarState;
use examples::shop::ShopState;
use examples::webpage::PageState;
use operator_fsm::core::{GraphEdge, GraphState, MachineGraph};
use operator_fsm::prelude::*;

/// A rectangle read from the SVG.
#[derive(Clone, Copy, Debug)]
struct Rect {
    x: f64,
    y: f64,
    width: f64,
    height: f64,
}

impl Rect {
    fn overlaps(&self, other: &Rect) -> bool {
        self.x < other.x + other.width
            && other.x < self.x + self.width
            && self.y < other.y + other.height
            && other.y < self.y + self.height
    }

    /// Whether `p` lies inside, more than `margin` from the border.
    fn holds(&self, p: (f64, f64), margin: f64) -> bool {
        p.0 > self.x + margin
            && p.0 < self.x + self.width - margin
            && p.1 > self.y + margin
            && p.1 < self.y + self.height - margin
    }

    /// Whether `p` is on the border (within `tolerance`).
    fn borders(&self, p: (f64, f64), tolerance: f64) -> bool {
        let inside_x = p.0 >= self.x - tolerance && p.0 <= self.x + self.width + tolerance;
        let inside_y = p.1 >= self.y - tolerance && p.1 <= self.y + self.height + tolerance;
        let on_x =
            (p.0 - self.x).abs() <= tolerance || (p.0 - self.x - self.width).abs() <= tolerance;
        let on_y =
            (p.1 - self.y).abs() <= tolerance || (p.1 - self.y - self.height).abs() <= tolerance;
        inside_x && inside_y && (on_x || on_y)
    }
}

/// An arrow read from the SVG.
#[derive(Debug)]
struct Arrow {
    from: String,
    to: String,
    /// Points along its path, ends included.
    samples: Vec<(f64, f64)>,
    label: Option<Rect>,
}

/// What the geometry checks read from a diagram.
#[derive(Debug)]
struct Drawing {
    width: f64,
    height: f64,
    boxes: BTreeMap<String, Rect>,
    arrows: Vec<Arrow>,
}

/// The value of attribute `name` in `element`.
fn attribute<'a>(element: &'a str, name: &str) -> Option<&'a str> {
    let needle = format!(" {name}=\"");
    let at = element.find(&needle)? + needle.len();
    let end = element[at..].find('"')?;
    Some(&element[at..at + end])
}

fn number(element: &str, name: &str) -> f64 {
    attribute(element, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number {name} in {element}"))
}

/// The first element `<tag` of `line` that has `class="class"`.
fn element<'a>(line: &'a str, tag: &str, class: &str) -> Option<&'a str> {
    let mut rest = line;
    while let Some(at) = rest.find(&format!("<{tag} ")) {
        let end = rest[at..].find('>').map_or(rest.len(), |e| at + e);
        let candidate = &rest[at..end];
        if attribute(candidate, "class") == Some(class) {
            return Some(candidate);
        }
        rest = &rest[end..];
    }
    None
}

fn rect(element: &str) -> Rect {
    Rect {
        x: number(element, "x"),
        y: number(element, "y"),
        width: number(element, "width"),
        height: number(element, "height"),
    }
}

/// Points along SVG path data of absolute `M`, `L` and `C` commands.
fn sample(path: &str) -> Vec<(f64, f64)> {
    let mut points = Vec::new();
    let mut at = (0.0, 0.0);
    let mut command = ' ';
    let mut numbers: Vec<f64> = Vec::new();
    let flush = |command: char,
                 numbers: &mut Vec<f64>,
                 at: &mut (f64, f64),
                 points: &mut Vec<(f64, f64)>| {
        match command {
            'M' => {
                *at = (numbers[0], numbers[1]);
                points.push(*at);
            }
            'L' => {
                let to = (numbers[0], numbers[1]);
                for step in 1..=20 {
                    let t = f64::from(step) / 20.0;
                    points.push((at.0 + (to.0 - at.0) * t, at.1 + (to.1 - at.1) * t));
                }
                *at = to;
            }
            'C' => {
                let (c1, c2, to) = (
                    (numbers[0], numbers[1]),
                    (numbers[2], numbers[3]),
                    (numbers[4], numbers[5]),
                );
                for step in 1..=40 {
                    let t = f64::from(step) / 40.0;
                    let u = 1.0 - t;
                    let x = u * u * u * at.0
                        + 3.0 * u * u * t * c1.0
                        + 3.0 * u * t * t * c2.0
                        + t * t * t * to.0;
                    let y = u * u * u * at.1
                        + 3.0 * u * u * t * c1.1
                        + 3.0 * u * t * t * c2.1
                        + t * t * t * to.1;
                    points.push((x, y));
                }
                *at = to;
            }
            ' ' => {}
            other => panic!("unexpected path command {other} in {numbers:?}"),
        }
        numbers.clear();
    };
    let mut token = String::new();
    for c in path.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphabetic() {
            if !token.is_empty() {
                numbers.push(token.parse().unwrap());
                token.clear();
            }
            flush(command, &mut numbers, &mut at, &mut points);
            command = c;
        } else if c == ',' || c == ' ' {
            if !token.is_empty() {
                numbers.push(token.parse().unwrap());
                token.clear();
            }
        } else {
            token.push(c);
        }
    }
    flush(command, &mut numbers, &mut at, &mut points);
    points
}

/// Reads the boxes, arrows and labels of `svg` (one element group a
/// line, as [`MachineGraph::svg`] writes them).
fn read(svg: &str) -> Drawing {
    let root = element(svg, "svg", "fsm-diagram").expect("the svg element");
    let view: Vec<f64> = attribute(root, "viewBox")
        .unwrap()
        .split(' ')
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(number(root, "width"), view[2]);
    assert_eq!(number(root, "height"), view[3]);
    let mut boxes = BTreeMap::new();
    let mut arrows = Vec::new();
    for line in svg.lines() {
        if let Some(group) = line.strip_prefix("<g ") {
            let group = format!(" {group}");
            let class = attribute(&group, "class").unwrap_or_default();
            if class.split(' ').any(|c| c == "state") {
                let state = attribute(&group, "data-state").unwrap().to_owned();
                let frame = rect(element(line, "rect", "box").expect("a box"));
                assert!(
                    boxes.insert(state.clone(), frame).is_none(),
                    "{state} twice"
                );
            } else if class.split(' ').any(|c| c == "edge") {
                let path = line
                    .find("<path ")
                    .map(|at| &line[at..])
                    .and_then(|p| attribute(p, "d"))
                    .expect("a path");
                arrows.push(Arrow {
                    from: attribute(&group, "data-from").unwrap().to_owned(),
                    to: attribute(&group, "data-to").unwrap().to_owned(),
                    samples: sample(path),
                    label: element(line, "rect", "label-box").map(rect),
                });
            }
        }
    }
    Drawing {
        width: view[2],
        height: view[3],
        boxes,
        arrows,
    }
}

/// Every geometric promise of the diagram of `graph`, with and without
/// counts; the problems found.
fn problems(graph: &MachineGraph) -> Vec<String> {
    let mut found = Vec::new();
    for counts in [None, Some(BTreeMap::new())] {
        let svg = graph.svg(counts.as_ref());
        let drawing = read(&svg);
        let name = &graph.machine;
        let mut problem = |text: String| found.push(format!("{name}: {text}"));
        if drawing.boxes.len() != graph.states.len() {
            problem(format!(
                "{} boxes for {} states",
                drawing.boxes.len(),
                graph.states.len()
            ));
        }
        if drawing.arrows.len() != graph.edges.len() {
            problem(format!(
                "{} arrows for {} edges",
                drawing.arrows.len(),
                graph.edges.len()
            ));
        }
        let labels: Vec<(usize, Rect)> = drawing
            .arrows
            .iter()
            .enumerate()
            .filter_map(|(i, a)| a.label.map(|l| (i, l)))
            .collect();
        let labelled = graph.edges.iter().filter(|e| e.engine.is_some()).count();
        if labels.len() != labelled {
            problem(format!(
                "{} labels for {labelled} labelled edges",
                labels.len()
            ));
        }
        let inside = |r: &Rect| {
            r.x >= 0.0
                && r.y >= 0.0
                && r.x + r.width <= drawing.width
                && r.y + r.height <= drawing.height
        };
        let boxes: Vec<(&String, &Rect)> = drawing.boxes.iter().collect();
        for (i, (state, frame)) in boxes.iter().enumerate() {
            if !inside(frame) {
                problem(format!(
                    "box {state} {frame:?} outside the canvas {}x{}",
                    drawing.width, drawing.height
                ));
            }
            for (other, second) in &boxes[i + 1..] {
                if frame.overlaps(second) {
                    problem(format!("boxes {state} and {other} overlap"));
                }
            }
            for (arrow, label) in &labels {
                if frame.overlaps(label) {
                    let a = &drawing.arrows[*arrow];
                    problem(format!(
                        "the label of {} -> {} lies over box {state}",
                        a.from, a.to
                    ));
                }
            }
        }
        for (i, (arrow, label)) in labels.iter().enumerate() {
            if !inside(label) {
                problem(format!("label {label:?} outside the canvas"));
            }
            for (other, second) in &labels[i + 1..] {
                if label.overlaps(second) {
                    let (a, b) = (&drawing.arrows[*arrow], &drawing.arrows[*other]);
                    problem(format!(
                        "labels of {} -> {} and {} -> {} overlap",
                        a.from, a.to, b.from, b.to
                    ));
                }
            }
        }
        for (index, arrow) in drawing.arrows.iter().enumerate() {
            let what = format!("arrow {} -> {}", arrow.from, arrow.to);
            let (Some(from), Some(to)) =
                (drawing.boxes.get(&arrow.from), drawing.boxes.get(&arrow.to))
            else {
                problem(format!("{what} joins unknown states"));
                continue;
            };
            let (Some(&start), Some(&end)) = (arrow.samples.first(), arrow.samples.last()) else {
                problem(format!("{what} has no path"));
                continue;
            };
            if !from.borders(start, 0.6) {
                problem(format!("{what} starts at {start:?}, off its box {from:?}"));
            }
            if !to.borders(end, 0.6) {
                problem(format!("{what} ends at {end:?}, off its box {to:?}"));
            }
            for (state, frame) in &drawing.boxes {
                if *state == arrow.from || *state == arrow.to {
                    continue;
                }
                if let Some(p) = arrow.samples.iter().find(|&&p| frame.holds(p, 0.5)) {
                    problem(format!("{what} passes through box {state} at {p:?}"));
                }
            }
            for (other, label) in &labels {
                if *other == index {
                    continue;
                }
                if let Some(p) = arrow.samples.iter().find(|&&p| label.holds(p, 0.5)) {
                    let a = &drawing.arrows[*other];
                    problem(format!(
                        "{what} passes over the label of {} -> {} at {p:?}",
                        a.from, a.to
                    ));
                }
            }
        }
    }
    found
}

/// A machine of 50 states: a main line with side branches, arrows back,
/// self-loops, timeouts, signals, failures into one failed state and
/// compensations, from a fixed seed.
fn generated(states: usize) -> MachineGraph {
    let mut seed: u64 = 0x5eed_1234_abcd_0042;
    let mut next = move |below: usize| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        usize::try_from(seed >> 33).unwrap_or(0) % below
    };
    let name = |i: usize| format!("Step{i:02}");
    let mut graph = MachineGraph {
        machine: format!("Generated{states}"),
        states: Vec::new(),
        edges: Vec::new(),
    };
    let failed = states - 1;
    for i in 0..states {
        graph.states.push(GraphState {
            name: if i == failed {
                "Failed".to_owned()
            } else {
                name(i)
            },
            initial: i == 0,
            failed: i == failed,
            ready: i == failed - 1,
            compensated: i % 7 == 3,
            ..GraphState::default()
        });
    }
    let state = |i: usize, graph: &MachineGraph| graph.states[i].name.clone();
    for i in 0..failed {
        let edge = |to: usize, engine: Option<&str>, graph: &mut MachineGraph| {
            let (from, to) = (state(i, graph), state(to, graph));
            graph.edges.push(GraphEdge {
                from,
                to,
                engine: engine.map(str::to_owned),
            });
        };
        if i + 1 < failed {
            edge(i + 1, None, &mut graph);
        }
        match next(6) {
            0 => edge(next(failed), None, &mut graph),
            1 => edge((i + 2 + next(6)).min(failed - 1), None, &mut graph),
            2 => edge(i, Some("signal retry"), &mut graph),
            3 => edge(next(failed), Some("signal approve"), &mut graph),
            _ => {}
        }
        let cause = match next(3) {
            0 => "timeout, exhausted, fail",
            1 => "exhausted, fail",
            _ => "fail",
        };
        edge(failed, Some(cause), &mut graph);
        if next(5) == 0 {
            edge(next(failed), Some("timeout"), &mut graph);
        }
    }
    graph
}

fn example_machines() -> Vec<MachineGraph> {
    vec![
        DbState::machine().graph(),
        JarState::machine().graph(),
        IntegrationPhase::machine().graph(),
        PageState::machine().graph(),
        ShopState::machine().graph(),
    ]
}

#[test]
fn every_example_machines_diagram_keeps_its_boxes_labels_and_arrows_apart() {
    let mut found = Vec::new();
    for graph in example_machines() {
        found.extend(problems(&graph));
        if let Some(dir) = std::env::var_os("FSM_DIAGRAM_DIR") {
            let path = std::path::Path::new(&dir).join(format!("{}.svg", graph.machine));
            std::fs::write(path, graph.svg(None)).unwrap();
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn a_generated_machine_of_fifty_states_keeps_them_apart_too() {
    for states in [2, 12, 50] {
        let graph = generated(states);
        assert_eq!(graph.states.len(), states);
        let found = problems(&graph);
        if let Some(dir) = std::env::var_os("FSM_DIAGRAM_DIR") {
            let path = std::path::Path::new(&dir).join(format!("{}.svg", graph.machine));
            std::fs::write(path, graph.svg(None)).unwrap();
        }
        assert!(found.is_empty(), "{}", found.join("\n"));
    }
}

#[test]
fn the_checks_see_an_overlap_and_an_arrow_off_its_box() {
    let svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"fsm-diagram\" viewBox=\"0 0 100 100\" width=\"100\" height=\"100\">\n\
<g class=\"edge\" data-from=\"A\" data-to=\"B\"><path d=\"M5,5 L50,90\"/></g>\n\
<g class=\"state\" data-state=\"A\"><rect class=\"box\" x=\"0\" y=\"0\" width=\"40\" height=\"30\"/></g>\n\
<g class=\"state\" data-state=\"B\"><rect class=\"box\" x=\"30\" y=\"20\" width=\"40\" height=\"30\"/></g>\n\
</svg>\n";
    let drawing = read(svg);
    assert!(drawing.boxes["A"].overlaps(&drawing.boxes["B"]));
    let arrow = &drawing.arrows[0];
    assert!(!drawing.boxes["A"].borders(arrow.samples[0], 0.6));
    assert!(!drawing.boxes["B"].borders(*arrow.samples.last().unwrap(), 0.6));
}
