//! The checked model: the parsed attributes turned into a machine whose
//! every rule of docs/attributes.md holds, or every broken rule as an
//! error on the token that breaks it.

use darling::ast::Style;
use proc_macro2::Span;
use syn::Ident;
use syn::spanned::Spanned;

use crate::parse::{
    EnumInput, JitterArg, OnDeleteArg, RetryArgs, SpecChangeArg, TypeArg, VariantInput,
};

/// An error at `span`.
pub fn error_at(span: Span, message: impl std::fmt::Display) -> darling::Error {
    darling::Error::from(syn::Error::new(span, message))
}

/// A validated retry policy, in the units the generated code uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// Attempts in a row, the first included (at least 1).
    pub max_attempts: u32,
    /// The first backoff, in milliseconds.
    pub initial_ms: u64,
    /// The growth per failed attempt (finite, at least 1).
    pub factor: f64,
    /// The cap, in milliseconds (at least `initial_ms`).
    pub max_ms: u64,
    /// Full jitter.
    pub jitter: bool,
}

impl Policy {
    /// `fsm_core::RetryPolicy::DEFAULT`: 5 attempts, 1 s doubling up to 5 min.
    pub const DEFAULT: Policy = Policy {
        max_attempts: 5,
        initial_ms: 1_000,
        factor: 2.0,
        max_ms: 300_000,
        jitter: false,
    };
}

/// What the engine does when the spec changes.
#[derive(Debug, Clone)]
pub enum SpecChange {
    /// Start again.
    Restart,
    /// Keep going.
    Continue,
    /// Move to this unit state.
    Goto(Ident),
    /// Compensate, then start again.
    CompensateAndRestart,
}

/// The shape of a variant, as the dispatch code destructures it.
#[derive(Debug, Clone)]
pub enum Shape {
    /// `A`.
    Unit,
    /// `A { x, y }`: the field names in declaration order.
    Named(Vec<Ident>),
    /// `A(x, y)`: the number of fields.
    Unnamed(usize),
}

impl Shape {
    /// Whether the variant carries data.
    pub fn has_data(&self) -> bool {
        !matches!(self, Shape::Unit)
    }
}

/// One checked state.
#[derive(Debug, Clone)]
pub struct State {
    /// The variant.
    pub ident: Ident,
    /// Its fields.
    pub shape: Shape,
    /// The types of its fields, in declaration order.
    pub field_types: Vec<syn::Type>,
    /// `initial`.
    pub initial: bool,
    /// `ready`.
    pub ready: bool,
    /// `failed`.
    pub failed: bool,
    /// `final`.
    pub is_final: bool,
    /// `sensitive`.
    pub sensitive: bool,
    /// `handler = path` (absent exactly for resting states).
    pub handler: Option<syn::Path>,
    /// `compensate = path`.
    pub compensate: Option<syn::Path>,
    /// `next(...)`, each a known state.
    pub next: Vec<Ident>,
    /// The state's own policy, merged with the enum's and the default.
    pub retry: Option<Policy>,
    /// `timeout`, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// `attempt_timeout`, in milliseconds.
    pub attempt_timeout_ms: Option<u64>,
    /// `on_timeout`, a known unit state.
    pub on_timeout: Option<Ident>,
    /// `on_exhausted`, a known unit state.
    pub on_exhausted: Option<Ident>,
}

impl State {
    /// Whether the machine rests here.
    pub fn is_resting(&self) -> bool {
        self.is_final || self.failed
    }
}

