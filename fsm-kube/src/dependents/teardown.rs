//! Tearing a desired set down: delete in reverse dependency order, each
//! dependent once those that depend on it are gone (their delete
//! postconditions hold).

use futures::future::join_all;
use kube::Resource;
use serde_json::Value;

use super::converge::{delete, list_owned};
use super::error::DependentsError;
use super::object::{
    DEPENDENT_LABEL, Owner, Placement, labelled_for, live_placement, owned_by, placement,
};
use super::order;
use super::orphan;
use super::report::{Teardown, TeardownState};
use super::runtime::DependentsRuntime;
use super::set::{Dependent, DesiredSet};

/// Deletes the dependents of `owner` in reverse dependency order, as far
/// as it can go now: for a machine's `cleanup` or `compensate`, called
/// again until [`Teardown::is_done`].
///
/// # Expected flow
/// A dependent is deleted once every dependent that depends on it is gone;
/// it is gone when its [delete
/// postcondition](super::Dependent::delete_postcondition) holds (default:
/// the object no longer exists), checked with a fresh read right after the
/// delete. Independent dependents are deleted concurrently. Once all are
/// gone, other objects carrying the owner's labels (of the set's kinds)
/// are deleted too. Inactive dependents are torn down like the others;
/// a [derived](super::Dependent::derived) one (its object is computed only
/// while converging) by its label: the owner's objects of its kind
/// labelled with its key.
///
/// # Guarantees
/// Only objects owned by `owner` (owner reference) or carrying its labels
/// are deleted; an object of the same name someone else owns is left
/// alone and counts as gone.
///
/// # Errors
/// A refused deletion is [`TeardownState::Failed`]; an unavailable server
/// is [`DependentsError::Api`] or [`DependentsError::List`].
pub async fn teardown<K>(
    runtime: &DependentsRuntime,
    owner: &K,
    set: &DesiredSet,
) -> Result<Teardown, DependentsError>
where
    K: Resource<DynamicType = ()>,
{
    teardown_for(runtime, &Owner::of(owner)?, set).await
}

/// [`teardown`] for an owner already described.
pub(crate) async fn teardown_for(
    runtime: &DependentsRuntime,
    owner: &Owner,
    set: &DesiredSet,
) -> Result<Teardown, DependentsError> {
    // The owner is going: a later converge (if any) lists again.
    runtime.pruned.forget(&owner.uid);
    let required_by = order::reverse(&set.requires);
    let mut report = Teardown::default();
    let (states, removed) = order::walk(
        &required_by,
        vec![None; set.len()],
        |state| matches!(state, TeardownState::Gone),
        |blockers| TeardownState::Waiting(set.keys_of(blockers)),
        |i| tear_down(runtime, owner, &set.dependents[i]),
    )
    .await?;
    for removed in removed {
        report.deleted.extend(removed.deleted);
        report.orphaned.extend(removed.orphaned);
    }
    report.dependents = set
        .dependents
        .iter()
        .zip(states)
        .map(|(d, s)| {
            (
                d.key.clone(),
                s.unwrap_or(TeardownState::Waiting(Vec::new())),
            )
        })
        .collect();
    if report.is_done() {
        for kind in set.kinds() {
            for live in list_owned(runtime, owner, &kind).await? {
                if live.deletion_timestamp.is_some() {
                    continue;
                }
                let place = live_placement(&kind, &live);
                let kept = orphan::is_kept_meta(&live);
                let removal = if kept {
                    let live = serde_json::json!({ "metadata": live.meta() });
                    orphan::release(runtime, owner, &kind, &place, &live).await
                } else {
                    delete(runtime, &kind, &place).await
                };
                removal.map_err(|source| DependentsError::Api {
                    key: place.name.clone(),
                    object: place.display(),
                    source,
                })?;
                if kept {
                    report.orphaned.push(place.display());
                } else {
                    runtime.count(&kind, "deleted");
                    report.deleted.push(place.display());
                }
            }
        }
    }
    Ok(report)
}

/// What tearing down one dependent removed, as `Kind namespace/name`.
#[derive(Default)]
struct Removed {
    deleted: Vec<String>,
    orphaned: Vec<String>,
}

/// What became of one object of a dependent being torn down.
enum Removal {
    /// Nothing of the owner's was there, or its deletion was already
    /// under way.
    Nothing,
    /// A delete was sent.
    Deleted,
    /// It was kept, and released from the owner.
    Released,
}

