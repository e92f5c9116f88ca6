//! Converging a desired set: apply in dependency order, independent
//! dependents concurrently, skip what is already as desired, then prune
//! what is no longer desired.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::future::join_all;
use kube::Resource;
use kube::api::{DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams};
use serde_json::{Value, json};

use super::cache::OwnedMeta;
use super::create_only::{create_or_read, ownership_only};
use super::derived;
use super::diff::{conflicting_managers, only_updaters};
use super::error::DependentsError;
use super::live::{LiveDependents, LiveObject};
use super::match_memo::desired_hash;
use super::matching;
use super::object::{
    DEPENDENT_LABEL, Owner, Placement, applied_at, live_placement, owned_by, placement, selector,
};
use super::order;
use super::orphan;
use super::own_writes::version_of;
use super::pruned::PruneShape;
use super::readiness::{Readiness, builtin_readiness};
use super::report::{Convergence, DependentFailure, DependentState, FailureKind};
use super::runtime::DependentsRuntime;
use super::set::{Dependent, DesiredSet, Precondition, ReadyCheck};
use super::unchanged;

/// Brings the dependents of `owner` to `set`, as far as they can go now.
///
/// # Expected flow
/// Dependents are taken in dependency order: those whose dependencies are
/// all ready (or inactive) are reconciled together, concurrently; the ones
/// they unblock next; and so on. Reconciling one object means: read it
/// (watch cache, else one GET); if its reconcile precondition does not
/// hold, leave it; if it exists without naming `owner` as an owner,
/// fail the dependent unless it may be adopted; if nothing would change
/// (below), skip the write; otherwise server-side apply it with the
/// runtime's field manager, the owner reference and the labels; then ask
/// its readiness. Last, objects carrying the owner's labels that no active
/// dependent desires are deleted (pruned): inactive dependents, family
/// members scaled away, keys a newer set no longer has, kinds named by
/// [`DesiredSetBuilder::prunes`](super::DesiredSetBuilder::prunes);
/// those of a [kept](super::Dependent::keep_on_prune) dependent are
/// released instead, and earlier attempts of an active
/// [per-attempt](super::Dependent::per_attempt) dependent stay.
///
/// A [create-only](super::Dependent::create_only) object is created
/// (not applied) when absent, and otherwise only read.
///
/// # When pruning lists
/// Pruning finds the owner's objects by label: from the kind's watch cache
/// when the runtime has one ([`DependentsRuntime::cache`]), else with one
/// list request per kind, which the server answers by scanning every
/// object of the kind. A kind without a cache is listed unless the set
/// has the same *shape* as at the owner's last successful prune in this
/// runtime (or a clone of it): the same kinds (created or pruned) and the
/// same key, kind, namespace and name for every object of an active
/// dependent. Then that prune left no other labelled object, and this
/// converge creates none outside the shape, so there is nothing to find.
/// Hence a list per kind happens:
/// - at the first converge of an owner after the runtime is created (a
///   process start: what an earlier process or version left is found);
/// - whenever the shape changes: a dependent turned inactive, a family
///   that grew or shrank, a key or name added, renamed or removed, a kind
///   added to [`prunes`](super::DesiredSetBuilder::prunes);
/// - after a converge whose prune failed, or after
///   [`teardown`](super::teardown) of the owner.
///
/// The runtime remembers one shape per owner UID, for up to 100,000
/// owners (then it starts over, costing each owner one list again).
///
/// # When nothing is written
/// Once the object exists, its [ignored](super::Dependent::ignore) fields
/// take their live values (an apply keeps them as someone set them). Then
/// an apply is needed when a field the field manager's `Apply` entry of
/// `managedFields` owns is no longer in the configuration (an apply
/// removes it). Otherwise it is skipped when:
/// - the dependent has a [`matcher`](super::Dependent::matcher) and it
///   says the live object matches; with a matcher nothing below is asked;
/// - or every field of the configuration (ignored fields left out) is in
///   the live object with the same value (objects compared key by key,
///   lists element by element and of the same length, owner references by
///   UID as the server merges them);
/// - or the live object still holds the server's normal form learned for
///   this very configuration (below);
/// - or, when the comparison says "differs", a **dry-run apply**
///   (`dryRun=All`: the same field manager and `force`, a request but not
///   a write) answers the live object unchanged: every field, and every
///   manager's fields in `managedFields`, but for times, `resourceVersion`
///   and `status`. Then nothing is written, and the fields of the
///   configuration as the server holds them (its normal form: `1000m` as
///   `1`, `stringData` folded into `data`, lists with the elements other
///   managers added) are remembered for this object, keyed by the hash of
///   the configuration (its ignored fields left out): while the live
///   object holds them, later converges
///   of the same configuration cost no dry run and no write. A changed
///   configuration (a new hash) is compared afresh; a dry run that fails
///   is followed by the real apply, which reports why.
///
/// The runtime remembers normal forms for up to 100,000 objects (then it
/// starts over, costing each one dry run again), shared by its clones and
/// lost at a restart. [`dry_run_compare(false)`](super::Dependent::dry_run_compare)
/// turns the dry run off for a dependent.
///
/// # Guarantees
/// - A dependent is applied only when everything it depends on was found
///   ready in this call.
/// - A set already converged costs no write: reads only.
/// - Pruning deletes every object with the owner's labels that the set
///   does not desire, as long as such objects are only created by this
///   runtime's converges (or existed before it started): see
///   [When pruning lists](#when-pruning-lists).
/// - Fields other managers own are left alone. A field we apply that
///   someone changed with an ordinary update (drift) is taken back (the
///   apply is retried with `force`). A conflict with another *applier* is
///   a failed dependent naming it, unless the dependent is
///   [`force`](super::Dependent::force)d.
/// - An object of the same name that `owner` does not own is never
///   changed, unless [`adopt`](super::Dependent::adopt)ed.
///
/// # Caveats
/// An object carrying the owner's labels that another client (or another
/// replica, after a leadership change) creates while the owner's shape
/// stays the same is not pruned until the shape changes or the process
/// restarts.
///
/// A value the server normalises, a field it defaults or folds away, or a
/// list element another manager added costs one dry-run apply (a request,
/// no write) at the first converge after each process start and after
/// each change of the configuration, or of the live object's fields that
/// the configuration names.
///
/// # Errors
/// The server refusing a dependent (422 invalid, 403, a conflict) is not
/// an error: the dependent is [`DependentState::Failed`], whose
/// [`FailureKind`] says which (`Refused { code }`, `Forbidden`,
/// `Conflict { managers }`; `NotOwned`, `ReadinessFailed` for the others)
/// with the server's message. [`DependentsError::Owner`] when `owner` was not read from the
/// server; [`DependentsError::Api`] and [`DependentsError::List`] when the
/// server is unavailable (5xx, 429, network), so the caller retries.
pub async fn converge<K>(
    runtime: &DependentsRuntime,
    owner: &K,
    set: &DesiredSet,
) -> Result<Convergence, DependentsError>
where
    K: Resource<DynamicType = ()>,
{
    converge_for(runtime, &Owner::of(owner)?, set).await
}

