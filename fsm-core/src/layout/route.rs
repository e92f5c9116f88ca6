//! Boxes, arrows and labels from the placed layout nodes: each arrow
//! leaves its box's border at a port of its own, runs straight through
//! the bands of its virtual nodes and curves between bands; a self-loop
//! curls on its box's right, its label beside it.

use std::fmt::Write as _;

use super::order::{Kind, Layers};
use super::place::{LABEL_PAD, Placed};
use super::rank::Acyclic;
use super::{EdgeSpec, Layout, MARGIN, Point, Rect, RoutedEdge, Size};

/// How far the innermost self-loop reaches right of its box.
const LOOP_REACH: f64 = 18.0;
/// How much further each next self-loop of the same box reaches.
const LOOP_STEP: f64 = 8.0;
/// The space between two stacked self-loop labels.
const LOOP_LABEL_GAP: f64 = 4.0;

/// The self-loops of `node`, by arrow index.
fn self_loops(edges: &[EdgeSpec], node: usize) -> Vec<usize> {
    (0..edges.len())
        .filter(|&i| edges[i].from == node && edges[i].to == node)
        .collect()
}

/// How far the self-loops of a node with `count` of them reach right of
/// its box, labels aside.
fn loops_reach(count: usize) -> f64 {
    LOOP_REACH + LOOP_STEP * count.saturating_sub(1) as f64
}

/// The space each node takes: its box, and right of it its self-loops and
/// their labels.
pub(super) fn footprints(nodes: &[Size], edges: &[EdgeSpec]) -> Vec<Size> {
    nodes
        .iter()
        .enumerate()
        .map(|(node, size)| {
            let loops = self_loops(edges, node);
            if loops.is_empty() {
                return *size;
            }
            let labels: Vec<Size> = loops.iter().filter_map(|&i| edges[i].label).collect();
            let label_width = labels.iter().map(|l| l.width).fold(0.0, f64::max);
            let label_height: f64 = labels.iter().map(|l| l.height + LOOP_LABEL_GAP).sum();
            let beside = if labels.is_empty() {
                0.0
            } else {
                LABEL_PAD + label_width
            };
            Size {
                width: size.width + loops_reach(loops.len()) + beside,
                height: size.height.max(label_height),
            }
        })
        .collect()
}

/// SVG path data through `points`: straight where they share an x,
/// else a curve leaving and entering vertically.
fn path_through(points: &[Point]) -> String {
    let mut path = String::new();
    for (i, p) in points.iter().enumerate() {
        if i == 0 {
            let _ = write!(path, "M{:.1},{:.1}", p.x, p.y);
            continue;
        }
        let before = points[i - 1];
        if (before.x - p.x).abs() < 0.05 {
            let _ = write!(path, " L{:.1},{:.1}", p.x, p.y);
        } else {
            let middle = (before.y + p.y) / 2.0;
            let _ = write!(
                path,
                " C{:.1},{middle:.1} {:.1},{middle:.1} {:.1},{:.1}",
                before.x, p.x, p.x, p.y
            );
        }
    }
    path
}

/// Where each arrow leaves (or enters) `node`'s box: the box's width
/// shared among them, in the order of the neighbours they lead to.
fn ports(ends: &mut [(f64, usize)], frame: &Rect) -> Vec<(usize, f64)> {
    ends.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let count = ends.len() as f64;
    ends.iter()
        .enumerate()
        .map(|(i, &(_, edge))| {
            (
                edge,
                frame.x + frame.width * (i as f64 + 1.0) / (count + 1.0),
            )
        })
        .collect()
}

