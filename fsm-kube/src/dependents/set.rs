//! The desired set: dependents by key, each with its desired object(s),
//! what it depends on and its conditions, validated when built.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::Resource;
use kube::api::DynamicObject;
use serde::Serialize;
use serde_json::Value;

use super::error::SetError;
use super::kind::DependentKind;
use super::matching::Matching;
use super::order;
use super::readiness::Readiness;

/// A readiness postcondition over the live object.
pub(crate) type ReadyFn = Arc<dyn Fn(&Value) -> Readiness + Send + Sync>;
/// A predicate over the live object (`None`: it does not exist).
pub(crate) type LiveFn = Arc<dyn Fn(Option<&Value>) -> bool + Send + Sync>;
/// How a [derived](Dependent::derived) dependent's objects are computed.
pub(crate) type DeriveFn =
    Arc<dyn Fn(&super::live::LiveDependents) -> Result<Vec<Value>, String> + Send + Sync>;

/// How a dependent's readiness is decided.
#[derive(Clone)]
pub(crate) enum ReadyCheck {
    /// [`builtin_readiness`](super::builtin_readiness).
    BuiltIn,
    /// Ready as soon as it exists.
    Exists,
    /// The user's closure.
    Custom(ReadyFn),
}

/// Whether a dependent is reconciled this time.
#[derive(Clone)]
pub(crate) enum Precondition {
    Always(bool),
    Custom(LiveFn),
}

impl Precondition {
    pub(crate) fn holds(&self, live: Option<&Value>) -> bool {
        match self {
            Precondition::Always(holds) => *holds,
            Precondition::Custom(check) => check(live),
        }
    }
}

/// One dependent of a [`DesiredSet`]: a key, its kind, one desired object
/// (or, for a family, any number of them), and how it is reconciled.
///
/// ```
/// use fsm_kube::dependents::Dependent;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::ObjectMeta;
///
/// let config = ConfigMap {
///     metadata: ObjectMeta { name: Some("web-config".into()), ..Default::default() },
///     data: Some([("color".to_owned(), "blue".to_owned())].into()),
///     ..Default::default()
/// };
/// let dependent = Dependent::new("config", &config)
///     .depends_on(["secret"])
///     .when(true)
///     .ready(|live: &serde_json::Value| live.get("data").is_some());
/// assert_eq!(dependent.key(), "config");
/// ```
///
/// # Conditions (java-operator-sdk's names in brackets)
/// - [`depends_on`](Dependent::depends_on) (`dependsOn`): applied only
///   once every dependent named is ready.
/// - [`ready`](Dependent::ready) (`readyPostcondition`): default
///   [`builtin_readiness`](super::builtin_readiness).
/// - [`when`](Dependent::when) (`activationCondition`): an inactive
///   dependent is not created, and deleted if it exists; it does not hold
///   up the dependents that depend on it.
/// - [`precondition`](Dependent::precondition) (`reconcilePrecondition`):
///   when false the dependent is left as it is (not applied, not deleted)
///   and reported pending, as is everything that depends on it.
/// - [`delete_postcondition`](Dependent::delete_postcondition)
///   (`deletePostcondition`): when teardown may go on past it; default:
///   the object is gone.
///
/// # Lifecycle (java-operator-sdk's in brackets)
/// - [`create_only`](Dependent::create_only) (a `Creator` without
///   `Updater`): created once, never written again; the live object wins.
/// - [`keep_on_prune`](Dependent::keep_on_prune) (neither `Deleter` nor
///   `GarbageCollected`, when the dependent goes): released from the
///   owner instead of deleted.
/// - [`per_attempt`](Dependent::per_attempt): one create-only object per
///   attempt of a state.
#[derive(Clone)]
pub struct Dependent {
    pub(crate) key: String,
    pub(crate) kind: DependentKind,
    pub(crate) objects: Vec<Value>,
    pub(crate) family: bool,
    pub(crate) depends_on: Vec<String>,
    pub(crate) ready: ReadyCheck,
    pub(crate) active: bool,
    pub(crate) precondition: Precondition,
    pub(crate) delete_postcondition: Option<LiveFn>,
    pub(crate) adopt: bool,
    pub(crate) force: bool,
    pub(crate) create_only: bool,
    pub(crate) keep: bool,
    pub(crate) per_attempt: bool,
    pub(crate) matching: Matching,
    pub(crate) encode_error: Option<String>,
    /// Set for a [derived](Dependent::derived) dependent: its objects are
    /// computed during the converge, from its dependencies' live objects.
    pub(crate) derive: Option<DeriveFn>,
}