/// [`converge`] for an owner already described.
pub(crate) async fn converge_for(
    runtime: &DependentsRuntime,
    owner: &Owner,
    set: &DesiredSet,
) -> Result<Convergence, DependentsError> {
    let mut report = Convergence::default();
    runtime.wakes.note(set);
    runtime
        .await_caches(
            set.dependents.iter().map(|d| &d.kind),
            owner.namespace.as_deref(),
        )
        .await;
    // A set with derived dependents has its shape only once they are
    // computed, after the walk.
    let derives = set.dependents.iter().any(Dependent::is_derived);
    let mut shape = PruneShape::of(set, owner);
    let mut pruned_before = !derives && runtime.pruned.is_current(&owner.uid, &shape);
    if !pruned_before && !derives {
        // Forgotten before the first apply: if this converge fails half
        // way, the next one lists again. (A set with derived dependents
        // is compared after the walk, and forgotten if the walk fails.)
        runtime.pruned.forget(&owner.uid);
    }
    let inactive = set
        .dependents
        .iter()
        .map(|d| (!d.active).then_some(DependentState::Inactive))
        .collect();
    let live = Mutex::new(LiveDependents::default());
    let resolved: Mutex<Vec<Option<Dependent>>> = Mutex::new(vec![None; set.len()]);
    let walked = order::walk(
        &set.requires,
        inactive,
        DependentState::satisfies,
        |blockers| DependentState::Waiting(set.keys_of(blockers)),
        |i| {
            let (live, resolved) = (&live, &resolved);
            async move {
                let dependent = &set.dependents[i];
                let derived_now;
                let dependent = if dependent.is_derived() {
                    let resolving = derived::resolve(dependent, &lock(live));
                    match resolving {
                        Ok(d) => {
                            lock(resolved)[i] = Some(d.clone());
                            derived_now = d;
                            &derived_now
                        }
                        Err(why) => {
                            let failure = DependentFailure::new(FailureKind::DeriveFailed, why);
                            return Ok((DependentState::Failed(failure), Outcome::default()));
                        }
                    }
                } else {
                    dependent
                };
                let (state, mut outcome) = reconcile_dependent(runtime, owner, dependent).await?;
                if state.is_ready() {
                    let objects = std::mem::take(&mut outcome.live);
                    lock(live).insert(dependent.key.clone(), objects);
                }
                Ok((state, outcome))
            }
        },
    )
    .await;
    if walked.is_err() && derives {
        runtime.pruned.forget(&owner.uid);
    }
    let (states, outcomes) = walked?;
    for outcome in outcomes {
        report.applied.extend(outcome.applied);
        report.unchanged += outcome.unchanged;
    }
    report.dependents = set
        .dependents
        .iter()
        .zip(states)
        .map(|(d, s)| {
            (
                d.key.clone(),
                s.unwrap_or(DependentState::Waiting(Vec::new())),
            )
        })
        .collect();
    report.live = take(live);
    let resolved_set;
    let set = if derives {
        resolved_set = with_resolved(set, take(resolved));
        shape = PruneShape::of(&resolved_set, owner);
        pruned_before = runtime.pruned.is_current(&owner.uid, &shape);
        if !pruned_before {
            runtime.pruned.forget(&owner.uid);
        }
        &resolved_set
    } else {
        set
    };
    (report.pruned, report.orphaned) = prune(runtime, owner, set, pruned_before).await?;
    runtime.pruned.remember(&owner.uid, shape);
    Ok(report)
}