/// The layout: boxes, arrows and labels.
pub(super) fn route(
    nodes: &[Size],
    edges: &[EdgeSpec],
    acyclic: &Acyclic,
    layers: &Layers,
    placed: &Placed,
) -> Layout {
    let boxes: Vec<Rect> = nodes
        .iter()
        .enumerate()
        .map(|(n, size)| {
            let rank = layers.rank_of[n];
            Rect {
                x: placed.x[n] - size.width / 2.0,
                y: placed.band_top[rank] + (placed.band_height[rank] - size.height) / 2.0,
                width: size.width,
                height: size.height,
            }
        })
        .collect();
    let mut leaving = vec![0.0; edges.len()];
    let mut entering = vec![0.0; edges.len()];
    for (node, frame) in boxes.iter().enumerate() {
        let mut down: Vec<(f64, usize)> = Vec::new();
        let mut up: Vec<(f64, usize)> = Vec::new();
        for (edge, chain) in layers.chains.iter().enumerate() {
            if chain.len() < 2 {
                continue;
            }
            if chain[0] == node {
                down.push((placed.x[chain[1]], edge));
            }
            if chain[chain.len() - 1] == node {
                up.push((placed.x[chain[chain.len() - 2]], edge));
            }
        }
        for (edge, x) in ports(&mut down, frame) {
            leaving[edge] = x;
        }
        for (edge, x) in ports(&mut up, frame) {
            entering[edge] = x;
        }
    }
    let mut routed = Vec::with_capacity(edges.len());
    for (edge, spec) in edges.iter().enumerate() {
        let chain = &layers.chains[edge];
        if chain.len() < 2 {
            routed.push(if spec.from == spec.to && spec.from < nodes.len() {
                self_loop(edges, edge, &boxes[spec.from])
            } else {
                RoutedEdge {
                    path: String::new(),
                    label: None,
                }
            });
            continue;
        }
        let (upper, lower) = (boxes[chain[0]], boxes[chain[chain.len() - 1]]);
        let mut points = vec![Point {
            x: leaving[edge],
            y: upper.y + upper.height,
        }];
        let mut label = None;
        for &virtual_node in &chain[1..chain.len() - 1] {
            let rank = layers.rank_of[virtual_node];
            let (top, height) = (placed.band_top[rank], placed.band_height[rank]);
            let x = placed.x[virtual_node];
            points.push(Point { x, y: top });
            if height > 0.0 {
                points.push(Point { x, y: top + height });
            }
            if let Kind::Virtual { label: Some(size) } = layers.kinds[virtual_node] {
                label = Some(Rect {
                    x: x + LABEL_PAD,
                    y: top + (height - size.height) / 2.0,
                    width: size.width,
                    height: size.height,
                });
            }
        }
        points.push(Point {
            x: entering[edge],
            y: lower.y,
        });
        if acyclic.reversed[edge] {
            points.reverse();
        }
        routed.push(RoutedEdge {
            path: path_through(&points),
            label,
        });
    }
    let bottom = match (placed.band_top.last(), placed.band_height.last()) {
        (Some(top), Some(height)) => top + height,
        _ => MARGIN,
    };
    Layout {
        width: placed.right + MARGIN,
        height: bottom + MARGIN,
        boxes,
        edges: routed,
    }
}

/// Arrow `edge`, a self-loop on `frame`: a curl on the box's right, inside
/// the loops before it, its label right of all of them.
fn self_loop(edges: &[EdgeSpec], edge: usize, frame: &Rect) -> RoutedEdge {
    let node = edges[edge].from;
    let loops = self_loops(edges, node);
    let nth = loops.iter().position(|&i| i == edge).unwrap_or(0);
    let right = frame.x + frame.width;
    let middle = frame.y + frame.height / 2.0;
    let spread = (frame.height / 2.0 - 8.0).max(2.0);
    let offset = (6.0 + 3.0 * nth as f64).min(spread);
    let reach = LOOP_REACH + LOOP_STEP * nth as f64;
    let (y1, y2) = (middle - offset, middle + offset);
    let path = format!(
        "M{right:.1},{y1:.1} C{:.1},{:.1} {:.1},{:.1} {right:.1},{y2:.1}",
        right + reach * 1.3,
        y1 - 6.0,
        right + reach * 1.3,
        y2 + 6.0
    );
    let labels: Vec<(usize, Size)> = loops
        .iter()
        .filter_map(|&i| edges[i].label.map(|l| (i, l)))
        .collect();
    let total: f64 = labels.iter().map(|(_, l)| l.height + LOOP_LABEL_GAP).sum();
    let mut top = middle - total / 2.0;
    let mut label = None;
    for (i, size) in labels {
        if i == edge {
            label = Some(Rect {
                x: right + loops_reach(loops.len()) + LABEL_PAD,
                y: top + LOOP_LABEL_GAP / 2.0,
                width: size.width,
                height: size.height,
            });
        }
        top += size.height + LOOP_LABEL_GAP;
    }
    RoutedEdge { path, label }
}