impl std::fmt::Debug for Dependent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dependent")
            .field("key", &self.key)
            .field("kind", &self.kind.display())
            .field("objects", &self.objects.len())
            .field("family", &self.family)
            .field("depends_on", &self.depends_on)
            .field("active", &self.active)
            .field("adopt", &self.adopt)
            .field("force", &self.force)
            .field("create_only", &self.create_only)
            .field("keep_on_prune", &self.keep)
            .field("per_attempt", &self.per_attempt)
            .field("derived", &self.derive.is_some())
            .field("ignore", &self.matching.ignore_given)
            .field("matcher", &self.matching.matcher.is_some())
            .field("dry_run_compare", &self.matching.dry_run)
            .finish_non_exhaustive()
    }
}

impl Dependent {
    pub(crate) fn with_objects(
        key: impl Into<String>,
        kind: DependentKind,
        objects: Vec<Value>,
        family: bool,
        encode_error: Option<String>,
    ) -> Self {
        Dependent {
            key: key.into(),
            kind,
            objects,
            family,
            depends_on: Vec::new(),
            ready: ReadyCheck::BuiltIn,
            active: true,
            precondition: Precondition::Always(true),
            delete_postcondition: None,
            adopt: false,
            force: false,
            create_only: false,
            keep: false,
            per_attempt: false,
            matching: Matching::default(),
            encode_error,
            derive: None,
        }
    }

    /// A dependent holding one typed object (a k8s-openapi type or a
    /// `CustomResource`). The object needs a name; a namespaced object
    /// without a namespace goes in the owner's (`default` for a
    /// cluster-scoped owner). Its `status` is not applied.
    #[must_use]
    pub fn new<T>(key: impl Into<String>, object: &T) -> Self
    where
        T: Resource<DynamicType = ()> + Serialize,
        T::Scope: 'static,
    {
        let kind = DependentKind::of::<T>();
        let (objects, error) = encode_all(std::iter::once(object), &kind);
        Self::with_objects(key, kind, objects, false, error)
    }

    /// A dependent holding one object of a kind known at run time.
    #[must_use]
    pub fn dynamic(key: impl Into<String>, object: &DynamicObject, kind: DependentKind) -> Self {
        let (objects, error) = encode_all(std::iter::once(object), &kind);
        Self::with_objects(key, kind, objects, false, error)
    }

    /// A family (a bulk dependent): any number of objects of one kind,
    /// each with its own name, scaled up and down with the iterator: a
    /// member no longer desired is pruned. The family is ready when every
    /// member is; an empty family is ready.
    #[must_use]
    pub fn family<T>(key: impl Into<String>, objects: impl IntoIterator<Item = T>) -> Self
    where
        T: Resource<DynamicType = ()> + Serialize,
        T::Scope: 'static,
    {
        let kind = DependentKind::of::<T>();
        let objects: Vec<T> = objects.into_iter().collect();
        let (objects, error) = encode_all(objects.iter(), &kind);
        Self::with_objects(key, kind, objects, true, error)
    }

    /// A family of objects of a kind known at run time.
    #[must_use]
    pub fn dynamic_family(
        key: impl Into<String>,
        objects: impl IntoIterator<Item = DynamicObject>,
        kind: DependentKind,
    ) -> Self {
        let objects: Vec<DynamicObject> = objects.into_iter().collect();
        let (objects, error) = encode_all(objects.iter(), &kind);
        Self::with_objects(key, kind, objects, true, error)
    }

