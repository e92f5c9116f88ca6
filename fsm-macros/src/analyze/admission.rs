//! Admission rules: `immutable("spec.engine")`, `grow_only("spec.storageGi")`
//! and `refuse_delete` on a state. Each path names a field of the object
//! the operator's admission webhook guards: dotted JSON names under `spec`
//! or `metadata`, each once per state, none both immutable and grow-only.

use syn::LitStr;

use super::checker::Checker;
use crate::parse::VariantInput;

/// The top-level fields a rule may guard: what users write. `status` is
/// the operator's own, and `.status.fsm` is guarded for every state.
const GUARDED_ROOTS: [&str; 2] = ["spec", "metadata"];

impl Checker<'_> {
    /// The immutable and grow-only paths of `v`, checked.
    pub fn admission_fields(&mut self, v: &VariantInput) -> (Vec<String>, Vec<String>) {
        let mut immutable: Vec<String> = Vec::new();
        for path in v.immutable.iter().flat_map(|p| &p.0) {
            if self.field_path(path, "immutable") && !self.once(path, &immutable, "immutable") {
                immutable.push(path.value());
            }
        }
        let mut grow_only: Vec<String> = Vec::new();
        for path in v.grow_only.iter().flat_map(|p| &p.0) {
            if !self.field_path(path, "grow_only") || self.once(path, &grow_only, "grow_only") {
                continue;
            }
            if immutable.contains(&path.value()) {
                self.error(
                    path.span(),
                    format!(
                        "`{}` is already `immutable` in `{}`: an immutable field cannot grow \
                         either; keep one of the two",
                        path.value(),
                        v.ident
                    ),
                );
                continue;
            }
            grow_only.push(path.value());
        }
        (immutable, grow_only)
    }

    /// Whether `path` is a dotted field path under `spec` or `metadata`;
    /// an error on it if not.
    fn field_path(&mut self, path: &LitStr, key: &str) -> bool {
        let value = path.value();
        let segments: Vec<&str> = value.split('.').collect();
        let malformed = segments.iter().any(|segment| {
            segment.is_empty()
                || !segment
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '/'))
        });
        if value.is_empty() || malformed {
            self.error(
                path.span(),
                format!(
                    "`{key}(\"{value}\")` is not a field path: write the JSON names from the \
                     object's top, separated by dots, e.g. `{key}(\"spec.storageGi\")`"
                ),
            );
            return false;
        }
        if segments.len() < 2 || !GUARDED_ROOTS.contains(&segments[0]) {
            let why = if segments[0] == "status" {
                "the status is the operator's to write (and `.status.fsm` is guarded in \
                 every state)"
                    .to_owned()
            } else if segments.len() < 2 && GUARDED_ROOTS.contains(&segments[0]) {
                format!("name a field inside `{}`", segments[0])
            } else {
                format!("`{}` is not a field users write", segments[0])
            };
            self.error(
                path.span(),
                format!(
                    "`{key}(\"{value}\")`: a rule guards a field under `spec` or `metadata`; {why}"
                ),
            );
            return false;
        }
        true
    }

    /// Whether `path` is already in `seen`; an error on it if so.
    fn once(&mut self, path: &LitStr, seen: &[String], key: &str) -> bool {
        let value = path.value();
        if seen.contains(&value) {
            self.error(
                path.span(),
                format!("`{value}` is named twice in `{key}(...)`: keep one"),
            );
            return true;
        }
        false
    }
}
