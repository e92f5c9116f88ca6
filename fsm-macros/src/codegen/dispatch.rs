//! The methods of the impl that match on the state: its name, the unit
//! states by name, the initial state with data, and the calls of the
//! user's handlers (or the handler a `converge` state generates),
//! compensations and cleanup.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use crate::model::{Handler, Model, Shape, State};

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
pub fn state_name(model: &Model) -> TokenStream {
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
pub fn unit_state(model: &Model) -> TokenStream {
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

/// The state `s` built with every field's starting value, `value(type)`:
/// a call of a hidden trait implemented for every `Default` type, spanned
/// on the field's type so that a type without `Default` is reported there.
fn with_starting_fields(s: &State, value: impl Fn(&syn::Type) -> TokenStream) -> TokenStream {
    let v = &s.ident;
    let values = s.field_types.iter().map(value);
    match &s.shape {
        Shape::Unit => quote!(Self::#v),
        Shape::Named(fields) => quote!(Self::#v { #(#fields: #values),* }),
        Shape::Unnamed(_) => quote!(Self::#v(#(#values),*)),
    }
}

/// `fn initial_state`, when the initial state carries data: every field
/// starts as its `Default`, asked for through `InitialField`.
pub fn initial_state(model: &Model, core: &TokenStream) -> TokenStream {
    let Some(initial) = model.states.iter().find(|s| s.initial) else {
        return TokenStream::new();
    };
    if !initial.shape.has_data() {
        return TokenStream::new();
    }
    let built = with_starting_fields(
        initial,
        |ty| quote_spanned!(ty.span()=> <#ty as #core::__private::InitialField>::initial()),
    );
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

/// The handler of a `converge` state: calls `desired` with the step and
/// the variant's fields for a value implementing `Converge<Self>`, and
/// returns what it answers with `next` (built with its fields'
/// `Default`, asked for through `ConvergeTargetField`). Spanned on
/// `desired`'s path, so that a function that does not fit, an error that
/// does not convert, or a value that does not converge is reported there.
///
/// The step goes in as `&mut *cx`, so that `desired` may take `&Step` (it
/// coerces) or `&mut Step`. `desired` may be a plain fn returning a
/// `Result` or an `async fn` (its future awaited): which one is decided
/// by the type it returns (`fsm_core::__derive::DesiredNow`, then
/// `DesiredLater`, whose future must be `Send` and give a `Result`).
fn converge_call(
    model: &Model,
    desired: &syn::Path,
    next: &Ident,
    cx: &Ident,
    fields: &[Ident],
    core: &TokenStream,
) -> TokenStream {
    let span = desired.span();
    let located = |name: &str| Ident::new(name, Span::mixed_site().located_at(span));
    let cx = located(&cx.to_string());
    let function = located("__fsm_desired");
    let value = located("__fsm_value");
    let target = match model.states.iter().find(|s| s.ident == *next) {
        Some(target) => with_starting_fields(
            target,
            |ty| quote_spanned!(ty.span()=> <#ty as #core::__derive::ConvergeTargetField>::starting()),
        ),
        // The analysis has refused an unknown target.
        None => quote!(Self::#next),
    };
    let returned = located("__fsm_returned");
    quote_spanned! {span=>
        {
            let #function = #desired;
            ::std::boxed::Box::pin(async move {
                let #returned = #function(&mut *#cx #(, #fields)*);
                let #value = {
                    #[allow(unused_imports)]
                    use #core::__derive::{DesiredLater as _, DesiredNow as _};
                    (&#returned).__fsm_desired_kind()
                }
                .desired(#returned)
                .await?;
                #core::Converge::<Self>::converge_state(&#value, #cx, #target).await
            })
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
pub fn handle(model: &Model, core: &TokenStream) -> TokenStream {
    let cx = Ident::new("__fsm_cx", Span::mixed_site());
    let error = error_type(model);
    let output = quote! {
        ::core::result::Result<#core::Transition<Self>, #error>
    };
    let arms = model.states.iter().map(|s| match &s.handler {
        Some(Handler::Function(handler)) => {
            let (pattern, fields) = binding_pattern(s, handler.span());
            let call = call(handler, &cx, &fields, core);
            quote!(#pattern => #call)
        }
        Some(Handler::Converge { desired, next }) => {
            let (pattern, fields) = binding_pattern(s, desired.span());
            let call = converge_call(model, desired, next, &cx, &fields, core);
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
pub fn compensate(model: &Model, core: &TokenStream) -> TokenStream {
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
pub fn cleanup(model: &Model, core: &TokenStream) -> TokenStream {
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