    /// One object per attempt of a state: `object` renamed
    /// [`attempt_name`]`(name, attempt)` and [`create_only`](Dependent::create_only).
    /// The attempt's object is created once and then only read; the next
    /// attempt (the engine's `cx.attempt()` after a retryable failure)
    /// names a new object. Earlier attempts' objects (those labelled with
    /// this key) are not pruned while the dependent is in the set and
    /// active: they stay owned, for inspection, and go with the owner (the
    /// garbage collector, or [`teardown`](super::teardown)), or are pruned
    /// once the key leaves the set or turns inactive. Only the current
    /// attempt's object decides readiness.
    ///
    /// ```
    /// use fsm_kube::dependents::Dependent;
    /// use k8s_openapi::api::batch::v1::Job;
    /// use kube::api::ObjectMeta;
    ///
    /// let job = Job { metadata: ObjectMeta { name: Some("build".into()), ..Default::default() }, ..Default::default() };
    /// let build = Dependent::per_attempt("build", &job, 2);
    /// assert_eq!(build.objects()[0]["metadata"]["name"], "build-2");
    /// assert!(build.is_create_only());
    /// ```
    #[must_use]
    pub fn per_attempt<T>(key: impl Into<String>, object: &T, attempt: u32) -> Self
    where
        T: Resource<DynamicType = ()> + Serialize,
        T::Scope: 'static,
    {
        let mut dependent = Self::new(key, object);
        for object in &mut dependent.objects {
            if let Some(name) = object.pointer_mut("/metadata/name")
                && let Some(base) = name.as_str()
            {
                *name = attempt_name(base, attempt).into();
            }
        }
        dependent.per_attempt = true;
        dependent.create_only()
    }

    /// Applies this dependent only once the dependents named by `keys`
    /// are ready (added to earlier calls).
    #[must_use]
    pub fn depends_on<I>(mut self, keys: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.depends_on.extend(keys.into_iter().map(Into::into));
        self
    }

    /// Decides readiness with `check` over the live object (as JSON)
    /// instead of the built-in rules. It returns a `bool` or a
    /// [`Readiness`] (which can fail the dependent).
    #[must_use]
    pub fn ready<F, R>(mut self, check: F) -> Self
    where
        F: Fn(&Value) -> R + Send + Sync + 'static,
        R: Into<Readiness>,
    {
        self.ready = ReadyCheck::Custom(Arc::new(move |live| check(live).into()));
        self
    }

    /// Decides readiness with `check` over the live object read as `T`
    /// (a live object that does not read as `T` is pending, with serde's
    /// message).
    ///
    /// ```
    /// use fsm_kube::dependents::Dependent;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// # let config = ConfigMap { metadata: kube::api::ObjectMeta { name: Some("c".into()), ..Default::default() }, ..Default::default() };
    /// let dependent = Dependent::new("config", &config)
    ///     .ready_as(|live: &ConfigMap| live.data.as_ref().is_some_and(|d| d.contains_key("ready")));
    /// # let _ = dependent;
    /// ```
    #[must_use]
    pub fn ready_as<T, F, R>(self, check: F) -> Self
    where
        T: serde::de::DeserializeOwned,
        F: Fn(&T) -> R + Send + Sync + 'static,
        R: Into<Readiness>,
    {
        self.ready(move |live: &Value| match T::deserialize(live) {
            Ok(typed) => check(&typed).into(),
            Err(e) => Readiness::pending(format!("the live object could not be read: {e}")),
        })
    }

    /// Ready as soon as the object exists (no built-in rule).
    #[must_use]
    pub fn ready_when_exists(mut self) -> Self {
        self.ready = ReadyCheck::Exists;
        self
    }

    /// Activation: when `false` the dependent is not created, and its
    /// objects are deleted if they exist. Default `true`.
    #[must_use]
    pub fn when(mut self, active: bool) -> Self {
        self.active = active;
        self
    }

    /// Reconcile precondition: when `false` the dependent is left as it
    /// is (neither applied nor deleted) and reported pending, and so are
    /// the dependents that depend on it. Default `true`.
    #[must_use]
    pub fn precondition(mut self, holds: bool) -> Self {
        self.precondition = Precondition::Always(holds);
        self
    }

    /// Reconcile precondition decided over the live object (`None` when it
    /// does not exist; for a family, over each member).
    #[must_use]
    pub fn precondition_with<F>(mut self, holds: F) -> Self
    where
        F: Fn(Option<&Value>) -> bool + Send + Sync + 'static,
    {
        self.precondition = Precondition::Custom(Arc::new(holds));
        self
    }

    /// Delete postcondition for [`teardown`](super::teardown), over the
    /// live object (`None`: gone): what it depends on is deleted only once
    /// this holds. Default: the object is gone.
    #[must_use]
    pub fn delete_postcondition<F>(mut self, done: F) -> Self
    where
        F: Fn(Option<&Value>) -> bool + Send + Sync + 'static,
    {
        self.delete_postcondition = Some(Arc::new(done));
        self
    }

