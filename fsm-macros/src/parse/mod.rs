//! The attributes as written: darling structs for `#[fsm(...)]` on the enum
//! and on its variants. Nothing is checked here beyond the syntax of each
//! key; [`crate::analyze`] checks the machine as a whole. `lenient` reads
//! the declared types for the fallback impl when the derive refuses the
//! enum.

pub mod lenient;

use darling::ast::{Data, Fields, NestedMeta};
use darling::util::{Flag, SpannedValue};
use darling::{FromDeriveInput, FromMeta, FromVariant};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Expr, Ident, Lit, Meta, UnOp};

use crate::duration::DurationLit;

/// `#[fsm(...)]` on the enum.
#[derive(Debug, FromDeriveInput)]
#[darling(attributes(fsm), forward_attrs(serde))]
pub struct EnumInput {
    /// The enum's name.
    pub ident: Ident,
    /// Its `#[serde(...)]` attributes, checked by the analysis.
    pub attrs: Vec<syn::Attribute>,
    /// Its visibility, given to the generated inherent items.
    pub vis: syn::Visibility,
    /// The enum's generics (refused by the analysis).
    pub generics: syn::Generics,
    /// The variants.
    pub data: Data<VariantInput, darling::util::Ignored>,
    /// `resource = T`, required (checked by the analysis so that its absence
    /// is reported with the other mistakes).
    pub resource: TypeArg,
    /// `context = T`.
    pub context: TypeArg,
    /// `error = T`.
    pub error: TypeArg,
    /// `retry(...)`: the default policy.
    #[darling(default)]
    pub retry: Option<RetryArgs>,
    /// `on_failure = State`.
    #[darling(default)]
    pub on_failure: Option<Ident>,
    /// `on_spec_change = restart | continue | goto(State) |
    /// compensate_and_restart`.
    #[darling(default)]
    pub on_spec_change: Option<SpecChangeArg>,
    /// `on_failed_spec_change = restart | stay | goto(State)`.
    #[darling(default)]
    pub on_failed_spec_change: Option<FailedSpecChangeArg>,
    /// `snapshot_spec`.
    pub snapshot_spec: Flag,
    /// `cleanup = path`.
    #[darling(default)]
    pub cleanup: Option<syn::Path>,
    /// `on_delete = compensate | nothing`.
    #[darling(default)]
    pub on_delete: Option<OnDeleteArg>,
    /// `crate = path`: where `fsm_core` is.
    #[darling(default, rename = "crate")]
    pub krate: Option<syn::Path>,
    /// `version = N`: the machine version stored in its records.
    #[darling(default)]
    pub version: Option<SpannedValue<u32>>,
    /// `migrate = path`: the migration hook for older records.
    #[darling(default)]
    pub migrate: Option<syn::Path>,
    /// `batch_commits`: chained transitions are committed together.
    pub batch_commits: Flag,
}

/// `#[fsm(...)]` on a variant.
#[derive(Debug, FromVariant)]
#[darling(attributes(fsm), forward_attrs(serde))]
pub struct VariantInput {
    /// The variant's name.
    pub ident: Ident,
    /// Its `#[serde(...)]` attributes, checked by the analysis.
    pub attrs: Vec<syn::Attribute>,
    /// The variant's fields.
    pub fields: Fields<syn::Field>,
    /// `initial`.
    pub initial: Flag,
    /// `handler = path`.
    #[darling(default)]
    pub handler: Option<syn::Path>,
    /// `converge = path`: the function that builds what the state
    /// converges.
    #[darling(default)]
    pub converge: Option<syn::Path>,
    /// `next(A, B)`.
    #[darling(default)]
    pub next: Option<Targets>,
    /// `retry(...)`.
    #[darling(default)]
    pub retry: Option<RetryArgs>,
    /// `timeout = "10m"`.
    #[darling(default)]
    pub timeout: Option<DurationLit>,
    /// `attempt_timeout = "30s"`.
    #[darling(default)]
    pub attempt_timeout: Option<DurationLit>,
    /// `on_timeout = State`.
    #[darling(default)]
    pub on_timeout: Option<Ident>,
    /// `on_exhausted = State`.
    #[darling(default)]
    pub on_exhausted: Option<Ident>,
    /// `compensate = path`.
    #[darling(default)]
    pub compensate: Option<syn::Path>,
    /// `ready`.
    pub ready: Flag,
    /// `failed`.
    pub failed: Flag,
    /// `final`.
    #[darling(rename = "final")]
    pub is_final: Flag,
    /// `sensitive`.
    pub sensitive: Flag,
    /// `renamed_from = "Old"`, repeatable: the state's former names.
    #[darling(multiple)]
    pub renamed_from: Vec<syn::LitStr>,
    /// `allow(unreachable, never_rests)`: graph checks waived for the state.
    #[darling(default)]
    pub allow: Option<AllowArgs>,
    /// `batch_entry`: a chained transition into the state may ride with a
    /// later commit (in a machine without `batch_commits`).
    pub batch_entry: Flag,
    /// `commit_on_entry`: a transition into the state is committed before
    /// its handler runs (in a machine with `batch_commits`).
    pub commit_on_entry: Flag,
    /// `commits`: entering the state closes the saga's scope.
    pub commits: Flag,
    /// `on_signal(approve = Serving, reject = Rejected)`: the signals the
    /// state takes from a person, and the states they move to.
    #[darling(default)]
    pub on_signal: Option<Signals>,
    /// `immutable("spec.engine", ...)`: fields that may not change while
    /// the object is in this state.
    #[darling(default)]
    pub immutable: Option<FieldPaths>,
    /// `grow_only("spec.storageGi", ...)`: fields that may not shrink while
    /// the object is in this state.
    #[darling(default)]
    pub grow_only: Option<FieldPaths>,
    /// `refuse_delete`: the object may not be deleted in this state.
    pub refuse_delete: Flag,
}

