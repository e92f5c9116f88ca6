//! The resolved machine, what code generation and the diagram read: every
//! attribute value validated, defaulted where the grammar has a default,
//! and kept with the span the generated code points errors at. Built by
//! [`crate::analyze`]; nothing downstream reads an attribute.

use syn::Ident;

use crate::duration::DurationLit;

/// The checked machine.
#[derive(Debug, Clone)]
pub struct Model {
    /// The enum.
    pub ident: Ident,
    /// The enum's visibility, given to the generated inherent items.
    pub vis: syn::Visibility,
    /// `resource = T`.
    pub resource: syn::Type,
    /// `context = T`; `()` when absent.
    pub context: Option<syn::Type>,
    /// `error = T`; `Infallible` when absent.
    pub error: Option<syn::Type>,
    /// The enum-level policy, merged with the default.
    pub retry: Option<Policy>,
    /// `on_failure`, a `failed` state.
    pub on_failure: Option<Ident>,
    /// `on_spec_change`.
    pub on_spec_change: SpecChange,
    /// `on_failed_spec_change`.
    pub on_failed_spec_change: FailedSpecChange,
    /// `snapshot_spec`.
    pub snapshot_spec: bool,
    /// `cleanup = path`.
    pub cleanup: Option<syn::Path>,
    /// `on_delete = compensate`.
    pub compensate_on_delete: bool,
    /// `crate = path`.
    pub krate: Option<syn::Path>,
    /// `version = N`, at least 1; `None` for the default, 1.
    pub version: Option<u32>,
    /// `migrate = path`.
    pub migrate: Option<syn::Path>,
    /// `batch_commits`.
    pub batch_commits: bool,
    /// The states, in declaration order.
    pub states: Vec<State>,
}

/// One checked state.
#[derive(Debug, Clone)]
pub struct State {
    /// The variant.
    pub ident: Ident,
    /// Its fields.
    pub shape: Shape,
    /// The types of its fields, in declaration order.
    pub field_types: Vec<syn::Type>,
    /// `initial`.
    pub initial: bool,
    /// `ready`.
    pub ready: bool,
    /// `failed`.
    pub failed: bool,
    /// `final`.
    pub is_final: bool,
    /// `sensitive`.
    pub sensitive: bool,
    /// What runs in the state (absent exactly for resting states).
    pub handler: Option<Handler>,
    /// `compensate = path`.
    pub compensate: Option<syn::Path>,
    /// `next(...)`, each a known state.
    pub next: Vec<Ident>,
    /// The state's own policy, merged with the enum's and the default.
    pub retry: Option<Policy>,
    /// `timeout`, longer than zero.
    pub timeout: Option<DurationLit>,
    /// `attempt_timeout`, longer than zero.
    pub attempt_timeout: Option<DurationLit>,
    /// `on_timeout`, a known unit state.
    pub on_timeout: Option<Ident>,
    /// `on_exhausted`, a known unit state.
    pub on_exhausted: Option<Ident>,
    /// `renamed_from = "..."`: former names, each used once in the machine.
    pub renamed_from: Vec<String>,
    /// `batch_entry`, in a machine without `batch_commits`.
    pub batch_entry: bool,
    /// `commit_on_entry`, in a machine with `batch_commits`.
    pub commit_on_entry: bool,
    /// `commits`: entering the state closes the saga's scope.
    pub commits: bool,
    /// `on_signal(name = Target, ...)`: each signal once, each target a
    /// known unit state, on a state that is not resting.
    pub signals: Vec<(Ident, Ident)>,
    /// `immutable(...)`: checked field paths, each once.
    pub immutable: Vec<String>,
    /// `grow_only(...)`: checked field paths, each once, none immutable.
    pub grow_only: Vec<String>,
    /// `refuse_delete`.
    pub refuse_delete: bool,
}

impl State {
    /// Whether the machine rests here.
    pub fn is_resting(&self) -> bool {
        self.is_final || self.failed
    }
}

/// What runs in a state that is not resting.
#[derive(Debug, Clone)]
pub enum Handler {
    /// `handler = path`: the user's async function.
    Function(syn::Path),
    /// `converge = path, next(Target)`: a generated handler that converges
    /// what `desired` returns and moves to `next` once it is ready.
    Converge {
        /// The function that builds what the state converges.
        desired: syn::Path,
        /// The state entered when everything is ready (the only `next`
        /// target).
        next: Ident,
    },
}

/// The shape of a variant, as the dispatch code destructures it.
#[derive(Debug, Clone)]
pub enum Shape {
    /// `A`.
    Unit,
    /// `A { x, y }`: the field names in declaration order.
    Named(Vec<Ident>),
    /// `A(x, y)`: the number of fields.
    Unnamed(usize),
}

impl Shape {
    /// Whether the variant carries data.
    pub fn has_data(&self) -> bool {
        !matches!(self, Shape::Unit)
    }
}

/// A validated retry policy, in the units the generated code uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// Attempts in a row, the first included (at least 1).
    pub max_attempts: u32,
    /// The first backoff, in milliseconds.
    pub initial_ms: u64,
    /// The growth per failed attempt (finite, at least 1).
    pub factor: f64,
    /// The cap, in milliseconds (at least `initial_ms`).
    pub max_ms: u64,
    /// Full jitter.
    pub jitter: bool,
}

impl Policy {
    /// `fsm_core::RetryPolicy::DEFAULT`: 5 attempts, 1 s doubling up to 5 min.
    pub const DEFAULT: Policy = Policy {
        max_attempts: 5,
        initial_ms: 1_000,
        factor: 2.0,
        max_ms: 300_000,
        jitter: false,
    };
}

/// What the engine does when the spec changes.
#[derive(Debug, Clone)]
pub enum SpecChange {
    /// Start again.
    Restart,
    /// Keep going.
    Continue,
    /// Move to this unit state.
    Goto(Ident),
    /// Compensate, then start again.
    CompensateAndRestart,
}

/// `on_failed_spec_change`: how a failed object recovers.
#[derive(Debug, Clone)]
pub enum FailedSpecChange {
    /// Start again (the default).
    Restart,
    /// Stay failed.
    Stay,
    /// Move to this unit, not failed, state.
    Goto(Ident),
}

/// The states the engine enters by a spec change's policies, whatever the
/// graph's arrows: the `goto` targets of `on_spec_change` and
/// `on_failed_spec_change`.
pub fn spec_change_entries<'m>(
    spec_change: &'m SpecChange,
    failed_spec_change: &'m FailedSpecChange,
) -> Vec<&'m Ident> {
    let mut entries = Vec::new();
    if let SpecChange::Goto(target) = spec_change {
        entries.push(target);
    }
    if let FailedSpecChange::Goto(target) = failed_spec_change {
        entries.push(target);
    }
    entries
}

/// What the `Fsm` impl emitted next to the errors of a refused enum needs:
/// the enum and the types its attributes declare, as far as they can be
/// read (`parse::lenient` reads them, `codegen::fallback` writes the impl).
#[derive(Debug, Clone)]
pub struct Fallback {
    /// The enum.
    pub ident: Ident,
    /// `resource = T`, when it reads as a type.
    pub resource: Option<syn::Type>,
    /// `context = T`, when it reads as a type.
    pub context: Option<syn::Type>,
    /// `error = T`, when it reads as a type.
    pub error: Option<syn::Type>,
    /// `crate = path`, when it reads as a path.
    pub krate: Option<syn::Path>,
}
