//! The saga's scope: `commits` on a state closes it on entry, as `ready`
//! and `final` states do. A `commits` that would change nothing is refused,
//! on its token, saying why.

use super::checker::Checker;
use crate::parse::VariantInput;

impl Checker<'_> {
    /// `commits` on `v`: refused where it changes nothing, on its token.
    pub fn commits_flag(&mut self, v: &VariantInput) {
        if !v.commits.is_present() {
            return;
        }
        let name = &v.ident;
        let already = [
            (v.ready.is_present(), "ready"),
            (v.is_final.is_present(), "final"),
        ]
        .into_iter()
        .find_map(|(on, flag)| on.then_some(flag));
        if let Some(flag) = already {
            self.error(
                v.commits.span(),
                format!(
                    "`commits` on `{name}` has no effect: entering a `{flag}` state closes the \
                     saga's scope already; remove it"
                ),
            );
        } else if v.failed.is_present() {
            self.error(
                v.commits.span(),
                format!(
                    "`commits` on `{name}` makes no sense: a `failed` state is entered after a \
                     failure has undone the open scope, so there is nothing left to make final; \
                     remove it"
                ),
            );
        }
    }
}
