//! The rules of one state: its flags, its handler (or `converge`), the
//! states it names, its timeouts and its retry policy.

use darling::ast::Style;
use syn::Ident;
use syn::spanned::Spanned;

use super::checker::Checker;
use crate::model::{Handler, Shape, State};
use crate::parse::VariantInput;

impl Checker<'_> {
    /// Checks the variant `v` and resolves it into a state;
    /// `batch_commits` is the enum's flag.
    pub fn state(&mut self, v: &VariantInput, batch_commits: bool) -> State {
        self.initial_flag(v);
        let resting = self.resting_flags(v);
        let next = v.next.as_ref().map(|t| t.0.clone()).unwrap_or_default();
        let handler = self.handler(v, resting, &next);
        for target in &next {
            self.known(target, "`next`");
        }
        self.engine_targets(v);
        self.timeouts(v);
        self.entry_commit(v, batch_commits);
        self.commits_flag(v);
        let signals = self.signals(v, resting);
        let (immutable, grow_only) = self.admission_fields(v);
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
            handler,
            compensate: v.compensate.clone(),
            next,
            retry,
            timeout: v.timeout,
            attempt_timeout: v.attempt_timeout,
            on_timeout: v.on_timeout.clone(),
            on_exhausted: v.on_exhausted.clone(),
            renamed_from: v.renamed_from.iter().map(syn::LitStr::value).collect(),
            batch_entry: v.batch_entry.is_present(),
            commit_on_entry: v.commit_on_entry.is_present(),
            commits: v.commits.is_present(),
            signals,
            immutable,
            grow_only,
            refuse_delete: v.refuse_delete.is_present(),
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

    /// What runs in `v`, exactly where the machine does not rest: its
    /// `handler`, or the handler `converge` generates. `next` is the
    /// state's declared targets.
    fn handler(&mut self, v: &VariantInput, resting: bool, next: &[Ident]) -> Option<Handler> {
        let name = &v.ident;
        if resting {
            let flag = if v.failed.is_present() {
                "failed"
            } else {
                "final"
            };
            if let Some(handler) = &v.handler {
                self.error(
                    handler.span(),
                    format!(
                        "`{name}` is `{flag}`: the machine rests there and runs no handler; \
                         remove the handler or the `{flag}` flag"
                    ),
                );
            }
            if let Some(desired) = &v.converge {
                self.error(
                    desired.span(),
                    format!(
                        "`{name}` is `{flag}`: the machine rests there and converges nothing; \
                         remove `converge` or the `{flag}` flag"
                    ),
                );
            }
            return None;
        }
        match (&v.handler, &v.converge) {
            (Some(handler), None) => Some(Handler::Function(handler.clone())),
            (None, Some(desired)) => {
                let next = self.converge_target(desired, next)?;
                Some(Handler::Converge {
                    desired: desired.clone(),
                    next,
                })
            }
            (Some(_), Some(desired)) => {
                self.error(
                    desired.span(),
                    format!(
                        "`{name}` has both `handler` and `converge`: `converge` generates the \
                         state's handler; remove one (a handler can converge with its own code)"
                    ),
                );
                None
            }
            (None, None) => {
                self.error(
                    name.span(),
                    format!(
                        "state `{name}` has no handler: add #[fsm(handler = path)], or mark it \
                         `final` (the machine rests there) or `failed`"
                    ),
                );
                None
            }
        }
    }

    /// The one state a `converge` state moves to once everything is ready:
    /// its only `next` target. (A target with data is entered with its
    /// fields' `Default`: the expansion asks for it, spanned on each
    /// field.)
    fn converge_target(&mut self, desired: &syn::Path, next: &[Ident]) -> Option<Ident> {
        match next {
            [target] => Some(target.clone()),
            [] => {
                self.error(
                    desired.span(),
                    "`converge` moves to one state once everything is ready: name it with \
                     `next(State)`",
                );
                None
            }
            [first, second, ..] => {
                self.error(
                    second.span(),
                    format!(
                        "a `converge` state moves to one state once everything is ready, but \
                         `next` names `{first}` and `{second}`: keep one, or write a handler \
                         that converges and chooses"
                    ),
                );
                None
            }
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
