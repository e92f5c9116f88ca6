//! Converging a desired set: apply in dependency order, independent
//! dependents concurrently, skip what is already as desired, then prune
//! what is no longer desired.

use std::collections::HashSet;

use futures::future::join_all;
use kube::Resource;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::Value;

use super::create_only::{create_or_read, ownership_only};
use super::diff::{conflicting_managers, only_updaters, up_to_date};
use super::error::DependentsError;
use super::object::{DEPENDENT_LABEL, Owner, Placement, applied, owned_by, placement, selector};
use super::order;
use super::orphan;
use super::pruned::PruneShape;
use super::readiness::{Readiness, builtin_readiness};
use super::report::{Convergence, DependentState};
use super::runtime::DependentsRuntime;
use super::set::{Dependent, DesiredSet, ReadyCheck};

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
/// An apply is skipped when both hold:
/// - every field of the applied configuration is in the live object with
///   the same value (objects compared key by key, lists element by element
///   and of the same length, owner references by UID as the server merges
///   them);
/// - every field the field manager's `Apply` entry of `managedFields` owns
///   is still in the configuration, so that a field we stopped applying is
///   removed by the next apply.
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
/// The comparison sees no defaults: a value the server normalises (a
/// quantity `1000m` read back as `1`) differs on every read, so its
/// dependent is applied on every converge (a no-op for the server, but a
/// request). Inside lists, ownership is compared at the list: an element
/// someone else added to a list we apply makes the lengths differ, and the
/// list is applied again each time.
///
/// # Errors
/// The server refusing a dependent (422 invalid, 403, a conflict) is not
/// an error: the dependent is [`DependentState::Failed`] with the server's
/// message. [`DependentsError::Owner`] when `owner` was not read from the
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
    let shape = PruneShape::of(set, owner);
    let pruned_before = runtime.pruned.is_current(&owner.uid, &shape);
    if !pruned_before {
        // Forgotten before the first apply: if this converge fails half
        // way, the next one lists again.
        runtime.pruned.forget(&owner.uid);
    }
    let inactive = set
        .dependents
        .iter()
        .map(|d| (!d.active).then_some(DependentState::Inactive))
        .collect();
    let (states, outcomes) = order::walk(
        &set.requires,
        inactive,
        DependentState::satisfies,
        |blockers| DependentState::Waiting(set.keys_of(blockers)),
        |i| reconcile_dependent(runtime, owner, &set.dependents[i]),
    )
    .await?;
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
    (report.pruned, report.orphaned) = prune(runtime, owner, set, pruned_before).await?;
    runtime.pruned.remember(&owner.uid, shape);
    Ok(report)
}

/// What reconciling one dependent did.
#[derive(Default)]
struct Outcome {
    applied: Vec<String>,
    unchanged: u32,
}