/// The checked machine.
#[derive(Debug, Clone)]
pub struct Model {
    /// The enum.
    pub ident: Ident,
    /// The enum's visibility.
    pub vis: syn::Visibility,
    /// `resource = T`.
    pub resource: syn::Type,
    /// `context = T`.
    pub context: Option<syn::Type>,
    /// `error = T`.
    pub error: Option<syn::Type>,
    /// The enum-level policy, merged with the default.
    pub retry: Option<Policy>,
    /// `on_failure`.
    pub on_failure: Option<Ident>,
    /// `on_spec_change`.
    pub on_spec_change: SpecChange,
    /// `snapshot_spec`.
    pub snapshot_spec: bool,
    /// `cleanup = path`.
    pub cleanup: Option<syn::Path>,
    /// `on_delete = compensate`.
    pub compensate_on_delete: bool,
    /// `crate = path`.
    pub krate: Option<syn::Path>,
    /// The states, in declaration order.
    pub states: Vec<State>,
}

/// Checks the parsed input.
///
/// # Errors
/// Every broken rule, each spanned on the offending token.
pub fn analyze(input: EnumInput) -> darling::Result<Model> {
    let mut errors = darling::Error::accumulator();
    let EnumInput {
        ident,
        attrs,
        vis,
        generics,
        data,
        resource: TypeArg(resource),
        context: TypeArg(context),
        error: TypeArg(error),
        retry,
        on_failure,
        on_spec_change,
        snapshot_spec,
        cleanup,
        on_delete,
        krate,
    } = input;

    if !generics.params.is_empty() || generics.where_clause.is_some() {
        let span = if generics.params.is_empty() {
            generics.where_clause.span()
        } else {
            generics.params.span()
        };
        errors.push(error_at(
            span,
            "#[derive(OperatorFsm)] does not support generic enums: a machine's states are stored \
             and rebuilt by name, so the enum must be a concrete type",
        ));
    }
    if resource.is_none() {
        errors.push(error_at(
            ident.span(),
            "missing `resource = Type`: name the object the machine runs for, \
             e.g. #[fsm(resource = Database)]",
        ));
    }

    let variants = data.take_enum().unwrap_or_default();
    check_serde(&attrs, ENUM_SERDE_KEYS, &mut errors);
    for v in &variants {
        check_serde(&v.attrs, VARIANT_SERDE_KEYS, &mut errors);
    }
    let names: Vec<String> = variants.iter().map(|v| v.ident.to_string()).collect();
    let has_data = |name: &Ident| {
        variants
            .iter()
            .find(|v| v.ident == *name)
            .is_some_and(|v| !v.fields.is_unit())
    };
    // A target must name a variant; `role` says which attribute names it.
    let known = |target: &Ident, role: &str, errors: &mut darling::error::Accumulator| -> bool {
        if names.iter().any(|n| target == n) {
            return true;
        }
        let mut message = format!("{role} names `{target}`, which is not a variant of `{ident}`");
        if let Some(close) = did_you_mean(&target.to_string(), &names) {
            message.push_str(&format!("; did you mean `{close}`?"));
        }
        errors.push(error_at(target.span(), message));
        false
    };
    // A target the engine builds by itself must be a unit variant.
    let unit =
        |target: &Ident, span: Span, role: &str, errors: &mut darling::error::Accumulator| {
            if has_data(target) {
                errors.push(error_at(span, data_carrying_target(target, role)));
            }
        };

    let enum_retry = retry
        .as_ref()
        .and_then(|r| merge_policy(r, None, &mut errors));

    let mut states = Vec::with_capacity(variants.len());
    let mut first_initial: Option<Ident> = None;
    for v in &variants {
        states.push(analyze_variant(
            v,
            retry.as_ref(),
            &mut first_initial,
            &known,
            &unit,
            &mut errors,
        ));
    }

    if variants.is_empty() {
        errors.push(error_at(
            ident.span(),
            "a machine needs states: add variants, one of them #[fsm(initial)]",
        ));
    } else if first_initial.is_none() {
        errors.push(error_at(
            ident.span(),
            format!(
                "`{ident}` has no initial state: mark the state the machine starts in with \
                 #[fsm(initial)]"
            ),
        ));
    }

    let failed: Vec<&VariantInput> = variants.iter().filter(|v| v.failed.is_present()).collect();
    if let Some(target) = &on_failure
        && known(target, "`on_failure`", &mut errors)
        && !failed.iter().any(|v| v.ident == *target)
    {
        errors.push(error_at(
            target.span(),
            format!("`on_failure` names `{target}`, which is not a `failed` state"),
        ));
    }
    if failed.is_empty() && !variants.is_empty() {
        errors.push(error_at(
            ident.span(),
            format!(
                "`{ident}` has no failed state: add a unit variant marked #[fsm(failed)] for the \
                 machine to rest in when the workflow fails"
            ),
        ));
    } else if failed.len() > 1 && on_failure.is_none() {
        let list: Vec<String> = failed.iter().map(|v| format!("`{}`", v.ident)).collect();
        errors.push(error_at(
            ident.span(),
            format!(
                "`{ident}` has several failed states ({}): name the one a failing workflow \
                 enters with #[fsm(on_failure = State)]",
                list.join(", ")
            ),
        ));
    }

    let on_spec_change = match on_spec_change {
        None | Some(SpecChangeArg::Restart) => SpecChange::Restart,
        Some(SpecChangeArg::Continue) => SpecChange::Continue,
        Some(SpecChangeArg::CompensateAndRestart) => SpecChange::CompensateAndRestart,
        Some(SpecChangeArg::Goto(target)) => {
            if known(&target, "`on_spec_change = goto(..)`", &mut errors) {
                unit(
                    &target,
                    target.span(),
                    "the target of `on_spec_change`",
                    &mut errors,
                );
            }
            SpecChange::Goto(target)
        }
    };

    errors.finish()?;
    let Some(resource) = resource else {
        // Reported above; finish() has returned.
        return Err(error_at(ident.span(), "missing `resource = Type`"));
    };
    Ok(Model {
        ident,
        vis,
        resource,
        context,
        error,
        retry: enum_retry,
        on_failure,
        on_spec_change,
        snapshot_spec: snapshot_spec.is_present(),
        cleanup,
        compensate_on_delete: on_delete == Some(OnDeleteArg::Compensate),
        krate,
        states,
    })
}

