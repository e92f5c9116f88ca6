//! The generated code: the `Fsm` impl with its static metadata table, and an
//! inherent `MERMAID` constant whose rustdoc shows the state diagram. It
//! reads the [`Model`] alone, never the attributes.
//!
//! One file per part of the impl: `table` (`fn machine()`), `dispatch`
//! (the methods that match on the state and call the user's functions),
//! `fallback` (the impl emitted next to the errors of a refused enum).

mod dispatch;
mod fallback;
mod table;

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use crate::diagram;
use crate::model::Model;

pub use fallback::fallback;

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

    let machine = table::machine(model, &core);
    let state_name = dispatch::state_name(model);
    let unit_state = dispatch::unit_state(model);
    let initial_state = dispatch::initial_state(model, &core);
    let handle = dispatch::handle(model, &core);
    let compensate = dispatch::compensate(model, &core);
    let cleanup = dispatch::cleanup(model, &core);

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_core_path_is_fsm_core() {
        // This crate's manifest has fsm-core as a dev-dependency.
        assert_eq!(core_path(None).to_string(), ":: fsm_core");
        let custom: syn::Path = syn::parse_quote!(crate::engine);
        assert_eq!(core_path(Some(&custom)).to_string(), "crate :: engine");
    }
}