/// The walk's shared state, usable after a panic elsewhere (plain data).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn take<T>(mutex: Mutex<T>) -> T {
    mutex
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `set` with its derived dependents replaced by what they resolved to
/// in this converge (those that did not resolve stay without objects).
fn with_resolved(set: &DesiredSet, resolved: Vec<Option<Dependent>>) -> DesiredSet {
    let mut set = set.clone();
    for (slot, resolved) in set.dependents.iter_mut().zip(resolved) {
        if let Some(resolved) = resolved {
            *slot = resolved;
        }
    }
    set
}

/// What reconciling one dependent did.
#[derive(Default)]
struct Outcome {
    applied: Vec<String>,
    unchanged: u32,
    /// The live objects of its ready members.
    live: Vec<LiveObject>,
}

/// One object of a dependent, reconciled.
enum Member {
    Ready(LiveObject),
    NotReady(String),
    Held,
    Failed(DependentFailure),
}

async fn reconcile_dependent(
    runtime: &DependentsRuntime,
    owner: &Owner,
    dependent: &Dependent,
) -> Result<(DependentState, Outcome), DependentsError> {
    let results = join_all(
        dependent
            .objects
            .iter()
            .map(|object| reconcile_object(runtime, owner, dependent, object)),
    )
    .await;
    let mut outcome = Outcome::default();
    let (mut not_ready, mut held) = (Vec::new(), false);
    let mut failed: Vec<DependentFailure> = Vec::new();
    for result in results {
        let (place, member, wrote) = result?;
        match wrote {
            Some(true) => outcome.applied.push(place.display()),
            Some(false) => outcome.unchanged += 1,
            None => {}
        }
        let name = |why: String| {
            if dependent.family {
                format!("{}: {why}", place.name)
            } else {
                why
            }
        };
        match member {
            Member::Ready(live) => outcome.live.push(live),
            Member::NotReady(why) => not_ready.push(name(why)),
            Member::Held => held = true,
            Member::Failed(failure) => failed.push(DependentFailure::new(
                failure.kind().clone(),
                name(failure.message().to_owned()),
            )),
        }
    }
    let state = if let Some(first) = failed.first() {
        // A family's members may fail differently: the first one's kind,
        // every member's message.
        let messages: Vec<&str> = failed.iter().map(DependentFailure::message).collect();
        DependentState::Failed(DependentFailure::new(
            first.kind().clone(),
            messages.join("; "),
        ))
    } else if held {
        DependentState::PreconditionUnmet
    } else if !not_ready.is_empty() {
        DependentState::NotReady(not_ready.join("; "))
    } else {
        DependentState::Ready
    };
    Ok((state, outcome))
}

