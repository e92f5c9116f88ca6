//! `#[derive(OperatorFsm)]` for operator-fsm: turns a state enum annotated
//! with `#[fsm(...)]` into an `fsm_core::Fsm`.
//!
//! The derive is a pipeline, one file per stage:
//! - `parse`: the attributes as written (darling), with "did you mean"
//!   suggestions for misspelled keys;
//! - `duration`: the duration literals (`"500ms"`, `"1h30m"`);
//! - `analyze`: the checks, every broken rule an error on the token that
//!   breaks it, all reported together, and "did you mean" suggestions for
//!   state names (`suggest`);
//! - `model`: what the analysis resolves, every value code generation
//!   needs, checked;
//! - `codegen`: the `Fsm` impl and its static metadata table, from the
//!   model alone;
//! - `diagram`: the Mermaid diagram put in the generated rustdoc.
//!
//! Users reach it through `fsm_core::prelude::*` (or `fsm_kube`); the
//! grammar is documented on [`OperatorFsm`].

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;

mod analyze;
mod codegen;
mod diagram;
mod duration;
mod graph;
mod model;
mod parse;
mod suggest;

#[cfg(test)]
mod expansion_snapshots;

/// Implements `fsm_core::Fsm` for a state enum.
///
/// Each variant is a state; `#[fsm(...)]` on the enum and on the variants
/// describes the machine. The enum must also derive `Clone`, `Serialize`
/// and `Deserialize` (serde's default representation).
///
/// # Enum attributes
/// - `resource = Type` (required): the object the machine runs for;
/// - `context = Type` (default `()`), `error = Type` (default
///   `Infallible`);
/// - `retry(max_attempts = 5, initial = "1s", factor = 2.0, max = "5m",
///   jitter = full | none)`: the default policy, every key optional;
/// - `on_failure = State`: the default `failed` state when there are several;
/// - `on_spec_change = restart | continue | goto(State) |
///   compensate_and_restart` (default `restart`);
/// - `snapshot_spec`, `cleanup = path`, `on_delete = compensate | nothing`;
/// - `crate = path`: where `fsm_core` is, when it is renamed or re-exported.
/// - `version = N` (default 1): the machine version stored in its records;
///   `migrate = path`: `fn(OldRecord<'_>) -> Result<Migrated<S>,
///   MigrationError>`, asked about records of older versions (see
///   `docs/upgrading.md`).
/// - `batch_commits`: when one reconcile runs several transitions, commit
///   them together when the chain stops (see `docs/semantics.md`, "Batched
///   commits").
///
/// # Variant attributes
/// `initial`, `handler = path`, `next(A, B)`, `retry(...)` (keys not given
/// are inherited from the enum's policy, then from `RetryPolicy::DEFAULT`),
/// `timeout = "10m"`, `attempt_timeout = "30s"`, `on_timeout = State`,
/// `on_exhausted = State`, `compensate = path`, `ready`, `failed`, `final`,
/// `sensitive`, `renamed_from = "Old"` (repeatable: names the state had in
/// earlier builds), `allow(unreachable, never_rests)`, `batch_entry` (this
/// state's entry may be batched, without the enum's `batch_commits`),
/// `commit_on_entry` (under `batch_commits`, this state's entry is committed
/// before its handler runs), `commits` (entering this state closes the
/// saga's scope: a later failure no longer undoes the compensable states
/// entered before it; `ready` and `final` states close it too),
/// `immutable("spec.engine", ..)`, `grow_only("spec.storageGi", ..)` and
/// `refuse_delete` (what the operator's admission webhook refuses while
/// an object is in this state: a change of the fields, a smaller value,
/// its deletion). The
/// `initial` state may carry data: it is entered with every field's
/// `Default` (a field type without one is an error on the
/// field), so its handler can checkpoint before a non-idempotent call.
///
/// `converge = path` replaces `handler` in a state that only converges
/// something and moves on: `path(cx, &fields...)` returns
/// `Result<D, E>` with `D: fsm_core::Converge<S>` (with `fsm-kube`, a
/// `DesiredSet` of dependents), and the generated handler returns what
/// `D::converge_state(cx, next)` answers, `next` being the state's one
/// `next` target (entered with its fields' `Default` when it has data).
///
/// A handler is called with the step context, then the variant's fields by
/// reference in declaration order: `async fn h(cx: &mut Step<'_, S>, a: &A)
/// -> Result<Transition<S>, E>` (deref coercion applies, so a `String`
/// field may be taken as `&str`); a compensation takes the same arguments
/// and returns `Result<(), E>`; `cleanup` takes the step and the state the
/// machine is in (`async fn c(cx: &mut Step<'_, S>, state: &S) ->
/// Result<(), E>`). Any function
/// returning a `Send` future of that output fits; a signature that does not
/// is reported on the function's path in the attribute.
///
/// # Graph checks
/// Every state can be entered from the initial state (following `next`,
/// `on_timeout`, `on_exhausted` and the engine's failure edges), and from
/// every state a path of `next`, `on_timeout` and `on_exhausted` reaches a
/// `ready`, `final` or `failed` state; a state that breaks either is an
/// error on its name unless it says `allow(unreachable)` or
/// `allow(never_rests)`, and the diagram marks it.
///
/// # Caveats
/// - A type with a comma (`HashMap<K, V>`) in `resource`/`context`/`error`
///   needs a type alias: the attribute is split at commas.
/// - States are stored under their variant names in serde's default
///   representation, so serde attributes that rename variants or change the
///   enum's representation are refused.
/// - A derive cannot add to the enum's own documentation: the diagram is in
///   the documentation of the generated inherent impl, shown on the enum's
///   page.
///
/// # Generated
/// The `Fsm` impl (with its static `Machine` table, so `mermaid()` and
/// `dot()` draw the declared machine: the `next` targets, the `timeout`,
/// `exhausted` and `fail` edges the engine takes by itself, and the
/// compensations) and an inherent `MERMAID` constant whose documentation
/// shows the diagram.
///
/// A function that does not take `cx: &mut Step<'_, S>` first (`&Step`,
/// say) and an enum without `Serialize` and `Deserialize` are reported as
/// such, once.
///
/// This example runs as a doctest of `fsm_core` (its crate documentation,
/// "With the derive"), which re-exports the derive:
///
/// ```ignore
/// use fsm_core::prelude::*;
///
/// #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
/// #[fsm(resource = String)]
/// enum Job {
///     #[fsm(initial, handler = start, next(Done))]
///     Pending,
///     #[fsm(final, ready)]
///     Done,
///     #[fsm(failed)]
///     Failed,
/// }
///
/// async fn start(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
///     Ok(Transition::next(Job::Done))
/// }
///
/// assert_eq!(Job::machine().validate(), Ok(()));
/// assert_eq!(Job::mermaid(), Job::MERMAID);
/// ```
#[proc_macro_derive(OperatorFsm, attributes(fsm))]
pub fn derive_operator_fsm(input: TokenStream) -> TokenStream {
    derive(input.into()).into()
}