/// `allow(unreachable, never_rests)`: the graph checks a state is exempt
/// from, deliberately.
#[derive(Debug, Clone, Default, FromMeta)]
pub struct AllowArgs {
    /// No workflow enters the state (yet).
    pub unreachable: Flag,
    /// No declared path leads from the state to rest.
    pub never_rests: Flag,
}

/// A type given as `key = Type`, absent when the key is not written.
///
/// `Option<syn::Type>` would refuse types that are not also expressions,
/// such as `Arc<Ctx>`: darling's `Option` does not forward them. A type
/// with a comma (`HashMap<K, V>`) needs an alias, as darling splits the
/// attribute at commas.
#[derive(Debug, Clone, Default)]
pub struct TypeArg(pub Option<syn::Type>);

impl FromMeta for TypeArg {
    fn from_none() -> Option<Self> {
        Some(TypeArg(None))
    }

    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        syn::Type::from_expr(expr).map(|t| TypeArg(Some(t)))
    }

    fn from_invalid_expr(value: &darling::ast::MetaNameValueInvalidExpr) -> darling::Result<Self> {
        syn::Type::from_invalid_expr(value).map(|t| TypeArg(Some(t)))
    }
}

/// `retry(max_attempts = 5, initial = "1s", factor = 2.0, max = "5m",
/// jitter = full)`; every key optional.
#[derive(Debug, Clone, Default, FromMeta)]
pub struct RetryArgs {
    /// Attempts in a row, the first included.
    #[darling(default)]
    pub max_attempts: Option<SpannedValue<u32>>,
    /// The first backoff.
    #[darling(default)]
    pub initial: Option<DurationLit>,
    /// The growth per failed attempt.
    #[darling(default)]
    pub factor: Option<Factor>,
    /// The cap of the backoff.
    #[darling(default)]
    pub max: Option<DurationLit>,
    /// `full` or `none`.
    #[darling(default)]
    pub jitter: Option<JitterArg>,
}

/// A retry factor: an integer or float literal, possibly negative (refused
/// later, with its span).
#[derive(Debug, Clone, Copy)]
pub struct Factor {
    /// The value.
    pub value: f64,
    /// Where it is written.
    pub span: Span,
}

impl FromMeta for Factor {
    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        let number = |lit: &Lit| -> darling::Result<f64> {
            match lit {
                Lit::Float(f) => f.base10_parse::<f64>().map_err(darling::Error::from),
                Lit::Int(i) => i.base10_parse::<f64>().map_err(darling::Error::from),
                _ => Err(darling::Error::custom(
                    "expected a number, e.g. `factor = 2.0`",
                )),
            }
        };
        let value = match expr {
            Expr::Lit(lit) => number(&lit.lit),
            Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => match &*u.expr {
                Expr::Lit(lit) => number(&lit.lit).map(|v| -v),
                _ => Err(darling::Error::custom(
                    "expected a number, e.g. `factor = 2.0`",
                )),
            },
            Expr::Group(group) => return Self::from_expr(&group.expr),
            _ => Err(darling::Error::custom(
                "expected a number, e.g. `factor = 2.0`",
            )),
        };
        value
            .map(|value| Factor {
                value,
                span: expr.span(),
            })
            .map_err(|e| e.with_span(expr))
    }
}

