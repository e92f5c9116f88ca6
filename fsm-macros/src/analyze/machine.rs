//! The rules of the machine as a whole: a concrete enum with a resource,
//! one initial state, the failed state a failing workflow enters, and the
//! target of `on_spec_change`.

use syn::Ident;
use syn::spanned::Spanned;

use super::checker::Checker;
use crate::model::{FailedSpecChange, SpecChange};
use crate::parse::{FailedSpecChangeArg, SpecChangeArg};

impl Checker<'_> {
    /// The enum has no generics: states are stored and rebuilt by name.
    pub fn concrete(&mut self, generics: &syn::Generics) {
        if generics.params.is_empty() && generics.where_clause.is_none() {
            return;
        }
        let span = if generics.params.is_empty() {
            generics.where_clause.span()
        } else {
            generics.params.span()
        };
        self.error(
            span,
            "#[derive(OperatorFsm)] does not support generic enums: a machine's states are stored \
             and rebuilt by name, so the enum must be a concrete type",
        );
    }

    /// `resource = Type` is given (checked here rather than by darling, so
    /// that its absence is reported with the other mistakes).
    pub fn resource(&mut self, resource: Option<&syn::Type>) {
        if resource.is_none() {
            self.error(
                self.machine.span(),
                "missing `resource = Type`: name the object the machine runs for, \
                 e.g. #[fsm(resource = Database)]",
            );
        }
    }

    /// The machine has states, one of them initial (a second one is
    /// reported on its variant).
    pub fn initial_state(&mut self) {
        let machine = self.machine;
        if self.variants.is_empty() {
            self.error(
                machine.span(),
                "a machine needs states: add variants, one of them #[fsm(initial)]",
            );
        } else if !self.variants.iter().any(|v| v.initial.is_present()) {
            self.error(
                machine.span(),
                format!(
                    "`{machine}` has no initial state: mark the state the machine starts in \
                     with #[fsm(initial)]"
                ),
            );
        }
    }

    /// A failing workflow has one failed state to enter: the only one, or
    /// the one `on_failure` names.
    pub fn failed_states(&mut self, on_failure: Option<&Ident>) {
        let machine = self.machine;
        let failed: Vec<&Ident> = self
            .variants
            .iter()
            .filter(|v| v.failed.is_present())
            .map(|v| &v.ident)
            .collect();
        if let Some(target) = on_failure
            && self.known(target, "`on_failure`")
            && !failed.contains(&target)
        {
            self.error(
                target.span(),
                format!("`on_failure` names `{target}`, which is not a `failed` state"),
            );
        }
        if failed.is_empty() && !self.variants.is_empty() {
            self.error(
                machine.span(),
                format!(
                    "`{machine}` has no failed state: add a unit variant marked #[fsm(failed)] \
                     for the machine to rest in when the workflow fails"
                ),
            );
        } else if failed.len() > 1 && on_failure.is_none() {
            let list: Vec<String> = failed.iter().map(|name| format!("`{name}`")).collect();
            self.error(
                machine.span(),
                format!(
                    "`{machine}` has several failed states ({}): name the one a failing \
                     workflow enters with #[fsm(on_failure = State)]",
                    list.join(", ")
                ),
            );
        }
    }

    /// `on_spec_change`, its `goto` target a unit state; `restart` when
    /// absent.
    pub fn spec_change(&mut self, arg: Option<SpecChangeArg>) -> SpecChange {
        match arg {
            None | Some(SpecChangeArg::Restart) => SpecChange::Restart,
            Some(SpecChangeArg::Continue) => SpecChange::Continue,
            Some(SpecChangeArg::CompensateAndRestart) => SpecChange::CompensateAndRestart,
            Some(SpecChangeArg::Goto(target)) => {
                self.engine_target(
                    &target,
                    "`on_spec_change = goto(..)`",
                    "the target of `on_spec_change`",
                );
                SpecChange::Goto(target)
            }
        }
    }

    /// `on_failed_spec_change`, its `goto` target a unit state that is not
    /// failed; `restart` when absent.
    pub fn failed_spec_change(&mut self, arg: Option<FailedSpecChangeArg>) -> FailedSpecChange {
        match arg {
            None | Some(FailedSpecChangeArg::Restart) => FailedSpecChange::Restart,
            Some(FailedSpecChangeArg::Stay) => FailedSpecChange::Stay,
            Some(FailedSpecChangeArg::Goto(target)) => {
                self.engine_target(
                    &target,
                    "`on_failed_spec_change = goto(..)`",
                    "the target of `on_failed_spec_change`",
                );
                let failed = self
                    .variants
                    .iter()
                    .any(|v| v.ident == target && v.failed.is_present());
                if failed {
                    self.error(
                        target.span(),
                        format!(
                            "`on_failed_spec_change = goto({target})` moves a failed object to \
                             another failed state: name a state the workflow can go on from, \
                             or use `stay`"
                        ),
                    );
                }
                FailedSpecChange::Goto(target)
            }
        }
    }
}
