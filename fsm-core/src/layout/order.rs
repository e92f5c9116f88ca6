//! The ranks' contents (the nodes and the virtual nodes that carry long
//! arrows and labels) and their order, chosen to cross few arrows.

use super::rank::Acyclic;
use super::{EdgeSpec, Size};

/// What a node of the layout stands for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Kind {
    /// A node of the graph.
    Real,
    /// A point an arrow passes through, carrying its label when `label`.
    Virtual {
        /// The label's size, on the virtual node that carries it.
        label: Option<Size>,
    },
}

/// The layout's nodes by rank, in order.
pub(super) struct Layers {
    /// What each layout node is; the graph's nodes come first, with their
    /// own indices.
    pub(super) kinds: Vec<Kind>,
    /// Each layout node's rank.
    pub(super) rank_of: Vec<usize>,
    /// Per rank, its nodes from left to right.
    pub(super) layers: Vec<Vec<usize>>,
    /// Per arrow, the layout nodes it passes through from its upper end to
    /// its lower one (empty for a self-loop).
    pub(super) chains: Vec<Vec<usize>>,
    /// Each layout node's neighbours in the rank above.
    pub(super) above: Vec<Vec<usize>>,
    /// Each layout node's neighbours in the rank below.
    pub(super) below: Vec<Vec<usize>>,
}

/// How many times the order is swept up and down at most.
const SWEEPS: usize = 24;

impl Layers {
    /// The ranks of `nodes` placed by `ranks`, with a chain of virtual
    /// nodes for every arrow longer than one rank (its label on the one of
    /// a label rank nearest its middle).
    pub(super) fn new(
        nodes: &[Size],
        edges: &[EdgeSpec],
        acyclic: &Acyclic,
        ranks: &[usize],
    ) -> Self {
        let mut kinds = vec![Kind::Real; nodes.len()];
        let mut rank_of = ranks.to_vec();
        let mut chains = Vec::with_capacity(edges.len());
        for (edge, down) in edges.iter().zip(&acyclic.down) {
            let Some((upper, lower)) = *down else {
                chains.push(Vec::new());
                continue;
            };
            let (top, bottom) = (ranks[upper], ranks[lower]);
            let half_span = (bottom - top) / 2;
            let label_rank = top + 1 + 2 * (half_span.saturating_sub(1) / 2);
            let mut chain = vec![upper];
            for rank in top + 1..bottom {
                chain.push(kinds.len());
                kinds.push(Kind::Virtual {
                    label: if rank == label_rank { edge.label } else { None },
                });
                rank_of.push(rank);
            }
            chain.push(lower);
            chains.push(chain);
        }
        let depth = rank_of.iter().max().map_or(0, |r| r + 1);
        let mut layers = vec![Vec::new(); depth];
        for (node, &rank) in rank_of.iter().enumerate() {
            layers[rank].push(node);
        }
        let mut above = vec![Vec::new(); kinds.len()];
        let mut below = vec![Vec::new(); kinds.len()];
        for chain in &chains {
            for pair in chain.windows(2) {
                below[pair[0]].push(pair[1]);
                above[pair[1]].push(pair[0]);
            }
        }
        Self {
            kinds,
            rank_of,
            layers,
            chains,
            above,
            below,
        }
    }

    /// Orders each rank by the mean position of each node's neighbours,
    /// sweeping down and up, and keeps the order that crossed the fewest
    /// arrows.
    pub(super) fn reduce_crossings(&mut self) {
        let mut best = self.layers.clone();
        let mut fewest = self.crossings();
        for sweep in 0..SWEEPS {
            let downwards = sweep % 2 == 0;
            let ranks: Vec<usize> = if downwards {
                (1..self.layers.len()).collect()
            } else {
                (0..self.layers.len().saturating_sub(1)).rev().collect()
            };
            for rank in ranks {
                let position = self.positions();
                let neighbours = if downwards { &self.above } else { &self.below };
                let mut keyed: Vec<(f64, usize)> = self.layers[rank]
                    .iter()
                    .map(|&node| {
                        let near = &neighbours[node];
                        let key = if near.is_empty() {
                            position[node] as f64
                        } else {
                            near.iter().map(|&n| position[n] as f64).sum::<f64>()
                                / near.len() as f64
                        };
                        (key, node)
                    })
                    .collect();
                keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
                self.layers[rank] = keyed.into_iter().map(|(_, node)| node).collect();
            }
            let crossings = self.crossings();
            if crossings < fewest {
                fewest = crossings;
                best = self.layers.clone();
            }
            if fewest == 0 {
                break;
            }
        }
        self.layers = best;
    }

    /// Each layout node's position in its rank.
    pub(super) fn positions(&self) -> Vec<usize> {
        let mut position = vec![0; self.kinds.len()];
        for layer in &self.layers {
            for (at, &node) in layer.iter().enumerate() {
                position[node] = at;
            }
        }
        position
    }

    /// How many pairs of arrows cross between neighbouring ranks.
    pub(super) fn crossings(&self) -> usize {
        let position = self.positions();
        let mut total = 0;
        for layer in &self.layers {
            let mut segments = Vec::new();
            for &node in layer {
                for &next in &self.below[node] {
                    segments.push((position[node], position[next]));
                }
            }
            for (i, a) in segments.iter().enumerate() {
                total += segments[i + 1..]
                    .iter()
                    .filter(|b| (a.0 < b.0 && a.1 > b.1) || (a.0 > b.0 && a.1 < b.1))
                    .count();
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(from: usize, to: usize) -> EdgeSpec {
        EdgeSpec {
            from,
            to,
            label: Some(Size {
                width: 30.0,
                height: 10.0,
            }),
        }
    }

    #[test]
    fn long_arrows_get_virtual_nodes_and_one_label() {
        let nodes = vec![
            Size {
                width: 10.0,
                height: 10.0
            };
            3
        ];
        let edges = [edge(0, 1), edge(1, 2), edge(0, 2)];
        let acyclic = Acyclic::new(3, &edges, Some(0));
        let layers = Layers::new(&nodes, &edges, &acyclic, &acyclic.ranks());
        assert_eq!(layers.chains[2].len(), 5);
        let labels = layers.chains[2]
            .iter()
            .filter(|&&n| matches!(layers.kinds[n], Kind::Virtual { label: Some(_) }))
            .count();
        assert_eq!(labels, 1);
    }

    #[test]
    fn sweeping_undoes_a_crossing() {
        // 0 and 1 on top, 2 and 3 below, crossed in the initial order.
        let nodes = vec![
            Size {
                width: 10.0,
                height: 10.0
            };
            4
        ];
        let edges = [edge(0, 3), edge(1, 2)];
        let acyclic = Acyclic::new(4, &edges, Some(0));
        let mut layers = Layers::new(&nodes, &edges, &acyclic, &acyclic.ranks());
        layers.reduce_crossings();
        assert_eq!(layers.crossings(), 0);
    }
}
