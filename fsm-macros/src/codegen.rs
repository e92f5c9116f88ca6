//! The generated code: the `Fsm` impl with its static metadata table, and an
//! inherent `MERMAID` constant whose rustdoc shows the state diagram.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use crate::diagram;
use crate::model::{Model, Policy, Shape, SpecChange, State};

/// The path of the core crate: `#[fsm(crate = ...)]`, else `fsm-core` under
/// whatever name the user's manifest gives it, else `fsm-kube`'s re-export,
/// else `::fsm_core`.
pub fn core_path(krate: Option<&syn::Path>) -> TokenStream {
    use proc_macro_crate::{FoundCrate, crate_name};

    if let Some(path) = krate {
        return quote!(#path);
    }
    let named = |name: &str| syn::parse_str::<Ident>(name).ok();
    match crate_name("fsm-core") {
        // Inside fsm-core only its tests and doctests use the derive; they
        // see the library as `fsm_core`.
        Ok(FoundCrate::Itself) => quote!(::fsm_core),
        Ok(FoundCrate::Name(name)) => match named(&name) {
            Some(ident) => quote!(::#ident),
            None => quote!(::fsm_core),
        },
        Err(_) => match crate_name("fsm-kube") {
            Ok(FoundCrate::Name(name)) => match named(&name) {
                Some(ident) => quote!(::#ident::fsm_core),
                None => quote!(::fsm_kube::fsm_core),
            },
            Ok(FoundCrate::Itself) => quote!(::fsm_kube::fsm_core),
            Err(_) => quote!(::fsm_core),
        },
    }
}

/// The whole expansion for a checked machine.
pub fn generate(model: &Model) -> TokenStream {
    let core = core_path(model.krate.as_ref());
    let ident = &model.ident;
    let vis = &model.vis;
    // Spanned on the types, so that a type that does not fit the trait's
    // bounds (or is private) is reported where it is named.
    let resource = &model.resource;
    let resource = quote_spanned!(resource.span()=> type Resource = #resource;);
    let context = match &model.context {
        Some(t) => quote_spanned!(t.span()=> type Context = #t;),
        None => quote!(
            type Context = ();
        ),
    };
    let error = match &model.error {
        Some(t) => quote_spanned!(t.span()=> type Error = #t;),
        None => quote!(
            type Error = ::core::convert::Infallible;
        ),
    };

    let machine = machine_table(model, &core);
    let state_name = state_name(model);
    let unit_state = unit_state(model);
    let initial_state = initial_state(model, &core);
    let handle = handle(model, &core);
    let compensate = compensate(model, &core);
    let cleanup = cleanup(model, &core);

    let doc = diagram::doc(model);
    let mermaid = diagram::mermaid(model);
    let impl_doc = format!(
        "`{ident}` is a state machine (`#[derive(OperatorFsm)]`).\n\n{doc}\n\
         A derive cannot change the enum's own documentation, so the diagram is shown here."
    );

    quote! {
        #[automatically_derived]
        impl #core::Fsm for #ident {
            #resource
            #context
            #error

            #machine
            #state_name
            #unit_state
            #initial_state
            #handle
            #compensate
            #cleanup
        }

        #[doc = #impl_doc]
        #[automatically_derived]
        impl #ident {
            /// The machine's state diagram in Mermaid, as drawn above; the
            /// same text as `Fsm::mermaid()`, available in `const` contexts.
            #vis const MERMAID: &'static str = #mermaid;
        }
    }
}

/// `fn machine()`: the static table built with the `const` builders.
fn machine_table(model: &Model, core: &TokenStream) -> TokenStream {
    let name = model.ident.to_string();
    let count = model.states.len();
    let states = model.states.iter().map(|s| state_meta(s, core));

    let mut options = Vec::new();
    if let Some(policy) = &model.retry {
        let policy = retry_policy(policy, core);
        options.push(quote!(.retry(#policy)));
    }
    if let Some(target) = &model.on_failure {
        let target = target.to_string();
        options.push(quote!(.on_failure(#target)));
    }
    match &model.on_spec_change {
        SpecChange::Restart => {}
        SpecChange::Continue => {
            options.push(quote!(.on_spec_change(#core::SpecChange::Continue)));
        }
        SpecChange::Goto(target) => {
            let target = target.to_string();
            options.push(quote!(.on_spec_change(#core::SpecChange::Goto(#target))));
        }
        SpecChange::CompensateAndRestart => {
            options.push(quote!(.on_spec_change(#core::SpecChange::CompensateAndRestart)));
        }
    }
    if model.snapshot_spec {
        options.push(quote!(.snapshot_spec()));
    }
    if model.cleanup.is_some() {
        options.push(quote!(.with_cleanup()));
    }
    if model.compensate_on_delete {
        options.push(quote!(.on_delete(#core::OnDelete::Compensate)));
    }

    quote! {
        fn machine() -> &'static #core::Machine {
            static STATES: [#core::StateMeta; #count] = [#(#states),*];
            static MACHINE: #core::Machine = #core::Machine::new(#name, &STATES) #(#options)*;
            &MACHINE
        }
    }
}

/// One `StateMeta` expression.
fn state_meta(s: &State, core: &TokenStream) -> TokenStream {
    let name = s.ident.to_string();
    let mut calls = Vec::new();
    let flags = [
        (s.initial, quote!(.initial())),
        (s.handler.is_some(), quote!(.with_handler())),
        (s.shape.has_data(), quote!(.with_data())),
        (s.compensate.is_some(), quote!(.with_compensation())),
        (s.ready, quote!(.ready())),
        (s.failed, quote!(.failed())),
        (s.is_final, quote!(.final_state())),
        (s.sensitive, quote!(.sensitive())),
    ];
    calls.extend(
        flags
            .into_iter()
            .filter(|(on, _)| *on)
            .map(|(_, call)| call),
    );
    if !s.next.is_empty() {
        let targets = s.next.iter().map(ToString::to_string);
        calls.push(quote!(.next(&[#(#targets),*])));
    }
    if let Some(policy) = &s.retry {
        let policy = retry_policy(policy, core);
        calls.push(quote!(.retry(#policy)));
    }
    if let Some(timeout) = s.timeout {
        let d = duration(timeout.millis);
        calls.push(quote!(.timeout(#d)));
    }
    if let Some(timeout) = s.attempt_timeout {
        let d = duration(timeout.millis);
        calls.push(quote!(.attempt_timeout(#d)));
    }
    if let Some(target) = &s.on_timeout {
        let target = target.to_string();
        calls.push(quote!(.on_timeout(#target)));
    }
    if let Some(target) = &s.on_exhausted {
        let target = target.to_string();
        calls.push(quote!(.on_exhausted(#target)));
    }
    if let Some(path) = &s.compensate {
        // Named for the diagrams (`.with_compensation()` above stays the
        // flag the engine reads).
        let function = diagram::path_name(path);
        calls.push(quote!(.compensated_by(#function)));
    }
    quote!(#core::StateMeta::new(#name) #(#calls)*)
}

/// A `Duration` in a const context.
fn duration(ms: u64) -> TokenStream {
    let ms = Literal::u64_suffixed(ms);
    quote!(::core::time::Duration::from_millis(#ms))
}

/// A `RetryPolicy` in a const context. The analysis has validated it, so the
/// `Err` arm cannot be taken.
fn retry_policy(p: &Policy, core: &TokenStream) -> TokenStream {
    let attempts = Literal::u32_suffixed(p.max_attempts);
    let initial = duration(p.initial_ms);
    let max = duration(p.max_ms);
    let factor = if p.factor.is_finite() {
        Literal::f64_suffixed(p.factor)
    } else {
        Literal::f64_suffixed(1.0)
    };
    let jitter = if p.jitter {
        quote!(#core::Jitter::Full)
    } else {
        quote!(#core::Jitter::None)
    };
    quote! {
        match #core::RetryPolicy::new(#attempts, #initial, #factor, #max) {
            ::core::result::Result::Ok(policy) => policy.with_jitter(#jitter),
            ::core::result::Result::Err(_) => {
                ::core::panic!("#[derive(OperatorFsm)] checked this retry policy")
            }
        }
    }
}

/// The pattern that matches a variant without binding anything.
fn ignore_pattern(s: &State) -> TokenStream {
    let v = &s.ident;
    match s.shape {
        Shape::Unit => quote!(Self::#v),
        Shape::Named(_) => quote!(Self::#v { .. }),
        Shape::Unnamed(_) => quote!(Self::#v(..)),
    }
}

/// The pattern that binds a variant's fields by reference, and the bindings
/// in declaration order, located at `at` (the function they are passed to)
/// but resolved hygienically.
fn binding_pattern(s: &State, at: Span) -> (TokenStream, Vec<Ident>) {
    let v = &s.ident;
    let bind = |i: usize| Ident::new(&format!("__fsm_field_{i}"), Span::mixed_site());
    let used = |i: usize| {
        Ident::new(
            &format!("__fsm_field_{i}"),
            Span::mixed_site().located_at(at),
        )
    };
    match &s.shape {
        Shape::Unit => (quote!(Self::#v), Vec::new()),
        Shape::Named(fields) => {
            let binds = (0..fields.len()).map(bind);
            (
                quote!(Self::#v { #(#fields: #binds),* }),
                (0..fields.len()).map(used).collect(),
            )
        }
        Shape::Unnamed(n) => {
            let binds = (0..*n).map(bind);
            (quote!(Self::#v(#(#binds),*)), (0..*n).map(used).collect())
        }
    }
}

/// `fn state_name`.
fn state_name(model: &Model) -> TokenStream {
    let arms = model.states.iter().map(|s| {
        let pattern = ignore_pattern(s);
        let name = s.ident.to_string();
        quote!(#pattern => #name)
    });
    quote! {
        fn state_name(&self) -> &'static str {
            match self {
                #(#arms,)*
            }
        }
    }
}

/// `fn unit_state`.
fn unit_state(model: &Model) -> TokenStream {
    let arms = model
        .states
        .iter()
        .filter(|s| matches!(s.shape, Shape::Unit))
        .map(|s| {
            let v = &s.ident;
            let name = s.ident.to_string();
            quote!(#name => ::core::option::Option::Some(Self::#v))
        });
    quote! {
        fn unit_state(name: &str) -> ::core::option::Option<Self> {
            match name {
                #(#arms,)*
                _ => ::core::option::Option::None,
            }
        }
    }
}

/// `fn initial_state`, when the initial state carries data: every field
/// starts as its `Default`, asked for through `InitialField` spanned on the
/// field's type, so that a type without `Default` is reported there.
fn initial_state(model: &Model, core: &TokenStream) -> TokenStream {
    let Some(initial) = model.states.iter().find(|s| s.initial) else {
        return TokenStream::new();
    };
    let v = &initial.ident;
    let value = |ty: &syn::Type| quote_spanned!(ty.span()=> <#ty as #core::__private::InitialField>::initial());
    let built = match &initial.shape {
        Shape::Unit => return TokenStream::new(),
        Shape::Named(fields) => {
            let values = initial.field_types.iter().map(value);
            quote!(Self::#v { #(#fields: #values),* })
        }
        Shape::Unnamed(_) => {
            let values = initial.field_types.iter().map(value);
            quote!(Self::#v(#(#values),*))
        }
    };
    quote! {
        fn initial_state() -> ::core::option::Option<Self> {
            ::core::option::Option::Some(#built)
        }
    }
}

/// The most fields a variant may have for the first-argument check of its
/// functions (`fsm_core::__derive::TakesStepMut` has impls up to it).
const MAX_CHECKED_FIELDS: usize = 12;

/// A call of a user function (handler, compensation or cleanup) with the
/// step and the variant's fields, boxed into the trait's future type (the
/// match arm is coerced to the function's return type). Spanned on the
/// function's path, so that a signature that does not fit is reported
/// there.
///
/// The function is first checked to take `&mut Step<'_, Self>`: one taking
/// `&Step` would otherwise accept the step by reborrow and be reported only
/// as a future that is not `Send` (as `Step` is not `Sync`). The path is
/// named once, bound to a local, so that a path that does not resolve is
/// one error.
fn call(path: &syn::Path, cx: &Ident, fields: &[Ident], core: &TokenStream) -> TokenStream {
    let span = path.span();
    let cx = Ident::new(&cx.to_string(), Span::mixed_site().located_at(span));
    let function = Ident::new("__fsm_function", Span::mixed_site().located_at(span));
    let check = if fields.len() <= MAX_CHECKED_FIELDS {
        quote_spanned!(span=> #core::__derive::takes_step_mut::<Self, _, _>(&#function);)
    } else {
        TokenStream::new()
    };
    quote_spanned! {span=>
        {
            let #function = #path;
            #check
            ::std::boxed::Box::pin(#function(#cx #(, #fields)*))
        }
    }
}

/// The machine's error type, as the dispatch methods name it: the declared
/// type itself rather than `<Self as Fsm>::Error`, whose well-formedness
/// would repeat every error of a supertrait the enum lacks (a missing serde
/// derive) on the derive.
fn error_type(model: &Model) -> TokenStream {
    match &model.error {
        Some(t) => quote!(#t),
        None => quote!(::core::convert::Infallible),
    }
}

/// `fn handle`.
fn handle(model: &Model, core: &TokenStream) -> TokenStream {
    let cx = Ident::new("__fsm_cx", Span::mixed_site());
    let error = error_type(model);
    let output = quote! {
        ::core::result::Result<#core::Transition<Self>, #error>
    };
    let arms = model.states.iter().map(|s| match &s.handler {
        Some(handler) => {
            let (pattern, fields) = binding_pattern(s, handler.span());
            let call = call(handler, &cx, &fields, core);
            quote!(#pattern => #call)
        }
        None => {
            // Resting states: the engine never runs a handler there.
            let pattern = ignore_pattern(s);
            quote! {
                #pattern => ::std::boxed::Box::pin(async {
                    ::core::result::Result::Ok(#core::Transition::Stay)
                })
            }
        }
    });
    quote! {
        fn handle<'a>(
            &'a self,
            #cx: &'a mut #core::Step<'_, Self>,
        ) -> #core::BoxFuture<'a, #output> {
            match self {
                #(#arms,)*
            }
        }
    }
}

/// `fn compensate`, when a state has one.
fn compensate(model: &Model, core: &TokenStream) -> TokenStream {
    if model.states.iter().all(|s| s.compensate.is_none()) {
        return TokenStream::new();
    }
    let cx = Ident::new("__fsm_cx", Span::mixed_site());
    let error = error_type(model);
    let output = quote!(::core::result::Result<(), #error>);
    let mut arms: Vec<TokenStream> = model
        .states
        .iter()
        .filter_map(|s| {
            let path = s.compensate.as_ref()?;
            let (pattern, fields) = binding_pattern(s, path.span());
            let call = call(path, &cx, &fields, core);
            Some(quote!(#pattern => #call))
        })
        .collect();
    if arms.len() < model.states.len() {
        arms.push(quote! {
            _ => ::std::boxed::Box::pin(async { ::core::result::Result::Ok(()) })
        });
    }
    quote! {
        fn compensate<'a>(
            &'a self,
            #cx: &'a mut #core::Step<'_, Self>,
        ) -> #core::BoxFuture<'a, #output> {
            match self {
                #(#arms,)*
            }
        }
    }
}

/// `fn cleanup`, when the machine has one.
fn cleanup(model: &Model, core: &TokenStream) -> TokenStream {
    let Some(path) = &model.cleanup else {
        return TokenStream::new();
    };
    let cx = Ident::new("__fsm_cx", Span::mixed_site());
    let error = error_type(model);
    let output = quote!(::core::result::Result<(), #error>);
    // The state goes in as `self`, the second argument.
    let state = Ident::new("self", path.span());
    let call = call(path, &cx, std::slice::from_ref(&state), core);
    quote! {
        fn cleanup<'a>(
            &'a #state,
            #cx: &'a mut #core::Step<'_, Self>,
        ) -> #core::BoxFuture<'a, #output> {
            #call
        }
    }
}

/// The `Fsm` impl emitted next to the errors when the derive refuses the
/// enum, so that code using the enum as a machine (handler signatures with
/// `Step<'_, S>`) does not add a cascade of "not a state machine" errors to
/// the real ones. Its bodies are never run: the crate does not compile.
///
/// The associated types are read leniently from the attributes; nothing is
/// emitted for generic enums or non-enums.
pub fn fallback(input: &syn::DeriveInput) -> TokenStream {
    if !matches!(input.data, syn::Data::Enum(_))
        || !input.generics.params.is_empty()
        || input.generics.where_clause.is_some()
    {
        return TokenStream::new();
    }
    let mut resource = quote!(());
    let mut context = quote!(());
    let mut error = quote!(::core::convert::Infallible);
    let mut krate = None;
    for (key, value) in enum_level_values(&input.attrs) {
        let Ok(tokens) = syn::parse2::<syn::Type>(value.clone()).map(|t| quote!(#t)) else {
            if key == "crate" {
                krate = syn::parse2::<syn::Path>(value).ok();
            }
            continue;
        };
        match key.as_str() {
            "resource" => resource = tokens,
            "context" => context = tokens,
            "error" => error = tokens,
            "crate" => krate = syn::parse2::<syn::Path>(value).ok(),
            _ => {}
        }
    }
    let core = core_path(krate.as_ref());
    let ident = &input.ident;
    quote! {
        #[automatically_derived]
        impl #core::Fsm for #ident {
            type Resource = #resource;
            type Context = #context;
            type Error = #error;
            fn machine() -> &'static #core::Machine {
                ::core::unreachable!()
            }
            fn state_name(&self) -> &'static str {
                ::core::unreachable!()
            }
            fn unit_state(_: &str) -> ::core::option::Option<Self> {
                ::core::unreachable!()
            }
            fn handle<'a>(
                &'a self,
                _: &'a mut #core::Step<'_, Self>,
            ) -> #core::BoxFuture<
                'a,
                ::core::result::Result<#core::Transition<Self>, <Self as #core::Fsm>::Error>,
            > {
                ::core::unreachable!()
            }
        }
    }
}

/// The `key = value` pairs of the enum's `#[fsm(...)]` attributes, values
/// as tokens; whatever does not parse is skipped.
fn enum_level_values(attrs: &[syn::Attribute]) -> Vec<(String, TokenStream)> {
    use darling::ast::NestedMeta;

    let mut out = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("fsm")) {
        let syn::Meta::List(list) = &attr.meta else {
            continue;
        };
        let Ok(items) = NestedMeta::parse_meta_list(list.tokens.clone()) else {
            continue;
        };
        for item in items {
            let (path, value) = match item {
                NestedMeta::Meta(syn::Meta::NameValue(nv)) => {
                    let value = &nv.value;
                    (nv.path.clone(), quote!(#value))
                }
                NestedMeta::NameValueInvalidExpr(nv) => (nv.path, nv.value),
                _ => continue,
            };
            if let Some(key) = path.get_ident() {
                out.push((key.to_string(), value));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(ms: u64) -> Policy {
        Policy {
            initial_ms: ms,
            ..Policy::DEFAULT
        }
    }

    #[test]
    fn durations_and_policies_are_const_expressions() {
        assert_eq!(
            duration(1_500).to_string(),
            ":: core :: time :: Duration :: from_millis (1500u64)"
        );
        let core = quote!(::fsm_core);
        let policy = retry_policy(
            &Policy {
                jitter: true,
                ..p(250)
            },
            &core,
        )
        .to_string();
        assert!(policy.contains("RetryPolicy :: new (5u32"), "{policy}");
        assert!(policy.contains("from_millis (250u64)"), "{policy}");
        assert!(policy.contains("2f64"), "{policy}");
        assert!(policy.contains("Jitter :: Full"), "{policy}");
    }

    #[test]
    fn the_default_core_path_is_fsm_core() {
        // This crate's manifest has fsm-core as a dev-dependency.
        assert_eq!(core_path(None).to_string(), ":: fsm_core");
        let custom: syn::Path = syn::parse_quote!(crate::engine);
        assert_eq!(core_path(Some(&custom)).to_string(), "crate :: engine");
    }

    #[test]
    fn the_fallback_reads_types_leniently() {
        let input: syn::DeriveInput = syn::parse_quote! {
            #[fsm(resource = Db, error = AppError, context = Arc<Ctx>, timout = "1s")]
            #[fsm(crate = other::core, next(nonsense =))]
            enum S { A }
        };
        let out = fallback(&input).to_string();
        assert!(out.contains("impl other :: core :: Fsm for S"), "{out}");
        assert!(out.contains("type Resource = Db"), "{out}");
        assert!(out.contains("type Error = AppError"), "{out}");
        assert!(out.contains("type Context = Arc < Ctx >"), "{out}");
    }
}