/// Reconciles one object: its placement, what became of it, and whether
/// it was written (`Some(true)`), found as desired (`Some(false)`) or not
/// considered (`None`).
async fn reconcile_object(
    runtime: &DependentsRuntime,
    owner: &Owner,
    dependent: &Dependent,
    object: &Value,
) -> Result<(Placement, Member, Option<bool>), DependentsError> {
    let kind = &dependent.kind;
    let place = placement(object, kind, owner);
    // Asked before the body is built: an unchanged dependent whose cached
    // object was found matching costs a hash of its desired object.
    let memo = memoizable(dependent)
        .then(|| desired_hash(object, kind, owner, &dependent.key, dependent.keep));
    if let Some(hash) = memo
        && let Some(live) = runtime.matched_before(kind, &place, hash)
    {
        runtime.count(kind, "unchanged");
        return Ok((place, Member::Ready(live), Some(false)));
    }
    let mut body = match applied_at(object, &place, kind, owner, &dependent.key) {
        Ok(body) => body,
        Err(message) => {
            let failure = DependentFailure::new(FailureKind::InvalidDesired, message);
            return Ok((place, Member::Failed(failure), None));
        }
    };
    if dependent.keep {
        orphan::mark(&mut body);
    }
    let live = match runtime.read(kind, &place).await {
        Ok(live) => live,
        Err(error) => {
            let member = refused(dependent, &place, error)?;
            return Ok((place, member, None));
        }
    };
    if !dependent.precondition.holds(live.as_ref()) {
        return Ok((place, Member::Held, None));
    }
    if live
        .as_ref()
        .is_some_and(|l| l.pointer("/metadata/deletionTimestamp").is_some())
    {
        // An apply would not bring it back: wait until it is gone, then
        // create it again.
        let why = "being deleted; it is created again once gone".to_owned();
        return Ok((place, Member::NotReady(why), None));
    }
    if let Some(live) = &live
        && !owned_by(live, owner)
        && !dependent.adopt
    {
        runtime.count(kind, "failed");
        let member = not_owned(&place, owner);
        return Ok((place, member, None));
    }
    if dependent.create_only {
        return reconcile_created(runtime, owner, dependent, place, &body, live).await;
    }
    matching::prepare(&dependent.matching, &mut body, live.as_ref());
    let unchanged = match &live {
        Some(current) => {
            unchanged::already_matches(runtime, owner, dependent, &place, current, &body).await
        }
        None => false,
    };
    if unchanged && let Some(current) = live {
        runtime.count(kind, "unchanged");
        let member = readiness(dependent, current);
        if let (Some(hash), Member::Ready(LiveObject::Json(current))) = (memo, &member) {
            runtime.matched(&place, current, hash);
        }
        return Ok((place, member, Some(false)));
    }
    let written = match apply(runtime, dependent, &place, &body, live.as_ref()).await {
        Ok(written) => written,
        Err(error) => {
            runtime.count(kind, "failed");
            let member = refused(dependent, &place, error)?;
            return Ok((place, member, None));
        }
    };
    announce(runtime, owner, dependent, &place, live.is_none()).await;
    let Written {
        object,
        text,
        version,
    } = written;
    // A ready object is handed on as the answer's text, shared with our
    // remembered write: the converge holds no tree of it.
    let member = match readiness(dependent, object) {
        Member::Ready(_) => Member::Ready(LiveObject::Text(text)),
        other => other,
    };
    // What the server made of our apply matches it by construction (a
    // comparison would find it so, or learn the server's form of it and
    // then find it so): the echo of this write on the watch, and every
    // converge after it while neither changes, skip the comparison.
    if let (Some(hash), Some(version), Member::Ready(_)) = (memo, version, &member) {
        runtime.matched_at(&place, version, hash);
    }
    Ok((place, member, Some(true)))
}

