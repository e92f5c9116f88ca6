//! The checker: what every rule needs to know about the machine (its name,
//! its variants, the enum's retry keys) and the errors found so far, each
//! on the token that breaks a rule, combined into one report.

use proc_macro2::Span;
use syn::Ident;

use crate::parse::{RetryArgs, VariantInput};
use crate::suggest::did_you_mean;

/// The rules' shared view of the enum, and the errors they report.
pub struct Checker<'a> {
    /// The enum's name.
    pub(super) machine: &'a Ident,
    /// The variants, in declaration order.
    pub(super) variants: &'a [VariantInput],
    /// The enum's `retry(...)`, which each state's policy inherits.
    pub(super) enum_retry: Option<&'a RetryArgs>,
    /// The variant names, the candidates of "did you mean".
    names: Vec<String>,
    /// Every error so far, in the order found.
    errors: Option<syn::Error>,
}

impl<'a> Checker<'a> {
    /// A checker for the enum `machine` with these variants, no error yet.
    pub fn new(
        machine: &'a Ident,
        variants: &'a [VariantInput],
        enum_retry: Option<&'a RetryArgs>,
    ) -> Self {
        Checker {
            machine,
            variants,
            enum_retry,
            names: variants.iter().map(|v| v.ident.to_string()).collect(),
            errors: None,
        }
    }

    /// Reports a broken rule at `span`.
    pub fn error(&mut self, span: Span, message: impl std::fmt::Display) {
        let error = syn::Error::new(span, message);
        match &mut self.errors {
            Some(errors) => errors.combine(error),
            None => self.errors = Some(error),
        }
    }

    /// Whether `target` names a variant; an error with a suggestion if not.
    /// `role` is the attribute that names it.
    pub fn known(&mut self, target: &Ident, role: &str) -> bool {
        if self.names.iter().any(|n| target == n) {
            return true;
        }
        let mut message = format!(
            "{role} names `{target}`, which is not a variant of `{}`",
            self.machine
        );
        if let Some(close) = did_you_mean(&target.to_string(), &self.names) {
            message.push_str(&format!("; did you mean `{close}`?"));
        }
        self.error(target.span(), message);
        false
    }

    /// Refuses a data-carrying `target` where the engine builds the state
    /// by itself (`as_what` says where), with the error at `span`.
    pub fn built_by_engine(&mut self, target: &Ident, span: Span, as_what: &str) {
        let carries_data = self
            .variants
            .iter()
            .any(|v| v.ident == *target && !v.fields.is_unit());
        if carries_data {
            self.error(
                span,
                format!(
                    "`{target}` carries data, but as {as_what} it is built by the engine, which \
                     has no data to give it: make it a unit variant (what led there is kept in \
                     the record's history and the object's conditions)"
                ),
            );
        }
    }

    /// A target the engine moves to by itself: a known variant without
    /// data. `role` is the attribute, `as_what` the target's part.
    pub fn engine_target(&mut self, target: &Ident, role: &str, as_what: &str) {
        if self.known(target, role) {
            self.built_by_engine(target, target.span(), as_what);
        }
    }

    /// Whether no rule was broken so far.
    pub fn is_clean(&self) -> bool {
        self.errors.is_none()
    }

    /// Ends the checks.
    ///
    /// # Errors
    /// Every error reported, combined in the order found.
    pub fn finish(self) -> syn::Result<()> {
        self.errors.map_or(Ok(()), Err)
    }
}