/// One object of a dependent, reconciled.
enum Member {
    Ready,
    NotReady(String),
    Held,
    Failed(String),
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
    let (mut not_ready, mut held, mut failed) = (Vec::new(), false, Vec::new());
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
            Member::Ready => {}
            Member::NotReady(why) => not_ready.push(name(why)),
            Member::Held => held = true,
            Member::Failed(why) => failed.push(name(why)),
        }
    }
    let state = if !failed.is_empty() {
        DependentState::Failed(failed.join("; "))
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
    let mut body = match applied(object, kind, owner, &dependent.key) {
        Ok(body) => body,
        Err(message) => return Ok((place, Member::Failed(message), None)),
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
    if let Some(live) = live.as_ref()
        && up_to_date(live, &body, &runtime.field_manager)
    {
        runtime.count(kind, "unchanged");
        let member = readiness(dependent, live);
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
    let member = readiness(dependent, &written);
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
            Ok(adopted) => adopted,
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
    let member = readiness(dependent, &live);
    Ok((place, member, Some(wrote)))
}

/// The failure of an object that exists without being `owner`'s.
fn not_owned(place: &Placement, owner: &Owner) -> Member {
    Member::Failed(format!(
        "{} exists and is not owned by {}; it is left alone (adopt() takes it over)",
        place.display(),
        owner.display()
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

/// Server-side applies `body`. A conflict with managers that only updated
/// the object (drift) is retried with `force`.
async fn apply(
    runtime: &DependentsRuntime,
    dependent: &Dependent,
    place: &Placement,
    body: &Value,
    live: Option<&Value>,
) -> Result<Value, kube::Error> {
    let api = runtime.api(&dependent.kind, place.namespace.as_deref());
    let params = PatchParams::apply(&runtime.field_manager);
    let params = if dependent.force {
        params.force()
    } else {
        params
    };
    let result = api.patch(&place.name, &params, &Patch::Apply(body)).await;
    let result = match result {
        Err(kube::Error::Api(status)) if status.code == 409 && !dependent.force => {
            let managers = conflicting_managers(&status);
            if live.is_some_and(|l| only_updaters(l, &managers)) {
                tracing::info!(dependent = dependent.key, object = %place.display(), ?managers, "taking back fields changed by an update");
                api.patch(&place.name, &params.force(), &Patch::Apply(body))
                    .await
            } else {
                Err(kube::Error::Api(status))
            }
        }
        other => other,
    };
    let written = serde_json::to_value(result?).unwrap_or(Value::Null);
    runtime.wrote(place, &written);
    Ok(written)
}

/// A refusal by the server is a failed dependent with its message; an
/// unavailable server is an error, retried without blaming the dependent.
fn refused(
    dependent: &Dependent,
    place: &Placement,
    error: kube::Error,
) -> Result<Member, DependentsError> {
    match error {
        kube::Error::Api(status) if (400..500).contains(&status.code) && status.code != 429 => {
            let managers = conflicting_managers(&status);
            let message = if status.code == 409 && !managers.is_empty() {
                format!(
                    "{}: conflict with field manager {} ({}); force() takes their fields",
                    place.display(),
                    managers.join(", "),
                    status.message
                )
            } else {
                format!("{}: {} ({})", place.display(), status.message, status.code)
            };
            Ok(Member::Failed(message))
        }
        source => Err(DependentsError::Api {
            key: dependent.key.clone(),
            object: place.display(),
            source,
        }),
    }
}

/// The readiness of `live` as the dependent decides it.
fn readiness(dependent: &Dependent, live: &Value) -> Member {
    let readiness = match &dependent.ready {
        ReadyCheck::BuiltIn => builtin_readiness(
            &dependent.kind.resource.group,
            &dependent.kind.resource.kind,
            live,
        ),
        ReadyCheck::Exists => Readiness::Ready,
        ReadyCheck::Custom(check) => check(live),
    };
    match readiness {
        Readiness::Ready => Member::Ready,
        Readiness::Pending(why) => Member::NotReady(why),
        Readiness::Failed(why) => Member::Failed(why),
    }
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
        .filter(|d| d.active && d.per_attempt)
        .map(|d| d.key.as_str())
        .collect();
    let earlier_attempt = |live: &Value| {
        live.pointer("/metadata/labels")
            .and_then(|l| l.get(DEPENDENT_LABEL))
            .and_then(Value::as_str)
            .is_some_and(|key| attempts.contains(key))
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
        if orphan::is_kept(live) {
            orphan::release(runtime, owner, kind, place, live)
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

/// Where a live object of `kind` (listed or cached) is.
pub(crate) fn live_placement(kind: &super::DependentKind, live: &Value) -> Placement {
    Placement {
        group: kind.resource.group.clone(),
        kind: kind.resource.kind.clone(),
        namespace: live
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_owned),
        name: super::set::object_name(live).to_owned(),
    }
}

/// `owner`'s labelled objects of `kind` (in its namespace when `kind` is
/// namespaced and the owner is too), from the kind's cache if it has one.
pub(crate) async fn list_owned(
    runtime: &DependentsRuntime,
    owner: &Owner,
    kind: &super::DependentKind,
) -> Result<Vec<Value>, DependentsError> {
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
        .filter_map(|o| serde_json::to_value(o).ok())
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