/// `jitter = full | none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JitterArg {
    /// No jitter.
    None,
    /// Full jitter.
    Full,
}

impl FromMeta for JitterArg {
    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        match word(expr).as_deref() {
            Some("none") => Ok(JitterArg::None),
            Some("full") => Ok(JitterArg::Full),
            Some(other) => Err(
                darling::Error::unknown_value_with_alts(other, &["full", "none"]).with_span(expr),
            ),
            None => Err(darling::Error::custom("expected `full` or `none`").with_span(expr)),
        }
    }
}

/// `on_delete = compensate | nothing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDeleteArg {
    /// Only `cleanup`.
    Nothing,
    /// The compensation chain, then `cleanup`.
    Compensate,
}

impl FromMeta for OnDeleteArg {
    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        match word(expr).as_deref() {
            Some("nothing") => Ok(OnDeleteArg::Nothing),
            Some("compensate") => Ok(OnDeleteArg::Compensate),
            Some(other) => Err(darling::Error::unknown_value_with_alts(
                other,
                &["compensate", "nothing"],
            )
            .with_span(expr)),
            None => {
                Err(darling::Error::custom("expected `compensate` or `nothing`").with_span(expr))
            }
        }
    }
}

/// `on_spec_change = restart | continue | goto(State) |
/// compensate_and_restart`.
#[derive(Debug, Clone)]
pub enum SpecChangeArg {
    /// Start again from the initial state.
    Restart,
    /// Keep the current state.
    Continue,
    /// Move to the named state.
    Goto(Ident),
    /// Run the compensation chain, then start again.
    CompensateAndRestart,
}

impl FromMeta for SpecChangeArg {
    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        const EXPECTED: &str =
            "expected `restart`, `continue`, `goto(State)` or `compensate_and_restart`";
        match expr {
            // `continue` is a keyword and parses as a `continue` expression.
            Expr::Continue(c) if c.label.is_none() => Ok(SpecChangeArg::Continue),
            Expr::Call(call) => goto_target(call, EXPECTED).map(SpecChangeArg::Goto),
            Expr::Group(group) => Self::from_expr(&group.expr),
            _ => match word(expr).as_deref() {
                Some("restart") => Ok(SpecChangeArg::Restart),
                Some("compensate_and_restart") => Ok(SpecChangeArg::CompensateAndRestart),
                Some("goto") => Err(darling::Error::custom(
                    "`goto` takes a state name, e.g. `goto(Provisioning)`",
                )
                .with_span(expr)),
                Some(other) => Err(darling::Error::unknown_value_with_alts(
                    other,
                    &["restart", "continue", "goto", "compensate_and_restart"],
                )
                .with_span(expr)),
                None => Err(darling::Error::custom(EXPECTED).with_span(expr)),
            },
        }
    }
}

/// `on_failed_spec_change = restart | stay | goto(State)`.
#[derive(Debug, Clone)]
pub enum FailedSpecChangeArg {
    /// Start again from the initial state.
    Restart,
    /// Stay failed.
    Stay,
    /// Move to the named state.
    Goto(Ident),
}

impl FromMeta for FailedSpecChangeArg {
    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        const EXPECTED: &str = "expected `restart`, `stay` or `goto(State)`";
        match expr {
            Expr::Call(call) => goto_target(call, EXPECTED).map(FailedSpecChangeArg::Goto),
            Expr::Group(group) => Self::from_expr(&group.expr),
            _ => match word(expr).as_deref() {
                Some("restart") => Ok(FailedSpecChangeArg::Restart),
                Some("stay") => Ok(FailedSpecChangeArg::Stay),
                Some("goto") => Err(darling::Error::custom(
                    "`goto` takes a state name, e.g. `goto(Provisioning)`",
                )
                .with_span(expr)),
                Some(other) => Err(darling::Error::unknown_value_with_alts(
                    other,
                    &["restart", "stay", "goto"],
                )
                .with_span(expr)),
                None => Err(darling::Error::custom(EXPECTED).with_span(expr)),
            },
        }
    }
}