    /// Takes over an existing object of the same name that the owner does
    /// not own (it gets the owner reference and labels). Without it such
    /// an object makes the dependent failed and is never touched.
    #[must_use]
    pub fn adopt(mut self) -> Self {
        self.adopt = true;
        self
    }

    /// Applies with `force`: fields another manager applied are taken
    /// over instead of failing the dependent with a conflict. (Fields
    /// someone changed with an ordinary update, `kubectl edit` or
    /// `kubectl scale`, are taken back without it.)
    #[must_use]
    pub fn force(mut self) -> Self {
        self.force = true;
        self
    }

    /// Create-only (java-operator-sdk's `Creator` without `Updater`): the
    /// object is created if it does not exist (a create, not an apply)
    /// and never written again. Once it exists the live object wins:
    /// the desired one may differ on every converge (a freshly generated
    /// password) and nothing is written; readiness, [`ready`](Dependent::ready)
    /// or the built-in rules, is judged on the live object, and a ready
    /// create-only dependent lets what depends on it go ahead.
    ///
    /// ```
    /// use fsm_kube::dependents::{Dependent, DesiredSet};
    /// use k8s_openapi::api::core::v1::Secret;
    /// use kube::api::ObjectMeta;
    ///
    /// # let generate = || "s3cret".to_owned();
    /// let secret = Secret {
    ///     metadata: ObjectMeta { name: Some("db-password".into()), ..Default::default() },
    ///     string_data: Some([("password".to_owned(), generate())].into()),
    ///     ..Default::default()
    /// };
    /// let set = DesiredSet::builder()
    ///     .dependent(Dependent::new("password", &secret).create_only())
    ///     .build()?;
    /// assert!(set.get("password").is_some_and(Dependent::is_create_only));
    /// # Ok::<(), fsm_kube::dependents::SetError>(())
    /// ```
    ///
    /// # Guarantees
    /// - Written at most once per object by this dependent: the create.
    ///   Someone else creating it first (another replica, a lost
    ///   response) is fine: the object that exists is the one kept.
    /// - A converge of an existing, owned object makes no write.
    ///
    /// # Caveats
    /// - Nothing is taken back: a field someone edits stays edited, and a
    ///   change of the desired object reaches the cluster only if the
    ///   object is deleted (it is then created again, with the new
    ///   content).
    /// - An existing object the owner does not own fails the dependent,
    ///   as for any dependent; with [`adopt`](Dependent::adopt) it gets
    ///   the owner reference and labels (one apply of that metadata only),
    ///   its content left as it is.
    #[must_use]
    pub fn create_only(mut self) -> Self {
        self.create_only = true;
        self
    }

    /// Keeps the objects when the dependent goes: pruned (its key left the
    /// set, it turned inactive, a family shrank) or torn down, an object
    /// is **released instead of deleted**: one merge patch removes the
    /// owner's reference (other owners' stay) and the
    /// `app.kubernetes.io/managed-by`, `operator-fsm.io/owner-uid` and
    /// `operator-fsm.io/dependent` labels and the [`KEEP_ANNOTATION`](super::KEEP_ANNOTATION). The
    /// object then belongs to no one: the garbage collector does not
    /// delete it with the owner, pruning and teardown no longer see it,
    /// and a converge that wants it back finds an object the owner does
    /// not own (failed, unless [`adopt`](Dependent::adopt)ed). This is
    /// Kubernetes' *orphan* deletion, applied to one dependent.
    ///
    /// While desired, the object carries the owner reference like any
    /// dependent, and the [`KEEP_ANNOTATION`](super::KEEP_ANNOTATION): what pruning reads, since a
    /// dependent no longer in the set has no declaration left.
    ///
    /// # Caveats
    /// The owner deleted *without* a teardown (a
    /// [`DependentsReconciler`](super::DependentsReconciler), which adds no
    /// finalizer) takes the object with it: it still carries the owner
    /// reference, and the garbage collector follows it. A machine whose
    /// `cleanup` calls `cx.teardown(&set)` releases it first. A
    /// create-only object keeps the annotation it was created with, even
    /// if the dependent later stops keeping.
    #[must_use]
    pub fn keep_on_prune(mut self) -> Self {
        self.keep = true;
        self
    }

