//! The rules of the machine's graph: every state can be entered, and from
//! every state a declared path leads to rest, unless the state allows
//! otherwise with `allow(unreachable)` or `allow(never_rests)`.

use super::checker::Checker;
use crate::graph;
use crate::model::State;
use crate::parse::AllowArgs;

impl Checker<'_> {
    /// Refuses states no workflow enters and states that never rest, each
    /// on its variant's name. Run on a machine whose other rules hold: the
    /// graph of a broken machine says little.
    pub fn graph(
        &mut self,
        states: &[State],
        on_failure: Option<&syn::Ident>,
        entries: &[&syn::Ident],
    ) {
        let allows = |state: &State| -> AllowArgs {
            self.variants
                .iter()
                .find(|v| v.ident == state.ident)
                .and_then(|v| v.allow.clone())
                .unwrap_or_default()
        };
        let unreachable = graph::unreachable(states, on_failure, entries);
        let mut errors = Vec::new();
        for state in &unreachable {
            if !allows(state).unreachable.is_present() {
                errors.push((
                    state.ident.span(),
                    format!(
                        "state `{}` is unreachable: it is not the initial state or the default failed \
                         state, and no `next`, `on_signal`, `on_timeout` or `on_exhausted` of a state \
                         that can be entered, no failure and no `on_spec_change = goto(..)` leads to it. Lead a state to it, remove \
                         it (a `migrate` hook maps records an older build left in it), or keep it \
                         deliberately with #[fsm(allow(unreachable))]",
                        state.ident
                    ),
                ));
            }
        }
        for state in graph::never_rests(states) {
            let reported = unreachable.iter().any(|u| u.ident == state.ident)
                && !allows(state).unreachable.is_present();
            if !reported && !allows(state).never_rests.is_present() {
                errors.push((
                    state.ident.span(),
                    format!(
                        "state `{}` never rests: no path of `next`, `on_signal`, `on_timeout` or \
                         `on_exhausted` leads from it to a `ready`, `final` or `failed` state, so a workflow there \
                         can only loop, or end by failing. Add a way out, or mark a polling loop \
                         that is meant to run until it fails with #[fsm(allow(never_rests))]",
                        state.ident
                    ),
                ));
            }
        }
        for (span, message) in errors {
            self.error(span, message);
        }
    }
}