/// A create-only object: created if absent, else only read (an adopted
/// one gets its ownership metadata, nothing else); readiness is the live
/// object's.
async fn reconcile_created(
    runtime: &DependentsRuntime,
    owner: &Owner,
    dependent: &Dependent,
    place: Placement,
    body: &Value,
    live: Option<Value>,
) -> Result<(Placement, Member, Option<bool>), DependentsError> {
    let kind = &dependent.kind;
    let (mut live, mut wrote) = match live {
        Some(live) => (live, false),
        None => match create_or_read(runtime, kind, &place, body).await {
            Ok(found) => found,
            Err(error) => {
                runtime.count(kind, "failed");
                let member = refused(dependent, &place, error)?;
                return Ok((place, member, None));
            }
        },
    };
    if wrote {
        announce(runtime, owner, dependent, &place, true).await;
    }
    if !owned_by(&live, owner) {
        // Someone else created it since it was read.
        if !dependent.adopt {
            runtime.count(kind, "failed");
            let member = not_owned(&place, owner);
            return Ok((place, member, None));
        }
        let ownership = ownership_only(body);
        live = match apply(runtime, dependent, &place, &ownership, Some(&live)).await {
            Ok(adopted) => adopted.object,
            Err(error) => {
                runtime.count(kind, "failed");
                let member = refused(dependent, &place, error)?;
                return Ok((place, member, None));
            }
        };
        announce(runtime, owner, dependent, &place, false).await;
        wrote = true;
    }
    if !wrote {
        runtime.count(kind, "unchanged");
    }
    let member = readiness(dependent, live);
    Ok((place, member, Some(wrote)))
}

/// The failure of an object that exists without being `owner`'s.
fn not_owned(place: &Placement, owner: &Owner) -> Member {
    Member::Failed(DependentFailure::new(
        FailureKind::NotOwned,
        format!(
            "{} exists and is not owned by {}; it is left alone (adopt() takes it over)",
            place.display(),
            owner.display()
        ),
    ))
}

/// Logs, counts and publishes one write of a dependent's object.
async fn announce(
    runtime: &DependentsRuntime,
    owner: &Owner,
    dependent: &Dependent,
    place: &Placement,
    created: bool,
) {
    runtime.count(&dependent.kind, "applied");
    let (reason, verb) = if created {
        ("Created", "created")
    } else {
        ("Updated", "updated")
    };
    tracing::info!(dependent = dependent.key, object = %place.display(), "{verb}");
    runtime
        .event(
            owner,
            reason,
            "Apply",
            place,
            format!("{verb} {} (dependent {})", place.display(), dependent.key),
        )
        .await;
}