    /// Leaves the field at `path` to others once the object exists: it is
    /// not compared, and an apply keeps its live value (a field the live
    /// object lacks is left out), so a change someone else makes there
    /// (an autoscaler's `/spec/replicas`, an injected annotation) is not
    /// taken back. The object's creation applies the desired value.
    ///
    /// `path` is a JSON pointer (RFC 6901: `/spec/replicas`; `~1` stands
    /// for a `/` inside a key, `~0` for a `~`) where a segment `*` stands
    /// for every list element or object entry:
    /// `/spec/template/spec/containers/*/image`,
    /// `/metadata/annotations/*`. List elements are paired with the live
    /// ones by `name` when they have one, else by position.
    ///
    /// A malformed path (not starting with `/`, an empty segment, a bad
    /// `~` escape) or one naming what identifies the object or what the
    /// runtime applies (`/kind`, `/metadata/name`, the owner reference,
    /// the dependent labels) makes [`DesiredSetBuilder::build`] fail with
    /// [`SetError::InvalidIgnorePath`].
    ///
    /// ```
    /// use fsm_kube::dependents::{Dependent, DesiredSet, SetError};
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// use kube::api::ObjectMeta;
    ///
    /// let web = Deployment { metadata: ObjectMeta { name: Some("web".into()), ..Default::default() }, ..Default::default() };
    /// // An autoscaler owns the replica count.
    /// let set = DesiredSet::builder()
    ///     .dependent(Dependent::new("web", &web).ignore("/spec/replicas"))
    ///     .build()?;
    /// # let _ = set;
    /// let bad = DesiredSet::builder()
    ///     .dependent(Dependent::new("web", &web).ignore("spec.replicas"))
    ///     .build();
    /// assert!(matches!(bad, Err(SetError::InvalidIgnorePath { .. })));
    /// # Ok::<(), SetError>(())
    /// ```
    #[must_use]
    pub fn ignore(mut self, path: impl Into<String>) -> Self {
        self.matching.ignore_given.push(path.into());
        self
    }

    /// [`ignore`](Dependent::ignore)s each of `paths`.
    #[must_use]
    pub fn ignore_paths<I>(mut self, paths: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.matching
            .ignore_given
            .extend(paths.into_iter().map(Into::into));
        self
    }

    /// Decides with `matches(desired, live)` whether the live object
    /// already is as desired (java-operator-sdk's `Matcher`): `true` skips
    /// the apply, `false` applies. It replaces the comparison of values
    /// and the dry run; `desired` is the object as it would be applied
    /// (owner reference, labels, ignored fields holding the live values),
    /// `live` the object read. One check stays: a field this operator
    /// applied before and no longer applies is removed by an apply,
    /// whatever the matcher says.
    ///
    /// ```
    /// use fsm_kube::dependents::Dependent;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use serde_json::Value;
    /// # let config = ConfigMap { metadata: kube::api::ObjectMeta { name: Some("c".into()), ..Default::default() }, ..Default::default() };
    /// // Only the version decides; anything else others may change.
    /// let dependent = Dependent::new("config", &config)
    ///     .matcher(|desired: &Value, live: &Value| desired["data"]["version"] == live["data"]["version"]);
    /// # let _ = dependent;
    /// ```
    #[must_use]
    pub fn matcher<F>(mut self, matches: F) -> Self
    where
        F: Fn(&Value, &Value) -> bool + Send + Sync + 'static,
    {
        self.matching.matcher = Some(Arc::new(matches));
        self
    }

    /// Whether a live object that the comparison finds different is
    /// checked with a dry-run apply before the real one (default `true`):
    /// the server's answer tells a real difference from a value it
    /// normalises (`1000m` read back as `1`), a field it defaults or drops,
    /// or a list element another manager added; what it answers is
    /// remembered, so the same desired object costs no dry run again. With
    /// `false` such an object is applied on every converge (a request the
    /// server sees as a no-op), and no dry-run request is ever sent (for
    /// a kind whose admission webhooks have side effects and no dry-run
    /// support).
    #[must_use]
    pub fn dry_run_compare(mut self, enabled: bool) -> Self {
        self.matching.dry_run = enabled;
        self
    }

    /// The dependent's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The dependent's kind.
    pub fn kind(&self) -> &DependentKind {
        &self.kind
    }

    /// Whether it is a family (a bulk dependent).
    pub fn is_family(&self) -> bool {
        self.family
    }

    /// The desired objects, as JSON (one unless a family).
    pub fn objects(&self) -> &[Value] {
        &self.objects
    }

    /// The keys it depends on.
    pub fn dependencies(&self) -> &[String] {
        &self.depends_on
    }

