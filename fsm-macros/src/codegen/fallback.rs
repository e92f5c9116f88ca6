//! The `Fsm` impl emitted next to the errors when the derive refuses the
//! enum, so that code using the enum as a machine (handler signatures with
//! `Step<'_, S>`) does not add a cascade of "not a state machine" errors to
//! the real ones.

use proc_macro2::TokenStream;
use quote::quote;

use super::core_path;
use crate::model::Fallback;

/// The fallback impl: the declared types (`()`, `()` and `Infallible` where
/// a type is missing or unreadable) and bodies that are never run, as the
/// crate does not compile.
pub fn fallback(declared: &Fallback) -> TokenStream {
    let resource = match &declared.resource {
        Some(t) => quote!(#t),
        None => quote!(()),
    };
    let context = match &declared.context {
        Some(t) => quote!(#t),
        None => quote!(()),
    };
    let error = match &declared.error {
        Some(t) => quote!(#t),
        None => quote!(::core::convert::Infallible),
    };
    let core = core_path(declared.krate.as_ref());
    let ident = &declared.ident;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fallback_declares_the_types_it_is_given() {
        let declared = Fallback {
            ident: syn::parse_quote!(S),
            resource: Some(syn::parse_quote!(Db)),
            context: None,
            error: Some(syn::parse_quote!(AppError)),
            krate: Some(syn::parse_quote!(other::core)),
        };
        let out = fallback(&declared).to_string();
        assert!(out.contains("impl other :: core :: Fsm for S"), "{out}");
        assert!(out.contains("type Resource = Db"), "{out}");
        assert!(out.contains("type Context = ()"), "{out}");
        assert!(out.contains("type Error = AppError"), "{out}");
    }
}
