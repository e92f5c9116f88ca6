//! The rules of batched commits: `batch_commits` on the enum, and on a
//! state `batch_entry` (opt in without the enum) or `commit_on_entry` (opt
//! out under it). Each key must change what the engine does: one that
//! would be ignored is refused, on its token, saying why.

use darling::util::Flag;

use super::checker::Checker;
use crate::parse::VariantInput;

impl Checker<'_> {
    /// `batch_entry` and `commit_on_entry` on `v`, given the enum's
    /// `batch_commits`.
    pub fn entry_commit(&mut self, v: &VariantInput, batch_commits: bool) {
        let name = &v.ident;
        let keys = [
            (&v.batch_entry, "batch_entry"),
            (&v.commit_on_entry, "commit_on_entry"),
        ];
        let given: Vec<(&Flag, &str)> = keys.into_iter().filter(|(f, _)| f.is_present()).collect();
        let Some(&(first, first_key)) = given.first() else {
            return;
        };
        if let Some(&(second, second_key)) = given.get(1) {
            self.error(
                second.span(),
                format!(
                    "`{name}` has both `{first_key}` and `{second_key}`: a state's entry is \
                     batched with the next commit or committed on its own, not both; keep one"
                ),
            );
            return;
        }
        if v.failed.is_present() || v.is_final.is_present() {
            let flag = if v.failed.is_present() {
                "failed"
            } else {
                "final"
            };
            self.error(
                first.span(),
                format!(
                    "`{first_key}` on `{name}` has no effect: the machine rests in a `{flag}` \
                     state, so entering it ends the chain and is committed at once; remove it"
                ),
            );
            return;
        }
        if v.compensate.is_some() {
            let message = if first_key == "batch_entry" {
                format!(
                    "`{name}` has a compensation, so its entry is always committed before its \
                     handler runs (a crash must not leave it off the compensation trail); \
                     remove `batch_entry`"
                )
            } else {
                format!(
                    "`commit_on_entry` on `{name}` has no effect: a state with a compensation \
                     always commits its entry before its handler runs; remove it"
                )
            };
            self.error(first.span(), message);
            return;
        }
        match (first_key, batch_commits) {
            ("batch_entry", true) => self.error(
                first.span(),
                format!(
                    "`batch_entry` on `{name}` has no effect: `{}` has `batch_commits`, which \
                     batches the entry of every state; remove it (or mark the states that must \
                     commit first `commit_on_entry`)",
                    self.machine
                ),
            ),
            ("commit_on_entry", false) => self.error(
                first.span(),
                format!(
                    "`commit_on_entry` on `{name}` has no effect: `{}` does not batch commits, \
                     so every transition is committed before the next handler runs; add \
                     #[fsm(batch_commits)] to the enum, or remove it",
                    self.machine
                ),
            ),
            _ => {}
        }
    }
}