    /// Whether it is active ([`Dependent::when`]).
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Whether it is [`create_only`](Dependent::create_only).
    pub fn is_create_only(&self) -> bool {
        self.create_only
    }

    /// Whether its objects are released rather than deleted
    /// ([`keep_on_prune`](Dependent::keep_on_prune)).
    pub fn keeps_on_prune(&self) -> bool {
        self.keep
    }
}

pub(crate) fn encode_all<'o, T: Serialize + 'o>(
    objects: impl Iterator<Item = &'o T>,
    kind: &DependentKind,
) -> (Vec<Value>, Option<String>) {
    let mut out = Vec::new();
    for object in objects {
        match serde_json::to_value(object) {
            Ok(mut value) => {
                if let Value::Object(map) = &mut value {
                    map.insert(
                        "apiVersion".into(),
                        kind.resource.api_version.clone().into(),
                    );
                    map.insert("kind".into(), kind.resource.kind.clone().into());
                }
                out.push(value);
            }
            Err(e) => return (Vec::new(), Some(e.to_string())),
        }
    }
    (out, None)
}

/// The name of attempt `attempt`'s object of base name `base`:
/// `{base}-{attempt}` (what [`Dependent::per_attempt`] names it).
///
/// ```
/// assert_eq!(fsm_kube::dependents::attempt_name("build", 0), "build-0");
/// ```
pub fn attempt_name(base: &str, attempt: u32) -> String {
    format!("{base}-{attempt}")
}

/// The name of a desired object (validated by the set's builder).
pub(crate) fn object_name(object: &Value) -> &str {
    metadata_str(object, "name").unwrap_or_default()
}

/// `metadata.FIELD` of `object` when it is a string (by key, not by JSON
/// pointer: a pointer unescapes each of its segments into a new string).
fn metadata_str<'v>(object: &'v Value, field: &str) -> Option<&'v str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// The namespace a desired object names, if any.
pub(crate) fn object_namespace(object: &Value) -> Option<&str> {
    metadata_str(object, "namespace").filter(|ns| !ns.is_empty())
}

/// A validated set of dependents: keys unique, dependencies known and
/// acyclic, no object named twice. Build it with [`DesiredSet::builder`].
///
/// ```
/// use fsm_kube::dependents::{Dependent, DesiredSet, SetError};
/// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
/// use kube::api::ObjectMeta;
///
/// let meta = |name: &str| ObjectMeta { name: Some(name.into()), ..Default::default() };
/// let secret = Secret { metadata: meta("db-credentials"), ..Default::default() };
/// let config = ConfigMap { metadata: meta("db-config"), ..Default::default() };
/// let set = DesiredSet::builder()
///     .dependent(Dependent::new("secret", &secret))
///     .dependent(Dependent::new("config", &config).depends_on(["secret"]))
///     .build()
///     .unwrap();
/// assert_eq!(set.keys().collect::<Vec<_>>(), ["secret", "config"]);
///
/// let cycle = DesiredSet::builder()
///     .dependent(Dependent::new("secret", &secret).depends_on(["config"]))
///     .dependent(Dependent::new("config", &config).depends_on(["secret"]))
///     .build();
/// assert!(matches!(cycle, Err(SetError::Cycle(_))));
/// ```
#[derive(Clone, Debug, Default)]
pub struct DesiredSet {
    pub(crate) dependents: Vec<Dependent>,
    /// For each dependent, the indexes of those it depends on.
    pub(crate) requires: Vec<Vec<usize>>,
    pub(crate) prunes: Vec<DependentKind>,
}

impl DesiredSet {
    /// An empty builder.
    pub fn builder() -> DesiredSetBuilder {
        DesiredSetBuilder::default()
    }

