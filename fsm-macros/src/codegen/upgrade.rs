//! `fn migrate`: the machine's `migrate = path` hook, called with the old
//! record.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use crate::model::Model;

/// `fn migrate`, when the machine names a hook; spanned on the hook's path,
/// so that a signature that does not fit is reported there.
pub fn migrate(model: &Model, core: &TokenStream) -> TokenStream {
    let Some(path) = &model.migrate else {
        return TokenStream::new();
    };
    let old = Ident::new("__fsm_old", Span::mixed_site());
    let output = quote! {
        ::core::result::Result<#core::Migrated<Self>, #core::MigrationError>
    };
    let call = quote_spanned!(path.span()=> #path(#old));
    quote! {
        fn migrate(#old: #core::OldRecord<'_>) -> #output {
            #call
        }
    }
}