/// Deletes (or releases) the objects of one dependent and checks its
/// postcondition.
async fn tear_down(
    runtime: &DependentsRuntime,
    owner: &Owner,
    dependent: &Dependent,
) -> Result<(TeardownState, Removed), DependentsError> {
    let places = places_of(runtime, owner, dependent).await?;
    let results = join_all(places.into_iter().map(|place| async move {
        let outcome = tear_down_object(runtime, owner, dependent, &place).await;
        (place, outcome)
    }))
    .await;
    let (mut removed, mut deleting, mut failed) = (Removed::default(), Vec::new(), Vec::new());
    for (place, outcome) in results {
        match outcome {
            Ok((gone, removal)) => {
                match removal {
                    Removal::Nothing => {}
                    Removal::Deleted => removed.deleted.push(place.display()),
                    Removal::Released => removed.orphaned.push(place.display()),
                }
                if !gone {
                    deleting.push(place.display());
                }
            }
            Err(kube::Error::Api(status))
                if (400..500).contains(&status.code) && status.code != 429 =>
            {
                failed.push(format!(
                    "{}: {} ({})",
                    place.display(),
                    status.message,
                    status.code
                ));
            }
            Err(source) => {
                return Err(DependentsError::Api {
                    key: dependent.key.clone(),
                    object: place.display(),
                    source,
                });
            }
        }
    }
    let state = if !failed.is_empty() {
        TeardownState::Failed(failed.join("; "))
    } else if !deleting.is_empty() {
        TeardownState::Deleting(format!(
            "delete postcondition not met for {}",
            deleting.join(", ")
        ))
    } else {
        TeardownState::Gone
    };
    Ok((state, removed))
}

/// Where a dependent's objects are: those it names, or for a
/// [derived](super::Dependent::derived) one (whose object is only known
/// during a converge) the owner's objects of its kind labelled with its
/// key.
async fn places_of(
    runtime: &DependentsRuntime,
    owner: &Owner,
    dependent: &Dependent,
) -> Result<Vec<Placement>, DependentsError> {
    if !dependent.is_derived() {
        return Ok(dependent
            .objects
            .iter()
            .map(|object| placement(object, &dependent.kind, owner))
            .collect());
    }
    Ok(list_owned(runtime, owner, &dependent.kind)
        .await?
        .iter()
        .filter(|live| {
            live.labels
                .as_ref()
                .and_then(|l| l.get(DEPENDENT_LABEL))
                .map(String::as_str)
                == Some(dependent.key.as_str())
        })
        .map(|live| live_placement(&dependent.kind, live))
        .collect())
}

/// Deletes one object if it is the owner's (releases it if kept); returns
/// whether the postcondition holds afterwards (a released object is done
/// with: its postcondition is not asked) and what was sent.
async fn tear_down_object(
    runtime: &DependentsRuntime,
    owner: &Owner,
    dependent: &Dependent,
    place: &Placement,
) -> Result<(bool, Removal), kube::Error> {
    let api = runtime.api(&dependent.kind, place.namespace.as_deref());
    let live = fresh(&api, &place.name).await?;
    let ours = live
        .as_ref()
        .is_some_and(|l| owned_by(l, owner) || labelled_for(l, owner));
    let postcondition = |live: Option<&Value>| match &dependent.delete_postcondition {
        Some(done) => done(live),
        None => live.is_none(),
    };
    let Some(live) = live.filter(|_| ours) else {
        // Absent, or someone else's: nothing of ours to wait for.
        return Ok((true, Removal::Nothing));
    };
    let mut removal = Removal::Nothing;
    if live.pointer("/metadata/deletionTimestamp").is_none() {
        if dependent.keep || orphan::is_kept(&live) {
            orphan::release(runtime, owner, &dependent.kind, place, &live).await?;
            return Ok((true, Removal::Released));
        }
        delete(runtime, &dependent.kind, place).await?;
        runtime.count(&dependent.kind, "deleted");
        runtime
            .event(
                owner,
                "Deleted",
                "Delete",
                place,
                format!("deleted {} (dependent {})", place.display(), dependent.key),
            )
            .await;
        removal = Removal::Deleted;
    }
    let after = fresh(&api, &place.name).await?;
    Ok((postcondition(after.as_ref()), removal))
}

/// The object as the server has it now (teardown does not trust a cache:
/// it must see its own deletion).
async fn fresh(
    api: &kube::Api<kube::api::DynamicObject>,
    name: &str,
) -> Result<Option<Value>, kube::Error> {
    Ok(api
        .get_opt(name)
        .await?
        .and_then(|o| serde_json::to_value(o).ok()))
}