    /// The keys, in the order the dependents were added.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.dependents.iter().map(|d| d.key.as_str())
    }

    /// The keys of the dependents at `indices`.
    pub(crate) fn keys_of(&self, indices: &[usize]) -> Vec<String> {
        indices
            .iter()
            .filter_map(|&i| self.dependents.get(i))
            .map(|d| d.key.clone())
            .collect()
    }

    /// The dependent with `key`.
    pub fn get(&self, key: &str) -> Option<&Dependent> {
        self.dependents.iter().find(|d| d.key == key)
    }

    /// The dependents, in the order they were added.
    pub fn dependents(&self) -> &[Dependent] {
        &self.dependents
    }

    /// How many dependents the set has.
    pub fn len(&self) -> usize {
        self.dependents.len()
    }

    /// Whether the set has no dependent.
    pub fn is_empty(&self) -> bool {
        self.dependents.is_empty()
    }

    /// Every kind the set creates or prunes, once each: the kinds pruning
    /// lists and a controller should watch
    /// ([`owns_dependents`](super::owns_dependents)).
    pub fn kinds(&self) -> Vec<DependentKind> {
        let mut kinds: Vec<DependentKind> = Vec::new();
        for kind in self
            .dependents
            .iter()
            .map(|d| &d.kind)
            .chain(self.prunes.iter())
        {
            if !kinds.iter().any(|k| k.same_kind(kind)) {
                kinds.push(kind.clone());
            }
        }
        kinds
    }
}

/// Builds a [`DesiredSet`]; [`build`](DesiredSetBuilder::build) validates.
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct DesiredSetBuilder {
    dependents: Vec<Dependent>,
    prunes: Vec<DependentKind>,
}

impl DesiredSetBuilder {
    /// Adds a dependent.
    pub fn dependent(mut self, dependent: Dependent) -> Self {
        self.dependents.push(dependent);
        self
    }

    /// Adds dependents.
    pub fn extend(mut self, dependents: impl IntoIterator<Item = Dependent>) -> Self {
        self.dependents.extend(dependents);
        self
    }

    /// Also prunes objects of these kinds that carry the owner's labels but
    /// are no longer desired: kinds an earlier version of the operator
    /// created and this one no longer names.
    pub fn prunes(mut self, kinds: impl IntoIterator<Item = DependentKind>) -> Self {
        self.prunes.extend(kinds);
        self
    }

    /// The validated set.
    ///
    /// # Errors
    /// [`SetError`], naming the keys: a duplicate or invalid key, an
    /// unknown dependency, a cycle, two dependents naming the same object,
    /// an object without a name or that could not be encoded, an ignore
    /// path that does not parse.
    pub fn build(self) -> Result<DesiredSet, SetError> {
        let DesiredSetBuilder {
            mut dependents,
            prunes,
        } = self;
        for d in &mut dependents {
            d.matching
                .parse_ignored()
                .map_err(|(path, reason)| SetError::InvalidIgnorePath {
                    key: d.key.clone(),
                    path,
                    reason,
                })?;
        }
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, d) in dependents.iter().enumerate() {
            if !valid_label_value(&d.key) {
                return Err(SetError::InvalidKey(d.key.clone()));
            }
            if index.insert(d.key.as_str(), i).is_some() {
                return Err(SetError::DuplicateKey(d.key.clone()));
            }
            if let Some(message) = &d.encode_error {
                return Err(SetError::Encode {
                    key: d.key.clone(),
                    message: message.clone(),
                });
            }
        }
        let mut requires = Vec::with_capacity(dependents.len());
        for d in &dependents {
            let mut edges = Vec::new();
            for dep in &d.depends_on {
                let Some(&j) = index.get(dep.as_str()) else {
                    return Err(SetError::UnknownDependency {
                        key: d.key.clone(),
                        missing: dep.clone(),
                    });
                };
                if !edges.contains(&j) {
                    edges.push(j);
                }
            }
            requires.push(edges);
        }
        if let Some(cycle) = order::find_cycle(&requires) {
            return Err(SetError::Cycle(
                cycle
                    .into_iter()
                    .map(|i| dependents[i].key.clone())
                    .collect(),
            ));
        }
        check_objects(&dependents)?;
        Ok(DesiredSet {
            dependents,
            requires,
            prunes,
        })
    }
}

/// Every object named, and by one dependent only.
fn check_objects(dependents: &[Dependent]) -> Result<(), SetError> {
    let mut seen: HashMap<(String, String, String, String), &str> = HashMap::new();
    for d in dependents {
        let mut own: HashSet<(String, String, String, String)> = HashSet::new();
        for object in &d.objects {
            let name = object_name(object);
            if name.is_empty() {
                return Err(SetError::Unnamed(d.key.clone()));
            }
            let ns = object_namespace(object).unwrap_or_default();
            let id = (
                d.kind.resource.group.clone(),
                d.kind.resource.kind.clone(),
                ns.to_owned(),
                name.to_owned(),
            );
            let object = match ns {
                "" => format!("{} {name}", d.kind.display()),
                ns => format!("{} {ns}/{name}", d.kind.display()),
            };
            if !own.insert(id.clone()) {
                return Err(SetError::SameObject {
                    first: d.key.clone(),
                    second: d.key.clone(),
                    object,
                });
            }
            if let Some(first) = seen.insert(id, &d.key) {
                return Err(SetError::SameObject {
                    first: first.to_owned(),
                    second: d.key.clone(),
                    object,
                });
            }
        }
    }
    Ok(())
}