/// Why a data-carrying variant cannot be an engine-built target.
fn data_carrying_target(target: &Ident, role: &str) -> String {
    format!(
        "`{target}` carries data, but as {role} it is built by the engine, which has no data to \
         give it: make it a unit variant (the failure's reason lives in the record and the \
         conditions)"
    )
}

/// Enum-level serde keys that change how a state is encoded.
const ENUM_SERDE_KEYS: &[&str] = &[
    "rename_all",
    "tag",
    "content",
    "untagged",
    "variant_identifier",
];
/// Variant-level serde keys that change how a state is encoded.
const VARIANT_SERDE_KEYS: &[&str] = &[
    "rename",
    "untagged",
    "other",
    "skip",
    "skip_serializing",
    "skip_deserializing",
];

/// Refuses the serde attributes that change the encoding the default
/// `Fsm::to_parts`/`from_parts` rely on: a state is stored as its variant's
/// name, with serde's default (externally tagged) representation.
fn check_serde(attrs: &[syn::Attribute], keys: &[&str], errors: &mut darling::error::Accumulator) {
    use darling::ast::NestedMeta;

    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let syn::Meta::List(list) = &attr.meta else {
            continue;
        };
        let Ok(items) = NestedMeta::parse_meta_list(list.tokens.clone()) else {
            continue;
        };
        for item in items {
            let path = match &item {
                NestedMeta::Meta(meta) => meta.path().clone(),
                NestedMeta::NameValueInvalidExpr(nv) => nv.path.clone(),
                NestedMeta::Lit(_) => continue,
            };
            if let Some(key) = path.get_ident()
                && keys.iter().any(|k| key == k)
            {
                errors.push(error_at(
                    key.span(),
                    format!(
                        "#[derive(OperatorFsm)] stores a state as its variant's name with serde's \
                         default representation; `serde({key})` changes that encoding. Remove \
                         it, or implement `Fsm` by hand with your own `to_parts`/`from_parts`"
                    ),
                ));
            }
        }
    }
}

