//! Signals: `on_signal(approve = Serving)` on a state that waits for a
//! person. Each signal is named once per state, each target is a known
//! unit state (the engine enters it with no data), and a resting state
//! takes none: it runs nothing that could wait.

use syn::Ident;

use super::checker::Checker;
use crate::parse::VariantInput;

impl Checker<'_> {
    /// The signals of `v`, checked; `resting` says whether the machine
    /// rests in `v`.
    pub fn signals(&mut self, v: &VariantInput, resting: bool) -> Vec<(Ident, Ident)> {
        let Some(declared) = &v.on_signal else {
            return Vec::new();
        };
        let name = &v.ident;
        let mut signals: Vec<(Ident, Ident)> = Vec::new();
        for (signal, target) in &declared.0 {
            if resting {
                self.error(
                    signal.span(),
                    format!(
                        "`{name}` is `final` or `failed`: the machine rests there and takes no \
                         signal; declare `{signal}` on the state that waits for it"
                    ),
                );
            }
            if signals.iter().any(|(s, _)| s == signal) {
                let message = format!(
                    "signal `{signal}` is declared twice on `{name}`: a signal moves to one \
                     state; keep one"
                );
                self.error(signal.span(), message);
                continue;
            }
            self.engine_target(target, "`on_signal`", "the target of a signal");
            signals.push((signal.clone(), target.clone()));
        }
        signals
    }
}
