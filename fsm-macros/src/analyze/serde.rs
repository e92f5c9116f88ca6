//! The serde attributes a derived machine cannot have: those that change
//! the encoding the default `Fsm::to_parts`/`from_parts` rely on (a state
//! is stored as its variant's name, with serde's default, externally
//! tagged, representation).

use darling::ast::NestedMeta;

use super::checker::Checker;

/// Enum-level serde keys that change how a state is encoded.
pub const ENUM_KEYS: &[&str] = &[
    "rename_all",
    "tag",
    "content",
    "untagged",
    "variant_identifier",
];

/// Variant-level serde keys that change how a state is encoded.
pub const VARIANT_KEYS: &[&str] = &[
    "rename",
    "untagged",
    "other",
    "skip",
    "skip_serializing",
    "skip_deserializing",
];

impl Checker<'_> {
    /// Refuses the `keys` in the `#[serde(...)]` among `attrs`.
    pub fn serde_encoding(&mut self, attrs: &[syn::Attribute], keys: &[&str]) {
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
                    self.error(
                        key.span(),
                        format!(
                            "#[derive(OperatorFsm)] stores a state as its variant's name with \
                             serde's default representation; `serde({key})` changes that \
                             encoding. Remove it, or implement `Fsm` by hand with your own \
                             `to_parts`/`from_parts`"
                        ),
                    );
                }
            }
        }
    }
}