/// Checks one variant.
fn analyze_variant(
    v: &VariantInput,
    enum_retry: Option<&RetryArgs>,
    first_initial: &mut Option<Ident>,
    known: &impl Fn(&Ident, &str, &mut darling::error::Accumulator) -> bool,
    unit: &impl Fn(&Ident, Span, &str, &mut darling::error::Accumulator),
    errors: &mut darling::error::Accumulator,
) -> State {
    let name = &v.ident;
    let shape = match v.fields.style {
        Style::Unit => Shape::Unit,
        Style::Tuple => Shape::Unnamed(v.fields.len()),
        Style::Struct => Shape::Named(v.fields.iter().filter_map(|f| f.ident.clone()).collect()),
    };

    if v.initial.is_present() {
        match first_initial {
            Some(first) => errors.push(error_at(
                v.initial.span(),
                format!("a second initial state: `{first}` is already initial"),
            )),
            None => *first_initial = Some(name.clone()),
        }
        // A data-carrying initial state is entered with its fields'
        // `Default`: the expansion asks for it, spanned on each field.
    }
    if v.failed.is_present() {
        unit(name, v.failed.span(), "a `failed` state", errors);
        if v.is_final.is_present() {
            errors.push(error_at(
                v.is_final.span(),
                "a state is `final` or `failed`, not both: a failed state already rests",
            ));
        }
    }
    let resting = v.failed.is_present() || v.is_final.is_present();
    match (&v.handler, resting) {
        (Some(handler), true) => {
            let flag = if v.failed.is_present() {
                "failed"
            } else {
                "final"
            };
            errors.push(error_at(
                handler.span(),
                format!(
                    "`{name}` is `{flag}`: the machine rests there and runs no handler; remove \
                     the handler or the `{flag}` flag"
                ),
            ));
        }
        (None, false) => errors.push(error_at(
            name.span(),
            format!(
                "state `{name}` has no handler: add #[fsm(handler = path)], or mark it `final` \
                 (the machine rests there) or `failed`"
            ),
        )),
        _ => {}
    }

    let next = v.next.as_ref().map(|t| t.0.clone()).unwrap_or_default();
    for target in &next {
        known(target, "`next`", errors);
    }
    for (target, role, what) in [
        (&v.on_timeout, "`on_timeout`", "the target of `on_timeout`"),
        (
            &v.on_exhausted,
            "`on_exhausted`",
            "the target of `on_exhausted`",
        ),
    ] {
        if let Some(target) = target
            && known(target, role, errors)
        {
            unit(target, target.span(), what, errors);
        }
    }
    if let (Some(target), None) = (&v.on_timeout, &v.timeout) {
        errors.push(error_at(
            target.span(),
            "`on_timeout` needs a `timeout` (e.g. `timeout = \"10m\"`) to ever be taken",
        ));
    }
    for d in [&v.timeout, &v.attempt_timeout].into_iter().flatten() {
        if d.millis == 0 {
            errors.push(error_at(d.span, "a timeout must be longer than zero"));
        }
    }
    let retry = v
        .retry
        .as_ref()
        .and_then(|r| merge_policy(r, enum_retry, errors));

    State {
        ident: name.clone(),
        shape,
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
        timeout_ms: v.timeout.map(|d| d.millis),
        attempt_timeout_ms: v.attempt_timeout.map(|d| d.millis),
        on_timeout: v.on_timeout.clone(),
        on_exhausted: v.on_exhausted.clone(),
    }
}

