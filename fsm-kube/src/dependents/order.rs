//! Dependency order, decided from data: cycles, and which dependents may go
//! next given what is decided so far. Pure, so that the walk of
//! [`converge`](super::converge) and [`teardown`](super::teardown) is
//! tested without a server.

/// The dependents to act on now, and those that cannot go on because
/// something they wait for will not be satisfied in this pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Frontier {
    /// Undecided dependents whose prerequisites are all satisfied: act on
    /// them now, concurrently.
    pub run: Vec<usize>,
    /// Undecided dependents with every prerequisite decided and some not
    /// satisfied, with those prerequisites.
    pub blocked: Vec<(usize, Vec<usize>)>,
}

impl Frontier {
    /// Whether nothing more can be decided.
    pub fn is_empty(&self) -> bool {
        self.run.is_empty() && self.blocked.is_empty()
    }
}

/// The next frontier: `requires[i]` are the prerequisites of `i`;
/// `decided[i]` is `None` while `i` is undecided, else whether it satisfies
/// what requires it.
pub(crate) fn frontier(requires: &[Vec<usize>], decided: &[Option<bool>]) -> Frontier {
    let mut next = Frontier::default();
    for (i, prerequisites) in requires.iter().enumerate() {
        if decided.get(i).copied().flatten().is_some() {
            continue;
        }
        let states: Vec<Option<bool>> = prerequisites
            .iter()
            .map(|&j| decided.get(j).copied().flatten())
            .collect();
        if states.iter().any(Option::is_none) {
            continue;
        }
        let unsatisfied: Vec<usize> = prerequisites
            .iter()
            .zip(&states)
            .filter(|(_, s)| **s == Some(false))
            .map(|(&j, _)| j)
            .collect();
        if unsatisfied.is_empty() {
            next.run.push(i);
        } else {
            next.blocked.push((i, unsatisfied));
        }
    }
    next
}

/// The reverse relation: for each dependent, the dependents that require it
/// (teardown removes those first).
pub(crate) fn reverse(requires: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let mut required_by = vec![Vec::new(); requires.len()];
    for (i, prerequisites) in requires.iter().enumerate() {
        for &j in prerequisites {
            if let Some(list) = required_by.get_mut(j) {
                list.push(i);
            }
        }
    }
    required_by
}

/// A cycle of the relation, as indexes with the first repeated at the end,
/// or `None` when it is acyclic.
pub(crate) fn find_cycle(requires: &[Vec<usize>]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Color {
        White,
        Grey,
        Black,
    }
    let mut color = vec![Color::White; requires.len()];
    for start in 0..requires.len() {
        if color[start] != Color::White {
            continue;
        }
        // Depth-first, with the path and the next edge of each node on it.
        let mut path: Vec<(usize, usize)> = vec![(start, 0)];
        color[start] = Color::Grey;
        while let Some(&mut (node, ref mut edge)) = path.last_mut() {
            let Some(&next) = requires.get(node).and_then(|e| e.get(*edge)) else {
                color[node] = Color::Black;
                path.pop();
                continue;
            };
            *edge += 1;
            match color.get(next) {
                Some(Color::White) => {
                    color[next] = Color::Grey;
                    path.push((next, 0));
                }
                Some(Color::Grey) => {
                    let from = path.iter().position(|(n, _)| *n == next).unwrap_or(0);
                    let mut cycle: Vec<usize> = path[from..].iter().map(|(n, _)| *n).collect();
                    cycle.push(next);
                    return Some(cycle);
                }
                _ => {}
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn independent_branches_run_in_one_wave() {
        // 0 and 1 are roots; 2 needs both; 3 needs 2.
        let requires = vec![vec![], vec![], vec![0, 1], vec![2]];
        let f = frontier(&requires, &[None; 4]);
        assert_eq!(f.run, [0, 1]);
        let f = frontier(&requires, &[Some(true), Some(false), None, None]);
        assert_eq!(f.run, Vec::<usize>::new());
        assert_eq!(f.blocked, [(2, vec![1])]);
        let f = frontier(&requires, &[Some(true), Some(true), Some(false), None]);
        assert_eq!(f.blocked, [(3, vec![2])]);
    }

    #[test]
    fn reverse_lists_who_requires_whom() {
        assert_eq!(
            reverse(&[vec![], vec![0], vec![0, 1]]),
            [vec![1, 2], vec![2], vec![]]
        );
    }

    #[test]
    fn cycles_are_found_and_dags_pass() {
        assert_eq!(find_cycle(&[vec![], vec![0], vec![1]]), None);
        assert_eq!(
            find_cycle(&[vec![1], vec![2], vec![0]]),
            Some(vec![0, 1, 2, 0])
        );
        assert_eq!(find_cycle(&[vec![], vec![1]]), Some(vec![1, 1]));
    }

    /// A random DAG: each node may require nodes with a smaller index.
    fn dag() -> impl Strategy<Value = (Vec<Vec<usize>>, Vec<bool>)> {
        (1usize..12)
            .prop_flat_map(|n| {
                let edges = (0..n)
                    .map(|i| proptest::collection::vec(0..i.max(1), 0..=i.min(3)))
                    .collect::<Vec<_>>();
                (edges, proptest::collection::vec(any::<bool>(), n))
            })
            .prop_map(|(edges, ready)| {
                let requires = edges
                    .into_iter()
                    .enumerate()
                    .map(|(i, mut e)| {
                        e.retain(|&j| j < i);
                        e.sort_unstable();
                        e.dedup();
                        e
                    })
                    .collect();
                (requires, ready)
            })
    }

    proptest! {
        /// Walking frontiers decides every dependent exactly once, runs one
        /// only after all its prerequisites were run and satisfied, and
        /// blocks exactly those with an unsatisfied prerequisite.
        #[test]
        fn walking_frontiers_respects_the_order((requires, ready) in dag()) {
            prop_assert_eq!(find_cycle(&requires), None);
            let n = requires.len();
            let mut decided: Vec<Option<bool>> = vec![None; n];
            let mut ran = vec![false; n];
            loop {
                let f = frontier(&requires, &decided);
                if f.is_empty() {
                    break;
                }
                for &i in &f.run {
                    prop_assert!(!ran[i]);
                    for &j in &requires[i] {
                        prop_assert!(ran[j] && decided[j] == Some(true));
                    }
                    ran[i] = true;
                    decided[i] = Some(ready[i]);
                }
                for (i, blockers) in &f.blocked {
                    prop_assert!(!blockers.is_empty());
                    decided[*i] = Some(false);
                }
            }
            prop_assert!(decided.iter().all(Option::is_some));
            for i in 0..n {
                let runnable = requires[i].iter().all(|&j| ran[j] && ready[j]);
                prop_assert_eq!(ran[i], runnable);
            }
        }

        /// A cycle added to a DAG is always found.
        #[test]
        fn an_added_cycle_is_found((mut requires, _) in dag(), a in 0usize..12, b in 0usize..12) {
            let n = requires.len();
            let (a, b) = (a % n, b % n);
            let (low, high) = (a.min(b), a.max(b));
            // high requires low is allowed; make low require high too.
            requires[high].push(low);
            requires[low].push(high);
            let cycle = find_cycle(&requires);
            prop_assert!(cycle.is_some());
            let cycle = cycle.unwrap_or_default();
            prop_assert_eq!(cycle.first(), cycle.last());
            for pair in cycle.windows(2) {
                prop_assert!(requires[pair[0]].contains(&pair[1]));
            }
        }
    }
}