/// A valid label value: at most 63 characters of `[A-Za-z0-9_.-]`,
/// alphanumeric at both ends (and not empty: a key must say something).
fn valid_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn cm(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[test]
    fn a_duplicate_key_is_refused() {
        let err = DesiredSet::builder()
            .dependent(Dependent::new("a", &cm("x")))
            .dependent(Dependent::new("a", &cm("y")))
            .build()
            .unwrap_err();
        assert_eq!(err, SetError::DuplicateKey("a".into()));
    }

    #[test]
    fn an_unknown_dependency_is_refused_naming_both_keys() {
        let err = DesiredSet::builder()
            .dependent(Dependent::new("a", &cm("x")).depends_on(["b"]))
            .build()
            .unwrap_err();
        assert_eq!(
            err,
            SetError::UnknownDependency {
                key: "a".into(),
                missing: "b".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "dependent `a` depends on `b`, which is not in the set"
        );
    }

    #[test]
    fn a_cycle_is_refused_naming_its_keys() {
        let err = DesiredSet::builder()
            .dependent(Dependent::new("a", &cm("x")).depends_on(["c"]))
            .dependent(Dependent::new("b", &cm("y")).depends_on(["a"]))
            .dependent(Dependent::new("c", &cm("z")).depends_on(["b"]))
            .dependent(Dependent::new("d", &cm("w")))
            .build()
            .unwrap_err();
        let SetError::Cycle(keys) = &err else {
            panic!("{err}")
        };
        assert_eq!(keys.first(), keys.last());
        let mut members: Vec<&str> = keys[1..].iter().map(String::as_str).collect();
        members.sort_unstable();
        assert_eq!(members, ["a", "b", "c"]);
        let self_loop = DesiredSet::builder()
            .dependent(Dependent::new("a", &cm("x")).depends_on(["a"]))
            .build()
            .unwrap_err();
        assert_eq!(self_loop, SetError::Cycle(vec!["a".into(), "a".into()]));
    }

    #[test]
    fn two_dependents_naming_one_object_are_refused() {
        let err = DesiredSet::builder()
            .dependent(Dependent::new("a", &cm("x")))
            .dependent(Dependent::family("b", [cm("y"), cm("x")]))
            .build()
            .unwrap_err();
        assert_eq!(
            err,
            SetError::SameObject {
                first: "a".into(),
                second: "b".into(),
                object: "ConfigMap x".into()
            }
        );
        let twice = DesiredSet::builder()
            .dependent(Dependent::family("f", [cm("y"), cm("y")]))
            .build();
        assert!(matches!(twice, Err(SetError::SameObject { .. })));
    }

    #[test]
    fn keys_must_be_label_values_and_objects_named() {
        for bad in ["", "-a", "a b", &"x".repeat(64)] {
            let err = DesiredSet::builder()
                .dependent(Dependent::new(bad, &cm("x")))
                .build()
                .unwrap_err();
            assert_eq!(err, SetError::InvalidKey(bad.to_owned()));
        }
        let err = DesiredSet::builder()
            .dependent(Dependent::new("a", &ConfigMap::default()))
            .build()
            .unwrap_err();
        assert_eq!(err, SetError::Unnamed("a".into()));
    }

    #[test]
    fn kinds_lists_each_kind_once_with_the_pruned_ones() {
        use k8s_openapi::api::core::v1::Secret;
        let set = DesiredSet::builder()
            .dependent(Dependent::new("a", &cm("x")))
            .dependent(Dependent::new("b", &cm("y")))
            .prunes([
                DependentKind::of::<Secret>(),
                DependentKind::of::<ConfigMap>(),
            ])
            .build()
            .unwrap();
        let kinds: Vec<String> = set.kinds().iter().map(DependentKind::display).collect();
        assert_eq!(kinds, ["ConfigMap", "Secret"]);
        assert_eq!(
            set.get("a").map(|d| d.objects()[0]["kind"].clone()),
            Some("ConfigMap".into())
        );
    }
}