/// Merges `own` over `inherited` over the default policy and validates the
/// result as `RetryPolicy::new` would, with errors on the keys of `own`.
fn merge_policy(
    own: &RetryArgs,
    inherited: Option<&RetryArgs>,
    errors: &mut darling::error::Accumulator,
) -> Option<Policy> {
    let max_attempts = own
        .max_attempts
        .or_else(|| inherited.and_then(|i| i.max_attempts));
    let initial = own.initial.or_else(|| inherited.and_then(|i| i.initial));
    let factor = own.factor.or_else(|| inherited.and_then(|i| i.factor));
    let max = own.max.or_else(|| inherited.and_then(|i| i.max));
    let jitter = own.jitter.or_else(|| inherited.and_then(|i| i.jitter));

    let policy = Policy {
        max_attempts: max_attempts.map_or(Policy::DEFAULT.max_attempts, |m| *m),
        initial_ms: initial.map_or(Policy::DEFAULT.initial_ms, |d| d.millis),
        factor: factor.map_or(Policy::DEFAULT.factor, |f| f.value),
        max_ms: max.map_or(Policy::DEFAULT.max_ms, |d| d.millis),
        jitter: jitter == Some(JitterArg::Full),
    };
    // A mistake in an inherited key was reported on the enum's policy.
    let mut ok = true;
    if policy.max_attempts == 0 {
        if let Some(m) = &own.max_attempts {
            errors.push(error_at(
                m.span(),
                "`max_attempts` must be at least 1: it counts the first attempt too",
            ));
        }
        ok = false;
    }
    if !policy.factor.is_finite() || policy.factor < 1.0 {
        if let Some(f) = &own.factor {
            errors.push(error_at(
                f.span,
                format!(
                    "`factor` must be at least 1.0 (delays never shrink), got {}",
                    policy.factor
                ),
            ));
        }
        ok = false;
    }
    if policy.max_ms < policy.initial_ms {
        // Point at whichever of the two this policy sets itself, `max` first.
        if let Some(span) = own.max.or(own.initial).map(|d| d.span) {
            errors.push(error_at(
                span,
                format!(
                    "`max` ({}) must not be below `initial` ({}): `max` caps the backoff",
                    show_millis(policy.max_ms),
                    show_millis(policy.initial_ms)
                ),
            ));
        }
        ok = false;
    }
    ok.then_some(policy)
}