/// What an apply wrote: the object the server answered, as JSON and as
/// its text (shared with the remembered write), and its version.
struct Written {
    object: Value,
    text: Arc<str>,
    version: Option<u64>,
}

/// Server-side applies `body`. A conflict with managers that only updated
/// the object (drift) is retried with `force`.
async fn apply(
    runtime: &DependentsRuntime,
    dependent: &Dependent,
    place: &Placement,
    body: &Value,
    live: Option<&Value>,
) -> Result<Written, kube::Error> {
    let params = PatchParams::apply(&runtime.field_manager);
    let params = if dependent.force {
        params.force()
    } else {
        params
    };
    let write = runtime.writing(place);
    let result = apply_text(runtime, &dependent.kind, place, &params, body).await;
    let result = match result {
        Err(kube::Error::Api(status)) if status.code == 409 && !dependent.force => {
            let managers = conflicting_managers(&status);
            if live.is_some_and(|l| only_updaters(l, &managers)) {
                tracing::info!(dependent = dependent.key, object = %place.display(), ?managers, "taking back fields changed by an update");
                apply_text(runtime, &dependent.kind, place, &params.force(), body).await
            } else {
                Err(kube::Error::Api(status))
            }
        }
        other => other,
    };
    let text = result?;
    let object: Value = serde_json::from_str(&text).map_err(kube::Error::SerdeError)?;
    let version = version_of(&object);
    let text: Arc<str> = text.into();
    runtime.wrote_text(place, text.clone(), version);
    write.finish(version);
    Ok(Written {
        object,
        text,
        version,
    })
}

/// One server-side apply of `body` at `place`, answered as the server's
/// text: parsed once by the caller, and remembered as it came (neither
/// decoded into a typed object, nor copied into a JSON tree and written
/// out again).
async fn apply_text(
    runtime: &DependentsRuntime,
    kind: &super::DependentKind,
    place: &Placement,
    params: &PatchParams,
    body: &Value,
) -> Result<String, kube::Error> {
    let path = DynamicObject::url_path(&kind.resource, place.namespace.as_deref());
    let mut request = kube::core::Request::new(path)
        .patch(&place.name, params, &Patch::Apply(body))
        .map_err(kube::Error::BuildRequest)?;
    // What kube's own `Api::patch` marks its requests with (metrics,
    // traces read it).
    request.extensions_mut().insert("patch");
    runtime.client.request_text(request).await
}

/// A refusal by the server is a failed dependent with its kind (a
/// conflict naming the managers, forbidden, or refused with the code) and
/// message; an unavailable server is an error, retried without blaming
/// the dependent.
fn refused(
    dependent: &Dependent,
    place: &Placement,
    error: kube::Error,
) -> Result<Member, DependentsError> {
    match error {
        kube::Error::Api(status) if (400..500).contains(&status.code) && status.code != 429 => {
            let managers = conflicting_managers(&status);
            let failure = if status.code == 409 && !managers.is_empty() {
                let message = format!(
                    "{}: conflict with field manager {} ({}); force() takes their fields",
                    place.display(),
                    managers.join(", "),
                    status.message
                );
                DependentFailure::new(FailureKind::Conflict { managers }, message)
            } else {
                let message = format!("{}: {} ({})", place.display(), status.message, status.code);
                let kind = if status.code == 403 {
                    FailureKind::Forbidden
                } else {
                    FailureKind::Refused { code: status.code }
                };
                DependentFailure::new(kind, message)
            };
            Ok(Member::Failed(failure))
        }
        source => Err(DependentsError::Api {
            key: dependent.key.clone(),
            object: place.display(),
            source,
        }),
    }
}

