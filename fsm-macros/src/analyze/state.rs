//! The rules of one state: its flags, its handler, the states it names,
//! its timeouts and its retry policy.

use darling::ast::Style;
use syn::spanned::Spanned;

use super::checker::Checker;
use crate::model::{Shape, State};
use crate::parse::VariantInput;

impl Checker<'_> {
    /// Checks the variant `v` and resolves it into a state.
    pub fn state(&mut self, v: &VariantInput) -> State {
        self.initial_flag(v);
        let resting = self.resting_flags(v);
        self.handler(v, resting);
        let next = v.next.as_ref().map(|t| t.0.clone()).unwrap_or_default();
        for target in &next {
            self.known(target, "`next`");
        }
        self.engine_targets(v);
        self.timeouts(v);
        let retry = v
            .retry
            .as_ref()
            .and_then(|own| self.policy(own, self.enum_retry));

        State {
            ident: v.ident.clone(),
            shape: shape(v),
            field_types: v.fields.iter().map(|f| f.ty.clone()).collect(),
            initial: v.initial.is_present(),
            ready: v.ready.is_present(),
            failed: v.failed.is_present(),
            is_final: v.is_final.is_present(),
            sensitive: v.sensitive.is_present(),
            handler: if resting { None } else { v.handler.clone() },
            compensate: v.compensate.clone(),
            next,
            retry,
            timeout: v.timeout,
            attempt_timeout: v.attempt_timeout,
            on_timeout: v.on_timeout.clone(),
            on_exhausted: v.on_exhausted.clone(),
        }
    }

    /// One initial state. (A data-carrying one is entered with its fields'
    /// `Default`: the expansion asks for it, spanned on each field.)
    fn initial_flag(&mut self, v: &VariantInput) {
        if !v.initial.is_present() {
            return;
        }
        let first = self
            .variants
            .iter()
            .take_while(|earlier| earlier.ident != v.ident)
            .find(|earlier| earlier.initial.is_present());
        if let Some(first) = first {
            let message = format!(
                "a second initial state: `{}` is already initial",
                first.ident
            );
            self.error(v.initial.span(), message);
        }
    }

    /// A `failed` state is a unit variant and not also `final`. Returns
    /// whether the machine rests in `v`.
    fn resting_flags(&mut self, v: &VariantInput) -> bool {
        if v.failed.is_present() {
            self.built_by_engine(&v.ident, v.failed.span(), "a `failed` state");
            if v.is_final.is_present() {
                self.error(
                    v.is_final.span(),
                    "a state is `final` or `failed`, not both: a failed state already rests",
                );
            }
        }
        v.failed.is_present() || v.is_final.is_present()
    }

    /// A handler exactly where the machine does not rest.
    fn handler(&mut self, v: &VariantInput, resting: bool) {
        let name = &v.ident;
        match (&v.handler, resting) {
            (Some(handler), true) => {
                let flag = if v.failed.is_present() {
                    "failed"
                } else {
                    "final"
                };
                self.error(
                    handler.span(),
                    format!(
                        "`{name}` is `{flag}`: the machine rests there and runs no handler; \
                         remove the handler or the `{flag}` flag"
                    ),
                );
            }
            (None, false) => self.error(
                name.span(),
                format!(
                    "state `{name}` has no handler: add #[fsm(handler = path)], or mark it \
                     `final` (the machine rests there) or `failed`"
                ),
            ),
            _ => {}
        }
    }

    /// `on_timeout` and `on_exhausted` name unit states.
    fn engine_targets(&mut self, v: &VariantInput) {
        if let Some(target) = &v.on_timeout {
            self.engine_target(target, "`on_timeout`", "the target of `on_timeout`");
        }
        if let Some(target) = &v.on_exhausted {
            self.engine_target(target, "`on_exhausted`", "the target of `on_exhausted`");
        }
    }

    /// `on_timeout` comes with a `timeout`; timeouts are longer than zero.
    fn timeouts(&mut self, v: &VariantInput) {
        if let (Some(target), None) = (&v.on_timeout, &v.timeout) {
            self.error(
                target.span(),
                "`on_timeout` needs a `timeout` (e.g. `timeout = \"10m\"`) to ever be taken",
            );
        }
        for d in [&v.timeout, &v.attempt_timeout].into_iter().flatten() {
            if d.millis == 0 {
                self.error(d.span, "a timeout must be longer than zero");
            }
        }
    }
}

/// The variant's fields, as the dispatch code destructures them.
fn shape(v: &VariantInput) -> Shape {
    match v.fields.style {
        Style::Unit => Shape::Unit,
        Style::Tuple => Shape::Unnamed(v.fields.len()),
        Style::Struct => Shape::Named(v.fields.iter().filter_map(|f| f.ident.clone()).collect()),
    }
}