/// The derive on token streams: the expansion, or `compile_error!`s.
fn derive(input: TokenStream2) -> TokenStream2 {
    use darling::FromDeriveInput;

    let input: syn::DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(e) => return e.into_compile_error(),
    };
    let not_enum = match &input.data {
        syn::Data::Enum(_) => None,
        syn::Data::Struct(s) => Some(s.struct_token.span),
        syn::Data::Union(u) => Some(u.union_token.span),
    };
    if let Some(span) = not_enum {
        return syn::Error::new(
            span,
            "#[derive(OperatorFsm)] applies to enums only: each variant is a state",
        )
        .into_compile_error();
    }
    let model = parse::EnumInput::from_derive_input(&input)
        .map_err(syn::Error::from)
        .and_then(analyze::analyze);
    match model {
        Ok(model) => codegen::generate(&model),
        Err(errors) => {
            let mut out = errors.into_compile_error();
            if let Some(declared) = parse::lenient::fallback(&input) {
                out.extend(codegen::fallback(&declared));
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::{TokenStream2, derive};

    fn expand(tokens: TokenStream2) -> String {
        derive(tokens).to_string()
    }

    #[test]
    fn a_machine_expands_to_the_trait_impl() {
        let out = expand(quote! {
            #[fsm(resource = u8)]
            enum S {
                #[fsm(initial, handler = h, next(Done))]
                A,
                #[fsm(final)]
                Done,
                #[fsm(failed)]
                Failed,
            }
        });
        assert!(out.contains(":: fsm_core :: Fsm for S"), "{out}");
        // As visible as the enum.
        assert!(out.contains("const MERMAID"), "{out}");
        assert!(!out.contains("pub const MERMAID"), "{out}");
        assert!(!out.contains("compile_error"), "{out}");
    }

    #[test]
    fn the_core_path_can_be_overridden() {
        let out = expand(quote! {
            #[fsm(resource = u8, crate = my::core)]
            enum S {
                #[fsm(initial, handler = h)]
                A,
                #[fsm(failed)]
                Failed,
            }
        });
        assert!(out.contains("impl my :: core :: Fsm for S"), "{out}");
        assert!(!out.contains("fsm_core"), "{out}");
    }

    #[test]
    fn structs_and_unions_are_refused() {
        let out = expand(quote! { struct S { a: u8 } });
        assert!(out.contains("compile_error"), "{out}");
        assert!(out.contains("applies to enums only"), "{out}");
        let out = expand(quote! { union U { a: u8 } });
        assert!(out.contains("applies to enums only"), "{out}");
    }

    #[test]
    fn errors_come_with_a_fallback_impl() {
        let out = expand(quote! {
            #[fsm(resource = u8, context = Ctx)]
            enum S {
                #[fsm(handler = h)]
                A,
            }
        });
        assert!(out.contains("compile_error"), "{out}");
        // The fallback keeps the declared types, so handler signatures
        // using `Step<'_, S>` add no errors of their own.
        assert!(out.contains("type Context = Ctx"), "{out}");
        assert!(out.contains("type Resource = u8"), "{out}");
    }

    #[test]
    fn syntax_errors_are_compile_errors() {
        let out = expand(quote! { enum });
        assert!(out.contains("compile_error"), "{out}");
    }
}