/// The readiness of `live` as the dependent decides it.
fn readiness(dependent: &Dependent, live: Value) -> Member {
    let readiness = match &dependent.ready {
        ReadyCheck::BuiltIn => builtin_readiness(
            &dependent.kind.resource.group,
            &dependent.kind.resource.kind,
            &live,
        ),
        ReadyCheck::Exists => Readiness::Ready,
        ReadyCheck::Custom(check) => check(&live),
    };
    match readiness {
        Readiness::Ready => Member::Ready(LiveObject::Json(live)),
        Readiness::Pending(why) => Member::NotReady(why),
        Readiness::Failed(why) => {
            Member::Failed(DependentFailure::new(FailureKind::ReadinessFailed, why))
        }
    }
}

/// Whether a match of `dependent`'s objects may be remembered (see
/// [`DependentsRuntime::matched_before`]): whether the outcome of a
/// converge depends on nothing but the live object and the desired body.
/// Not with a precondition, a readiness check or a matcher of the user's
/// (code that may look at more), nor for a create-only dependent.
fn memoizable(dependent: &Dependent) -> bool {
    matches!(dependent.precondition, Precondition::Always(true))
        && !matches!(dependent.ready, ReadyCheck::Custom(_))
        && !dependent.create_only
        && dependent.matching.matcher.is_none()
}

/// The placements the set's active dependents desire.
fn desired_placements(set: &DesiredSet, owner: &Owner) -> HashSet<Placement> {
    set.dependents
        .iter()
        .filter(|d| d.active)
        .flat_map(|d| d.objects.iter().map(|o| placement(o, &d.kind, owner)))
        .collect()
}

/// Deletes `owner`'s labelled objects of the set's kinds that no active
/// dependent desires, or releases those marked kept. Returns them (deleted,
/// released). With `pruned_before` (the set has the shape of the owner's
/// last successful prune), kinds without a cache are not listed.
async fn prune(
    runtime: &DependentsRuntime,
    owner: &Owner,
    set: &DesiredSet,
    pruned_before: bool,
) -> Result<(Vec<String>, Vec<String>), DependentsError> {
    let desired = desired_placements(set, owner);
    // Earlier attempts of an active per-attempt dependent stay.
    let attempts: HashSet<&str> = set
        .dependents
        .iter()
        // Earlier attempts stay, and so do a derived dependent's objects
        // while it could not be computed.
        .filter(|d| d.active && (d.per_attempt || d.is_derived()))
        .map(|d| d.key.as_str())
        .collect();
    let earlier_attempt = |live: &ObjectMeta| {
        live.labels
            .as_ref()
            .and_then(|l| l.get(DEPENDENT_LABEL))
            .is_some_and(|key| attempts.contains(key.as_str()))
    };
    let kinds: Vec<_> = set
        .kinds()
        .into_iter()
        .filter(|kind| !pruned_before || runtime.has_cache(kind, owner))
        .collect();
    let lists = join_all(kinds.iter().map(|kind| list_owned(runtime, owner, kind))).await;
    let mut doomed = Vec::new();
    for (kind, list) in kinds.iter().zip(lists) {
        for live in list? {
            let place = live_placement(kind, &live);
            if !desired.contains(&place) && !earlier_attempt(&live) {
                doomed.push((kind, place, live));
            }
        }
    }
    let removals = join_all(doomed.iter().map(|(kind, place, live)| async move {
        if orphan::is_kept_meta(live) {
            orphan::release(
                runtime,
                owner,
                kind,
                place,
                &json!({ "metadata": live.meta() }),
            )
            .await
            .map(|()| true)
        } else {
            delete(runtime, kind, place).await.map(|()| false)
        }
    }))
    .await;
    let (mut pruned, mut released) = (Vec::new(), Vec::new());
    for ((kind, place, _), removal) in doomed.iter().zip(removals) {
        match removal {
            Ok(true) => released.push(place.display()),
            Ok(false) => {
                let shown = place.display();
                runtime.count(kind, "pruned");
                tracing::info!(object = %shown, "pruned");
                runtime
                    .event(
                        owner,
                        "Pruned",
                        "Prune",
                        place,
                        format!("deleted {shown}: no longer desired"),
                    )
                    .await;
                pruned.push(shown);
            }
            Err(source) => {
                return Err(DependentsError::Api {
                    key: place.name.clone(),
                    object: place.display(),
                    source,
                });
            }
        }
    }
    Ok((pruned, released))
}

