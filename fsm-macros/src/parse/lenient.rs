//! The types the enum declares, read leniently: when the derive refuses the
//! enum, the fallback impl still names them, so that code using the enum
//! as a machine adds no errors of its own. Whatever does not read is left
//! out, with no error (darling reports it).

use darling::ast::NestedMeta;
use proc_macro2::TokenStream;
use quote::quote;

use crate::model::Fallback;

/// The enum's declared types, or `None` when no fallback impl can be
/// written for the input (a generic enum, a struct, a union).
pub fn fallback(input: &syn::DeriveInput) -> Option<Fallback> {
    if !matches!(input.data, syn::Data::Enum(_))
        || !input.generics.params.is_empty()
        || input.generics.where_clause.is_some()
    {
        return None;
    }
    let mut declared = Fallback {
        ident: input.ident.clone(),
        resource: None,
        context: None,
        error: None,
        krate: None,
    };
    // A key given twice: the last value that reads wins.
    for (key, value) in enum_level_values(&input.attrs) {
        let slot = match key.as_str() {
            "resource" => &mut declared.resource,
            "context" => &mut declared.context,
            "error" => &mut declared.error,
            "crate" => {
                declared.krate = syn::parse2::<syn::Path>(value).ok();
                continue;
            }
            _ => continue,
        };
        if let Ok(ty) = syn::parse2::<syn::Type>(value) {
            *slot = Some(ty);
        }
    }
    Some(declared)
}

/// The `key = value` pairs of the enum's `#[fsm(...)]` attributes, values
/// as tokens; whatever does not parse is skipped.
fn enum_level_values(attrs: &[syn::Attribute]) -> Vec<(String, TokenStream)> {
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
    use quote::ToTokens;

    use super::*;

    fn text(tokens: Option<&impl ToTokens>) -> Option<String> {
        tokens.map(|t| t.to_token_stream().to_string())
    }

    #[test]
    fn types_are_read_leniently() {
        let input: syn::DeriveInput = syn::parse_quote! {
            #[fsm(resource = Db, error = AppError, context = Arc<Ctx>, timout = "1s")]
            #[fsm(crate = other::core, next(nonsense =))]
            enum S { A }
        };
        let Some(declared) = fallback(&input) else {
            panic!("an enum has a fallback");
        };
        assert_eq!(declared.ident, "S");
        assert_eq!(text(declared.resource.as_ref()).as_deref(), Some("Db"));
        assert_eq!(text(declared.error.as_ref()).as_deref(), Some("AppError"));
        assert_eq!(
            text(declared.context.as_ref()).as_deref(),
            Some("Arc < Ctx >")
        );
        assert_eq!(
            text(declared.krate.as_ref()).as_deref(),
            Some("other :: core")
        );
    }

    #[test]
    fn what_does_not_read_is_left_out() {
        let input: syn::DeriveInput = syn::parse_quote! {
            #[fsm(resource = Db, context = "not a type", error)]
            #[fsm(resource = 1 +)]
            enum S { A }
        };
        let declared = fallback(&input);
        assert_eq!(
            declared
                .as_ref()
                .and_then(|d| text(d.resource.as_ref()))
                .as_deref(),
            Some("Db")
        );
        assert!(declared.is_some_and(|d| d.context.is_none() && d.error.is_none()));
    }

    #[test]
    fn generic_enums_have_no_fallback() {
        let input: syn::DeriveInput = syn::parse_quote! {
            #[fsm(resource = Db)]
            enum S<T> { A(T) }
        };
        assert!(fallback(&input).is_none());
        let input: syn::DeriveInput = syn::parse_quote!(
            struct S;
        );
        assert!(fallback(&input).is_none());
    }
}