/// Milliseconds in the attribute syntax, for messages.
fn show_millis(ms: u64) -> String {
    const UNITS: [(&str, u64); 5] = [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
        ("ms", 1),
    ];
    if ms == 0 {
        return "0s".to_owned();
    }
    let mut rest = ms;
    let mut out = String::new();
    for (unit, size) in UNITS {
        if rest >= size {
            out.push_str(&format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    format!("\"{out}\"")
}

/// The candidate closest to `name`, when it is close enough to be a typo.
pub fn did_you_mean<'a>(name: &str, candidates: &'a [String]) -> Option<&'a str> {
    let lower = name.to_lowercase();
    candidates
        .iter()
        .map(|c| {
            let d = if c.to_lowercase() == lower {
                0
            } else {
                edit_distance(&lower, &c.to_lowercase())
            };
            (d, c)
        })
        .filter(|(d, c)| *d <= (c.chars().count().max(name.chars().count()) / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.as_str())
}

/// The edit distance between two strings, a swap of two neighbours
/// counting as one edit (optimal string alignment).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // d[i][j]: distance between a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use darling::FromDeriveInput;
    use quote::quote;

    use super::*;

    fn analyze_tokens(tokens: proc_macro2::TokenStream) -> darling::Result<Model> {
        let input: syn::DeriveInput = syn::parse2(tokens).map_err(darling::Error::from)?;
        EnumInput::from_derive_input(&input).and_then(analyze)
    }

    fn messages(tokens: proc_macro2::TokenStream) -> Vec<String> {
        match analyze_tokens(tokens) {
            Ok(_) => Vec::new(),
            Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn suggestions_catch_typos_and_swaps() {
        let names: Vec<String> = ["Done", "Failed", "Pending"].map(String::from).to_vec();
        assert_eq!(did_you_mean("Dnoe", &names), Some("Done"));
        assert_eq!(did_you_mean("Faild", &names), Some("Failed"));
        assert_eq!(did_you_mean("pending", &names), Some("Pending"));
        assert_eq!(did_you_mean("Elsewhere", &names), None);
        assert_eq!(edit_distance("abc", "abc"), 0);
        assert_eq!(edit_distance("ab", "ba"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn a_good_machine_becomes_a_model() {
        let model = analyze_tokens(quote! {
            #[fsm(resource = u8, retry(max_attempts = 3, initial = "2s"))]
            enum S {
                #[fsm(initial, handler = h, next(B), retry(max = "1m", jitter = full))]
                A,
                #[fsm(handler = h, next(Done))]
                B { x: u8, y: u8 },
                #[fsm(final)]
                Done,
                #[fsm(failed)]
                Failed,
            }
        });
        let model = match model {
            Ok(m) => m,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(model.states.len(), 4);
        assert_eq!(
            model.retry,
            Some(Policy {
                max_attempts: 3,
                initial_ms: 2_000,
                ..Policy::DEFAULT
            })
        );
        // The state's policy inherits what it does not set.
        assert_eq!(
            model.states[0].retry,
            Some(Policy {
                max_attempts: 3,
                initial_ms: 2_000,
                factor: 2.0,
                max_ms: 60_000,
                jitter: true,
            })
        );
        assert!(matches!(&model.states[1].shape, Shape::Named(f) if f.len() == 2));
        assert!(model.states[2].is_resting() && model.states[2].handler.is_none());
    }

    #[test]
    fn every_broken_rule_is_reported_at_once() {
        let errors = messages(quote! {
            #[fsm(on_spec_change = goto(B))]
            enum S<T> {
                #[fsm(handler = h, next(Nowhere), on_exhausted = B)]
                A,
                #[fsm(initial, handler = h)]
                B(T),
                #[fsm(final, handler = h)]
                C,
                D,
                #[fsm(failed, retry(factor = 0.5, max_attempts = 0, initial = "1h", max = "1s"))]
                F1,
                #[fsm(failed)]
                F2,
            }
        });
        let expect = [
            "generic enums",
            "missing `resource",
            "`next` names `Nowhere`",
            "target of `on_exhausted`",
            "`C` is `final`",
            "state `D` has no handler",
            "`factor` must be at least 1.0",
            "`max_attempts` must be at least 1",
            "`max` (\"1s\") must not be below `initial` (\"1h\")",
            "several failed states (`F1`, `F2`)",
            "target of `on_spec_change`",
        ];
        for e in expect {
            assert!(
                errors.iter().any(|m| m.contains(e)),
                "no {e:?} in {errors:#?}"
            );
        }
        assert_eq!(errors.len(), expect.len(), "{errors:#?}");
    }

    #[test]
    fn inherited_mistakes_are_reported_once() {
        let errors = messages(quote! {
            #[fsm(resource = u8, retry(factor = 0.5))]
            enum S {
                #[fsm(initial, handler = h, retry(max_attempts = 2))]
                A,
                #[fsm(failed)]
                F,
            }
        });
        assert_eq!(errors.len(), 1, "{errors:#?}");
    }

    #[test]
    fn serde_renames_are_refused() {
        let errors = messages(quote! {
            #[fsm(resource = u8)]
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            enum S {
                #[fsm(initial, handler = h)]
                #[serde(rename = "a", alias = "aa")]
                A,
                #[fsm(failed)]
                F,
            }
        });
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(errors[0].contains("serde(rename_all)"), "{errors:#?}");
        assert!(errors[1].contains("serde(rename)"), "{errors:#?}");
    }

    #[test]
    fn an_empty_enum_has_no_states() {
        let errors = messages(quote! {
            #[fsm(resource = u8)]
            enum S {}
        });
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(errors[0].contains("needs states"));
    }
}