/// The metadata of `owner`'s labelled objects of `kind` (in its namespace
/// when `kind` is namespaced and the owner is too), from the kind's cache
/// if it has one: all that pruning and teardown read of them.
pub(crate) async fn list_owned(
    runtime: &DependentsRuntime,
    owner: &Owner,
    kind: &super::DependentKind,
) -> Result<Vec<OwnedMeta>, DependentsError> {
    let namespace = if kind.namespaced {
        owner.namespace.as_deref()
    } else {
        None
    };
    if let Some(cached) = runtime.cached_owned(kind, namespace, owner) {
        return Ok(cached);
    }
    let api = runtime.api(kind, namespace);
    let list = api
        .list(&ListParams::default().labels(&selector(owner)))
        .await
        .map_err(|source| DependentsError::List {
            kind: kind.display(),
            source,
        })?;
    Ok(list
        .items
        .into_iter()
        .map(|o| OwnedMeta::Owned(Box::new(o.metadata)))
        .collect())
}

/// Deletes the object at `place` (in the background); already gone is fine.
pub(crate) async fn delete(
    runtime: &DependentsRuntime,
    kind: &super::DependentKind,
    place: &Placement,
) -> Result<(), kube::Error> {
    let api = runtime.api(kind, place.namespace.as_deref());
    match api.delete(&place.name, &DeleteParams::background()).await {
        Ok(response) => {
            let object = response.left().and_then(|o| serde_json::to_value(o).ok());
            runtime.deleted(place, object.as_ref());
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 404 => {
            runtime.deleted(place, None);
            Ok(())
        }
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dependents::Dependent;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn failure_of(code: u16, message: &str) -> Result<DependentFailure, String> {
        let cm = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some("c".into()),
                ..Default::default()
            },
            ..ConfigMap::default()
        };
        let dependent = Dependent::new("config", &cm);
        let place = Placement {
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: Some("ns".into()),
            name: "c".into(),
        };
        let status = kube::core::Status {
            code,
            message: message.into(),
            ..kube::core::Status::default()
        };
        match refused(&dependent, &place, kube::Error::Api(Box::new(status))) {
            Ok(Member::Failed(failure)) => Ok(failure),
            Ok(_) => Err("not a failure".into()),
            Err(error) => Err(error.to_string()),
        }
    }

    #[test]
    fn a_refusal_says_its_kind_and_an_unavailable_server_is_an_error() {
        let invalid = failure_of(422, "spec.template: field is immutable").unwrap();
        assert_eq!(invalid.kind(), &FailureKind::Refused { code: 422 });
        assert!(
            invalid.message().contains("field is immutable") && invalid.message().contains("422")
        );
        assert_eq!(
            failure_of(403, "forbidden").unwrap().kind(),
            &FailureKind::Forbidden
        );
        let conflict = failure_of(
            409,
            r#"Apply failed with 1 conflict: conflict with "helm": .data.x"#,
        )
        .unwrap();
        assert_eq!(
            conflict.kind(),
            &FailureKind::Conflict {
                managers: vec!["helm".into()]
            }
        );
        assert!(conflict.is_conflict() && conflict.message().contains("force()"));
        assert_eq!(
            failure_of(409, "the object has been modified")
                .unwrap()
                .kind(),
            &FailureKind::Refused { code: 409 }
        );
        for unavailable in [429, 500, 503] {
            assert!(
                failure_of(unavailable, "try later").is_err(),
                "{unavailable}"
            );
        }
    }
}
