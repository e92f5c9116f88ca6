//! The rules of upgrades: the machine's `version`, its `migrate` hook, and
//! the states' former names (`renamed_from`), each used once.

use darling::util::SpannedValue;
use syn::spanned::Spanned;

use super::checker::Checker;

impl Checker<'_> {
    /// `version = N` is at least 1; `None` when not given (version 1).
    pub fn version(&mut self, version: Option<&SpannedValue<u32>>) -> Option<u32> {
        let version = version?;
        if **version == 0 {
            self.error(
                version.span(),
                "machine versions start at 1 (records written before machines had versions \
                 are version 1): write `version = 2` or more for a new build",
            );
            return None;
        }
        Some(**version)
    }

    /// A `migrate` hook is asked about records older than the machine's
    /// version, so it needs a version above 1.
    pub fn migrate(&mut self, migrate: Option<&syn::Path>, version: Option<u32>) {
        if let Some(path) = migrate
            && version.is_none_or(|v| v < 2)
        {
            self.error(
                path.span(),
                "`migrate` is only asked about records written by an older machine version, and \
                 this machine is version 1: raise it with #[fsm(version = 2)] in the build that \
                 changes what its records mean",
            );
        }
    }

    /// Every `renamed_from` names no current variant and no other former
    /// name: a stored name must lead to one state.
    pub fn former_names(&mut self) {
        let variants = self.variants;
        let mut seen: Vec<(String, &syn::Ident)> = Vec::new();
        for v in variants {
            for old in &v.renamed_from {
                let name = old.value();
                if let Some(current) = variants.iter().find(|o| o.ident == name) {
                    let message = if current.ident == v.ident {
                        format!(
                            "`{name}` is this state's own name; `renamed_from` takes the names it had before"
                        )
                    } else {
                        format!(
                            "`{name}` is the name of a state of `{}`, so records naming it load as that \
                             state: a former name must be no current state's name",
                            self.machine
                        )
                    };
                    self.error(old.span(), message);
                } else if let Some((_, first)) = seen.iter().find(|(n, _)| *n == name) {
                    let message = if **first == v.ident {
                        format!("`{name}` is already a former name of this state")
                    } else {
                        format!(
                            "`{name}` is already a former name of `{first}`: records naming it \
                             must load as one state"
                        )
                    };
                    self.error(old.span(), message);
                } else if name.is_empty() {
                    self.error(old.span(), "a former name cannot be empty");
                } else {
                    seen.push((name, &v.ident));
                }
            }
        }
    }
}
