//! The shape of a checked machine's graph, as `fsm_core::Machine` computes
//! it for the generated table: the default failed state, the edges the
//! engine takes by itself, the states no workflow enters and those from
//! which no declared path leads to rest. The analysis refuses the last two
//! (unless allowed); the diagram marks them.

use syn::Ident;

use crate::model::State;

/// The failed state the engine enters when a workflow fails: `on_failure`,
/// else the only `failed` state.
pub fn default_failed<'m>(states: &'m [State], on_failure: Option<&'m Ident>) -> Option<&'m Ident> {
    if let Some(target) = on_failure {
        return Some(target);
    }
    let mut failed = states.iter().filter(|s| s.failed);
    match (failed.next(), failed.next()) {
        (Some(only), None) => Some(&only.ident),
        _ => None,
    }
}

/// The edges the engine takes by itself out of `state`, grouped by target
/// and labelled with their causes, as `Machine::mermaid` draws them.
pub fn engine_edges<'m>(
    states: &'m [State],
    on_failure: Option<&'m Ident>,
    state: &'m State,
) -> Vec<(&'m Ident, String)> {
    if state.handler.is_none() {
        return Vec::new();
    }
    let failed = default_failed(states, on_failure);
    let timeout = state
        .on_timeout
        .as_ref()
        .or_else(|| state.timeout.and(failed));
    let exhausted = state.on_exhausted.as_ref().or(failed);
    let causes = [
        (timeout, "timeout"),
        (exhausted, "exhausted"),
        (failed, "fail"),
    ];
    let mut grouped: Vec<(&Ident, String)> = Vec::new();
    for (target, cause) in causes {
        let Some(target) = target else { continue };
        match grouped.iter_mut().find(|(t, _)| *t == target) {
            Some((_, label)) => {
                label.push_str(", ");
                label.push_str(cause);
            }
            None => grouped.push((target, cause.to_owned())),
        }
    }
    grouped
}

/// The states no workflow enters, in declaration order: not the initial
/// state, not the `entries` (the `goto` targets of `on_spec_change` and
/// `on_failed_spec_change`), not the default failed state
/// (every machine must have one), and no target of a `next`, signal or
/// engine edge out of a state that is entered.
pub fn unreachable<'m>(
    states: &'m [State],
    on_failure: Option<&'m Ident>,
    entries: &[&'m Ident],
) -> Vec<&'m State> {
    let mut seen: Vec<&Ident> = Vec::new();
    let mut queue: Vec<&Ident> = states
        .iter()
        .filter(|s| s.initial)
        .map(|s| &s.ident)
        .collect();
    queue.extend(entries);
    // Every machine must have it, even one whose states cannot fail.
    queue.extend(default_failed(states, on_failure));
    while let Some(name) = queue.pop() {
        if seen.contains(&name) {
            continue;
        }
        seen.push(name);
        let Some(state) = states.iter().find(|s| s.ident == *name) else {
            continue;
        };
        queue.extend(&state.next);
        queue.extend(state.signals.iter().map(|(_, target)| target));
        queue.extend(
            engine_edges(states, on_failure, state)
                .into_iter()
                .map(|(to, _)| to),
        );
    }
    states
        .iter()
        .filter(|s| !seen.contains(&&s.ident))
        .collect()
}

/// The states from which no path of `next`, `on_timeout`, `on_exhausted`
/// and signals reaches a `ready`, `final` or `failed` state, in
/// declaration order.
pub fn never_rests(states: &[State]) -> Vec<&State> {
    let mut rests: Vec<&Ident> = states
        .iter()
        .filter(|s| s.is_resting() || s.ready)
        .map(|s| &s.ident)
        .collect();
    loop {
        let before = rests.len();
        for s in states {
            let declared = s
                .next
                .iter()
                .chain(&s.on_timeout)
                .chain(&s.on_exhausted)
                .chain(s.signals.iter().map(|(_, target)| target));
            if !rests.contains(&&s.ident) && declared.into_iter().any(|t| rests.contains(&t)) {
                rests.push(&s.ident);
            }
        }
        if rests.len() == before {
            break;
        }
    }
    states
        .iter()
        .filter(|s| !rests.contains(&&s.ident))
        .collect()
}
