//! A layered (Sugiyama-style) layout of a directed graph, top to bottom:
//! cycles are broken by reversing back arrows, nodes get ranks (two apart,
//! so that every arrow has a rank of its own between its ends for its
//! label), long arrows are cut into chains of virtual nodes, the order in
//! each rank is chosen to cross few arrows, and the nodes are placed as
//! close to their neighbours as their order and spacing allow.
//!
//! Every node, label and virtual node lives in the band of its rank, with
//! space between neighbours; arrows run straight down through the bands
//! and curve only in the gaps between bands. So no two boxes or labels
//! overlap, no label lies over a box, and no arrow crosses a box it does
//! not join, by construction (and checked by the tests of every example
//! machine). Pure and deterministic.

mod order;
mod place;
mod rank;
mod route;

/// A point, in SVG user units (y grows downwards).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Point {
    /// Horizontal.
    pub(crate) x: f64,
    /// Vertical.
    pub(crate) y: f64,
}

/// An axis-aligned rectangle: its top left corner and its size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Rect {
    /// Left.
    pub(crate) x: f64,
    /// Top.
    pub(crate) y: f64,
    /// Width.
    pub(crate) width: f64,
    /// Height.
    pub(crate) height: f64,
}

impl Rect {
    /// The horizontal middle.
    pub(crate) fn center_x(&self) -> f64 {
        self.x + self.width / 2.0
    }
}

/// A width and a height.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Size {
    /// Width.
    pub(crate) width: f64,
    /// Height.
    pub(crate) height: f64,
}

/// An arrow to lay out: between two nodes (by index), with the size of its
/// label if it has one.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct EdgeSpec {
    /// The node it leaves.
    pub(crate) from: usize,
    /// The node it enters.
    pub(crate) to: usize,
    /// The size of its label.
    pub(crate) label: Option<Size>,
}

/// A laid out arrow.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RoutedEdge {
    /// Its path as SVG path data (absolute `M`, `L` and `C` commands),
    /// from the box it leaves to the border of the box it enters.
    pub(crate) path: String,
    /// Where its label goes.
    pub(crate) label: Option<Rect>,
}

/// A laid out graph: the canvas's size, each node's box (in the order of
/// the nodes given) and each arrow (in the order of the arrows given).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Layout {
    /// The canvas's width.
    pub(crate) width: f64,
    /// The canvas's height.
    pub(crate) height: f64,
    /// The nodes' boxes.
    pub(crate) boxes: Vec<Rect>,
    /// The arrows.
    pub(crate) edges: Vec<RoutedEdge>,
}

/// The space around the drawing.
pub(crate) const MARGIN: f64 = 16.0;

/// Lays out `nodes` (their boxes' sizes) joined by `edges`, starting from
/// node `first` (the initial state: it is placed in the top rank when no
/// arrow forces it lower).
pub(crate) fn layered(nodes: &[Size], edges: &[EdgeSpec], first: Option<usize>) -> Layout {
    let acyclic = rank::Acyclic::new(nodes.len(), edges, first);
    let ranks = acyclic.ranks();
    let mut layers = order::Layers::new(nodes, edges, &acyclic, &ranks);
    layers.reduce_crossings();
    let footprints = route::footprints(nodes, edges);
    let placed = place::Placed::new(&layers, nodes, &footprints);
    route::route(nodes, edges, &acyclic, &layers, &placed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxes(n: usize) -> Vec<Size> {
        vec![
            Size {
                width: 100.0,
                height: 40.0
            };
            n
        ]
    }

    fn edge(from: usize, to: usize, label: bool) -> EdgeSpec {
        EdgeSpec {
            from,
            to,
            label: label.then_some(Size {
                width: 60.0,
                height: 14.0,
            }),
        }
    }

    fn overlap(a: &Rect, b: &Rect) -> bool {
        a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height
    }

    #[test]
    fn a_chain_goes_down_one_box_under_the_other() {
        let layout = layered(&boxes(3), &[edge(0, 1, false), edge(1, 2, true)], Some(0));
        let [a, b, c] = [layout.boxes[0], layout.boxes[1], layout.boxes[2]];
        assert!(a.y < b.y && b.y < c.y, "{layout:?}");
        assert!((a.center_x() - b.center_x()).abs() < 1.0, "{layout:?}");
        let label = layout.edges[1].label.expect("a label");
        assert!(label.y > b.y + b.height && label.y + label.height < c.y);
        assert!(layout.edges[0].path.starts_with('M'));
    }

    #[test]
    fn cycles_and_self_loops_are_drawn_and_nothing_overlaps() {
        let edges = [
            edge(0, 1, false),
            edge(1, 2, true),
            edge(2, 0, true),
            edge(1, 1, true),
            edge(2, 3, true),
            edge(0, 3, true),
            edge(1, 3, true),
        ];
        let layout = layered(&boxes(4), &edges, Some(0));
        assert_eq!(layout.edges.len(), edges.len());
        let mut rects: Vec<Rect> = layout.boxes.clone();
        rects.extend(layout.edges.iter().filter_map(|e| e.label));
        for (i, a) in rects.iter().enumerate() {
            assert!(a.x >= 0.0 && a.y >= 0.0, "{a:?}");
            assert!(a.x + a.width <= layout.width && a.y + a.height <= layout.height);
            for b in &rects[i + 1..] {
                assert!(!overlap(a, b), "{a:?} {b:?}");
            }
        }
    }
}
