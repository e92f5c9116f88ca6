//! Coordinates: each rank a horizontal band as tall as its tallest node,
//! each node as near the mean of its neighbours as its rank's order and
//! spacing allow.

use super::MARGIN;
use super::Size;
use super::order::{Kind, Layers};

/// The space between a virtual node's arrow and its label.
pub(super) const LABEL_PAD: f64 = 4.0;
/// The space between two bands, where arrows curve.
const BAND_GAP: f64 = 26.0;
/// How many passes pull nodes towards their neighbours.
const PASSES: usize = 16;

/// The placed layout nodes.
pub(super) struct Placed {
    /// Each layout node's anchor: the middle of a node's box, the line of
    /// a virtual node's arrow.
    pub(super) x: Vec<f64>,
    /// Each rank's band's top.
    pub(super) band_top: Vec<f64>,
    /// Each rank's band's height.
    pub(super) band_height: Vec<f64>,
    /// The right end of the drawing.
    pub(super) right: f64,
}

/// How far a layout node reaches left and right of its anchor, and how
/// tall it is.
fn extent(kind: Kind, node: usize, boxes: &[Size], footprints: &[Size]) -> (f64, f64, f64) {
    match kind {
        Kind::Real => {
            let half = boxes[node].width / 2.0;
            (half, footprints[node].width - half, footprints[node].height)
        }
        Kind::Virtual { label: Some(size) } => (0.0, LABEL_PAD + size.width, size.height),
        Kind::Virtual { label: None } => (0.0, 0.0, 0.0),
    }
}

/// The space between two neighbours in a rank.
fn gap(a: Kind, b: Kind) -> f64 {
    let plain = |k: Kind| matches!(k, Kind::Virtual { label: None });
    match (plain(a), plain(b)) {
        (true, true) => 10.0,
        (true, false) | (false, true) => 14.0,
        (false, false) => 24.0,
    }
}

impl Placed {
    /// Places `layers`, whose graph nodes have boxes `boxes` and take
    /// `footprints` (their box and their self-loops).
    pub(super) fn new(layers: &Layers, boxes: &[Size], footprints: &[Size]) -> Self {
        let count = layers.kinds.len();
        let extents: Vec<(f64, f64, f64)> = (0..count)
            .map(|n| extent(layers.kinds[n], n, boxes, footprints))
            .collect();
        // The least distance between the anchors of each node and the
        // next in its rank.
        let spacing = |rank: &[usize], at: usize| -> f64 {
            let (a, b) = (rank[at], rank[at + 1]);
            extents[a].1 + gap(layers.kinds[a], layers.kinds[b]) + extents[b].0
        };
        let mut x = vec![0.0; count];
        for rank in &layers.layers {
            let mut at = 0.0;
            for (i, &node) in rank.iter().enumerate() {
                if i > 0 {
                    at += spacing(rank, i - 1);
                }
                x[node] = at;
            }
        }
        let weight = |n: usize| match layers.kinds[n] {
            Kind::Real => 1.0,
            Kind::Virtual { .. } => 2.0,
        };
        for pass in 0..PASSES {
            let (use_above, use_below) = match pass % 3 {
                0 => (true, false),
                1 => (false, true),
                _ => (true, true),
            };
            for rank in &layers.layers {
                let wanted: Vec<f64> = rank
                    .iter()
                    .map(|&n| {
                        let mut near: Vec<usize> = Vec::new();
                        if use_above {
                            near.extend(&layers.above[n]);
                        }
                        if use_below {
                            near.extend(&layers.below[n]);
                        }
                        if near.is_empty() {
                            x[n]
                        } else {
                            near.iter().map(|&m| x[m]).sum::<f64>() / near.len() as f64
                        }
                    })
                    .collect();
                let gaps: Vec<f64> = (0..rank.len().saturating_sub(1))
                    .map(|i| spacing(rank, i))
                    .collect();
                let weights: Vec<f64> = rank.iter().map(|&n| weight(n)).collect();
                for (&node, placed) in rank.iter().zip(nearest_spaced(&wanted, &gaps, &weights)) {
                    x[node] = placed;
                }
            }
        }
        let left = (0..count)
            .map(|n| x[n] - extents[n].0)
            .fold(f64::INFINITY, f64::min);
        let shift = if left.is_finite() { MARGIN - left } else { 0.0 };
        for value in &mut x {
            *value += shift;
        }
        let right = (0..count)
            .map(|n| x[n] + extents[n].1)
            .fold(MARGIN, f64::max);
        let mut band_top = Vec::with_capacity(layers.layers.len());
        let mut band_height = Vec::with_capacity(layers.layers.len());
        let mut y = MARGIN;
        for rank in &layers.layers {
            let height = rank.iter().map(|&n| extents[n].2).fold(0.0, f64::max);
            band_top.push(y);
            band_height.push(height);
            y += height + BAND_GAP;
        }
        Self {
            x,
            band_top,
            band_height,
            right,
        }
    }
}

/// The positions nearest (least weighted squares) to `wanted`, in order,
/// each at least `gaps[i]` right of the one before: pool adjacent
/// violators on the positions less the gaps before them.
fn nearest_spaced(wanted: &[f64], gaps: &[f64], weights: &[f64]) -> Vec<f64> {
    let mut offset = Vec::with_capacity(wanted.len());
    let mut sum = 0.0;
    for i in 0..wanted.len() {
        if i > 0 {
            sum += gaps[i - 1];
        }
        offset.push(sum);
    }
    // Blocks of (total weight, weighted sum, how many).
    let mut blocks: Vec<(f64, f64, usize)> = Vec::new();
    for i in 0..wanted.len() {
        blocks.push((weights[i], weights[i] * (wanted[i] - offset[i]), 1));
        while blocks.len() > 1 {
            let last = blocks[blocks.len() - 1];
            let before = blocks[blocks.len() - 2];
            if before.1 / before.0 <= last.1 / last.0 {
                break;
            }
            blocks.pop();
            let merged = blocks.len() - 1;
            blocks[merged] = (before.0 + last.0, before.1 + last.1, before.2 + last.2);
        }
    }
    let mut out = Vec::with_capacity(wanted.len());
    for (weight, total, count) in blocks {
        for _ in 0..count {
            let i = out.len();
            out.push(total / weight + offset[i]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_go_where_wanted_unless_too_close() {
        assert_eq!(
            nearest_spaced(&[0.0, 50.0], &[10.0], &[1.0, 1.0]),
            [0.0, 50.0]
        );
        // Both want 0: they share the difference.
        assert_eq!(
            nearest_spaced(&[0.0, 0.0], &[10.0], &[1.0, 1.0]),
            [-5.0, 5.0]
        );
        let placed = nearest_spaced(&[5.0, 0.0, 1.0], &[10.0, 10.0], &[1.0, 1.0, 1.0]);
        assert!(placed[1] - placed[0] >= 10.0 - 1e-9 && placed[2] - placed[1] >= 10.0 - 1e-9);
    }
}
