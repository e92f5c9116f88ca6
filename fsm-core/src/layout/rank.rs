//! Breaking cycles and giving nodes ranks.

use super::EdgeSpec;

/// The graph without cycles: each arrow pointing down (from its `upper`
/// node to its `lower` one), the arrows that point back up in the drawing
/// reversed, self-loops set aside.
pub(super) struct Acyclic {
    /// How many nodes.
    pub(super) nodes: usize,
    /// Per arrow, its ends pointing down; `None` for a self-loop.
    pub(super) down: Vec<Option<(usize, usize)>>,
    /// Per arrow, whether it points up in the drawing.
    pub(super) reversed: Vec<bool>,
}

impl Acyclic {
    /// Reverses the arrows that close a cycle in a depth-first walk from
    /// `first`, then from the other nodes in order, following arrows in
    /// the order given.
    pub(super) fn new(nodes: usize, edges: &[EdgeSpec], first: Option<usize>) -> Self {
        let mut out_of: Vec<Vec<usize>> = vec![Vec::new(); nodes];
        for (i, e) in edges.iter().enumerate() {
            if e.from != e.to && e.from < nodes && e.to < nodes {
                out_of[e.from].push(i);
            }
        }
        let mut reversed = vec![false; edges.len()];
        // 0: not seen, 1: on the walk's path, 2: done.
        let mut mark = vec![0u8; nodes];
        let starts = first.into_iter().chain(0..nodes);
        for start in starts {
            if start >= nodes || mark[start] != 0 {
                continue;
            }
            // An explicit stack of (node, next arrow to follow).
            let mut stack = vec![(start, 0usize)];
            mark[start] = 1;
            while let Some(top) = stack.last_mut() {
                let at = top.0;
                if let Some(&edge) = out_of[at].get(top.1) {
                    top.1 += 1;
                    let to = edges[edge].to;
                    match mark[to] {
                        0 => {
                            mark[to] = 1;
                            stack.push((to, 0));
                        }
                        1 => reversed[edge] = true,
                        _ => {}
                    }
                } else {
                    mark[at] = 2;
                    stack.pop();
                }
            }
        }
        let down = edges
            .iter()
            .zip(&reversed)
            .map(|(e, &back)| {
                if e.from == e.to || e.from >= nodes || e.to >= nodes {
                    None
                } else if back {
                    Some((e.to, e.from))
                } else {
                    Some((e.from, e.to))
                }
            })
            .collect();
        Self {
            nodes,
            down,
            reversed,
        }
    }

    /// Each node's rank: two below the lowest of the nodes with an arrow
    /// down to it (the longest path from the top), so that each arrow has
    /// a rank between its ends for its label; nodes nothing points to at 0.
    pub(super) fn ranks(&self) -> Vec<usize> {
        let mut incoming = vec![0usize; self.nodes];
        let mut out_of: Vec<Vec<usize>> = vec![Vec::new(); self.nodes];
        for &(upper, lower) in self.down.iter().flatten() {
            incoming[lower] += 1;
            out_of[upper].push(lower);
        }
        let mut rank = vec![0usize; self.nodes];
        let mut ready: Vec<usize> = (0..self.nodes).filter(|&n| incoming[n] == 0).collect();
        ready.reverse();
        while let Some(at) = ready.pop() {
            for &lower in &out_of[at] {
                rank[lower] = rank[lower].max(rank[at] + 2);
                incoming[lower] -= 1;
                if incoming[lower] == 0 {
                    ready.push(lower);
                }
            }
        }
        rank
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(from: usize, to: usize) -> EdgeSpec {
        EdgeSpec {
            from,
            to,
            label: None,
        }
    }

    #[test]
    fn a_back_arrow_is_reversed_and_ranks_are_two_apart() {
        let edges = [edge(0, 1), edge(1, 2), edge(2, 0), edge(1, 1)];
        let acyclic = Acyclic::new(3, &edges, Some(0));
        assert_eq!(acyclic.reversed, [false, false, true, false]);
        assert_eq!(acyclic.down[3], None);
        assert_eq!(acyclic.ranks(), [0, 2, 4]);
    }

    #[test]
    fn the_longest_path_sets_the_rank() {
        let edges = [edge(0, 1), edge(1, 2), edge(0, 2)];
        assert_eq!(Acyclic::new(3, &edges, Some(0)).ranks(), [0, 2, 4]);
    }
}
