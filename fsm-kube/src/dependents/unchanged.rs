//! Whether an object's apply can be skipped: the comparison without the
//! server ([`matching`](super::matching)), and when it cannot tell, a
//! dry-run apply whose answer is remembered in the runtime. The rules are
//! documented on [`converge`](super::converge), under *When nothing is
//! written*.

use kube::api::{Patch, PatchParams};
use serde_json::Value;

use super::diff::{first_difference, holds};
use super::matching::{
    LearnedKey, Verdict, body_hash, normal_form, remove_paths, unchanged_by_apply, verdict,
};
use super::object::{Owner, Placement};
use super::runtime::DependentsRuntime;
use super::set::Dependent;

/// Whether `live` already matches `body` (prepared), so that the apply can
/// be skipped. The comparison without the server comes first; only when it
/// cannot tell is the normal form learned for this body looked up (keyed
/// by the hash of the body without its ignored paths, which
/// [`prepare`](super::matching::prepare) does not change), and then one
/// dry-run apply sent (no write); a dry run that fails says "differs", and
/// the real apply reports why.
pub(crate) async fn already_matches(
    runtime: &DependentsRuntime,
    owner: &Owner,
    dependent: &Dependent,
    place: &Placement,
    live: &Value,
    body: &Value,
) -> bool {
    let matching = &dependent.matching;
    match verdict(matching, live, body, &runtime.field_manager, None) {
        Verdict::Matches => return true,
        Verdict::Differs => {
            log_difference(dependent, place, live, body);
            return false;
        }
        Verdict::AskServer => log_difference(dependent, place, live, body),
    }
    let compared_hash = body_hash(&matching.compared(body));
    let key = LearnedKey {
        owner_uid: owner.uid.clone(),
        dependent: dependent.key.clone(),
        object: place.display(),
    };
    if runtime
        .learned
        .form(&key, compared_hash)
        .is_some_and(|form| holds(live, &form))
    {
        return true;
    }
    let api = runtime.api(&dependent.kind, place.namespace.as_deref());
    let mut params = PatchParams::apply(&runtime.field_manager).dry_run();
    if dependent.force {
        params = params.force();
    }
    let answer = api.patch(&place.name, &params, &Patch::Apply(body)).await;
    let dry_run = match answer.map(serde_json::to_value) {
        Ok(Ok(dry_run)) => dry_run,
        Ok(Err(error)) => {
            tracing::debug!(object = %place.display(), %error, "the dry run's answer could not be read");
            return false;
        }
        Err(error) => {
            tracing::debug!(object = %place.display(), %error, "the dry run failed; applying");
            return false;
        }
    };
    if !unchanged_by_apply(live, &dry_run) {
        runtime.learned.forget(&key);
        return false;
    }
    let mut form = normal_form(&dry_run, body);
    remove_paths(&mut form, &matching.ignored);
    tracing::debug!(dependent = dependent.key, object = %place.display(), "the server's normal form matches: no write, remembered");
    runtime.learned.remember(key, compared_hash, form);
    true
}

/// Says (at debug level) where the live object differs from the body, or
/// that it holds the body but an apply would drop fields we own.
fn log_difference(dependent: &Dependent, place: &Placement, live: &Value, body: &Value) {
    if tracing::enabled!(tracing::Level::DEBUG) {
        let at = first_difference(live, &dependent.matching.compared(body));
        let resource_version = live.pointer("/metadata/resourceVersion");
        tracing::debug!(dependent = dependent.key, object = %place.display(), ?at, ?resource_version,
            "the live object differs from the desired one (at: the first field that differs; none: an apply would drop fields we own)");
    }
}