/// The state of a `goto(State)` call; `expected` names the values the key
/// takes when the call is not `goto`.
fn goto_target(call: &syn::ExprCall, expected: &str) -> darling::Result<Ident> {
    if word(&call.func).as_deref() != Some("goto") {
        return Err(darling::Error::custom(expected).with_span(&call.func));
    }
    let target = match (call.args.len(), call.args.first()) {
        (1, Some(arg)) => word_ident(arg),
        _ => None,
    };
    target.ok_or_else(|| {
        darling::Error::custom("`goto` takes one state name, e.g. `goto(Provisioning)`")
            .with_span(&call.args)
    })
}

/// `next(A, B, ...)`: state names.
#[derive(Debug, Clone, Default)]
pub struct Targets(pub Vec<Ident>);

impl FromMeta for Targets {
    fn from_list(items: &[NestedMeta]) -> darling::Result<Self> {
        let mut errors = darling::Error::accumulator();
        let mut targets = Vec::new();
        for item in items {
            match item {
                NestedMeta::Meta(Meta::Path(path)) if path.get_ident().is_some() => {
                    if let Some(ident) = path.get_ident() {
                        targets.push(ident.clone());
                    }
                }
                other => errors.push(
                    darling::Error::custom("expected a state name, e.g. `next(Ready, Failed)`")
                        .with_span(other),
                ),
            }
        }
        errors.finish_with(Targets(targets))
    }
}

/// `on_signal(approve = Serving, ...)`: signal names and their target
/// states, in declaration order.
#[derive(Debug, Clone, Default)]
pub struct Signals(pub Vec<(Ident, Ident)>);

impl FromMeta for Signals {
    fn from_list(items: &[NestedMeta]) -> darling::Result<Self> {
        const EXPECTED: &str =
            "expected `signal = State`, e.g. `on_signal(approve = Serving, reject = Rejected)`";
        let mut errors = darling::Error::accumulator();
        let mut signals = Vec::new();
        for item in items {
            let pair = match item {
                NestedMeta::Meta(Meta::NameValue(nv)) => {
                    nv.path.get_ident().cloned().zip(word_ident(&nv.value))
                }
                _ => None,
            };
            match pair {
                Some(pair) => signals.push(pair),
                None => errors.push(darling::Error::custom(EXPECTED).with_span(item)),
            }
        }
        if items.is_empty() {
            errors.push(darling::Error::custom(EXPECTED));
        }
        errors.finish_with(Signals(signals))
    }
}

/// `immutable("spec.engine", "spec.region")`: fields of the object as
/// dotted paths, each a string literal (JSON names, which Rust
/// identifiers cannot always spell), checked by the analysis.
#[derive(Debug, Clone, Default)]
pub struct FieldPaths(pub Vec<syn::LitStr>);

impl FromMeta for FieldPaths {
    fn from_list(items: &[NestedMeta]) -> darling::Result<Self> {
        const EXPECTED: &str =
            "expected a field path as a string, e.g. `immutable(\"spec.engine\")`";
        let mut errors = darling::Error::accumulator();
        let mut paths = Vec::new();
        for item in items {
            match item {
                NestedMeta::Lit(Lit::Str(path)) => paths.push(path.clone()),
                other => errors.push(darling::Error::custom(EXPECTED).with_span(other)),
            }
        }
        if items.is_empty() {
            errors.push(darling::Error::custom(EXPECTED));
        }
        errors.finish_with(FieldPaths(paths))
    }
}

/// The single identifier an expression consists of, as text.
fn word(expr: &Expr) -> Option<String> {
    word_ident(expr).map(|i| i.to_string())
}

/// The single identifier an expression consists of.
fn word_ident(expr: &Expr) -> Option<Ident> {
    match expr {
        Expr::Path(p) if p.qself.is_none() && p.attrs.is_empty() => p.path.get_ident().cloned(),
        Expr::Group(g) => word_ident(&g.expr),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn enum_input(tokens: proc_macro2::TokenStream) -> darling::Result<EnumInput> {
        let input: syn::DeriveInput = syn::parse2(tokens).map_err(darling::Error::from)?;
        EnumInput::from_derive_input(&input)
    }

    #[test]
    fn parses_keywords_and_split_attributes() {
        let input = enum_input(quote! {
            #[fsm(resource = Db, on_spec_change = continue)]
            #[fsm(retry(factor = 3, jitter = full), crate = ::my::core)]
            enum S {
                #[fsm(initial, handler = h, next(Done))]
                A,
                #[fsm(final)]
                Done,
            }
        });
        let input = match input {
            Ok(i) => i,
            Err(e) => panic!("{e}"),
        };
        assert!(matches!(
            input.on_spec_change,
            Some(SpecChangeArg::Continue)
        ));
        assert_eq!(
            input.retry.as_ref().and_then(|r| r.factor).map(|f| f.value),
            Some(3.0)
        );
        assert_eq!(
            input.retry.as_ref().and_then(|r| r.jitter),
            Some(JitterArg::Full)
        );
        assert!(input.krate.is_some());
        let variants = input.data.take_enum().unwrap_or_default();
        assert!(variants[0].initial.is_present());
        assert_eq!(variants[0].next.as_ref().map(|t| t.0.len()), Some(1));
        assert!(variants[1].is_final.is_present());
    }

    #[test]
    fn parses_goto_and_negative_factors() {
        let input = enum_input(quote! {
            #[fsm(on_spec_change = goto(Start), retry(factor = -2.5))]
            enum S { A }
        });
        let input = match input {
            Ok(i) => i,
            Err(e) => panic!("{e}"),
        };
        assert!(matches!(input.on_spec_change, Some(SpecChangeArg::Goto(ref i)) if i == "Start"));
        assert_eq!(
            input.retry.and_then(|r| r.factor).map(|f| f.value),
            Some(-2.5)
        );
    }

    #[test]
    fn parses_compensate_and_restart() {
        let input = enum_input(quote! {
            #[fsm(on_spec_change = compensate_and_restart)]
            enum S { A }
        });
        assert!(matches!(
            input.map(|i| i.on_spec_change),
            Ok(Some(SpecChangeArg::CompensateAndRestart))
        ));
    }

    #[test]
    fn types_need_not_be_expressions() {
        let input = enum_input(quote! {
            #[fsm(resource = Arc<Db>, context = &'static str, error = Box<dyn Error + Send>)]
            enum S { A }
        });
        let input = match input {
            Ok(i) => i,
            Err(e) => panic!("{e}"),
        };
        assert!(input.resource.0.is_some());
        assert!(input.context.0.is_some());
        assert!(input.error.0.is_some());
        let input = enum_input(quote!(
            enum S {
                A,
            }
        ));
        assert!(input.is_ok_and(|i| i.resource.0.is_none()));
    }

    #[test]
    fn parses_upgrade_keys() {
        let input = enum_input(quote! {
            #[fsm(version = 3, migrate = upgrades::migrate)]
            enum S {
                #[fsm(renamed_from = "Old", renamed_from = "Older", allow(unreachable, never_rests))]
                A,
                B,
            }
        });
        let input = match input {
            Ok(i) => i,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(input.version.map(|v| *v), Some(3));
        assert!(input.migrate.is_some());
        let variants = input.data.take_enum().unwrap_or_default();
        let names: Vec<String> = variants[0]
            .renamed_from
            .iter()
            .map(syn::LitStr::value)
            .collect();
        assert_eq!(names, ["Old", "Older"]);
        let allow = variants[0].allow.clone().unwrap_or_default();
        assert!(allow.unreachable.is_present() && allow.never_rests.is_present());
        assert!(variants[1].renamed_from.is_empty() && variants[1].allow.is_none());
    }

    #[test]
    fn parses_commit_keys() {
        let input = enum_input(quote! {
            #[fsm(batch_commits)]
            enum S {
                #[fsm(commit_on_entry)]
                A,
                #[fsm(batch_entry)]
                B,
                C,
            }
        });
        let input = match input {
            Ok(i) => i,
            Err(e) => panic!("{e}"),
        };
        assert!(input.batch_commits.is_present());
        let variants = input.data.take_enum().unwrap_or_default();
        assert!(variants[0].commit_on_entry.is_present() && !variants[0].batch_entry.is_present());
        assert!(variants[1].batch_entry.is_present() && !variants[1].commit_on_entry.is_present());
        assert!(!variants[2].batch_entry.is_present() && !variants[2].commit_on_entry.is_present());
    }

    #[test]
    fn misspelled_keys_get_suggestions() {
        let Err(e) = enum_input(quote! {
            enum S { #[fsm(timout = "1s")] A }
        }) else {
            panic!("a misspelled key must be refused");
        };
        assert!(e.to_string().contains("Did you mean `timeout`"), "{e}");
    }

    #[test]
    fn bad_values_are_refused_together() {
        let Err(e) = enum_input(quote! {
            #[fsm(on_spec_change = later, on_delete = maybe)]
            enum S { #[fsm(timeout = "10 minutes", next(a::b))] A }
        }) else {
            panic!("bad values must be refused");
        };
        assert_eq!(e.len(), 4, "{e}");
    }
}
