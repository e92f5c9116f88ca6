//! Whether an object's apply can be skipped: the comparison without the
//! server ([`matching`](super::matching)), and when it cannot tell, a
//! dry-run apply whose answer is remembered in the runtime. The rules are
//! documented on [`converge`](super::converge), under *When nothing is
//! written*.

use kube::api::{Patch, PatchParams};
use serde_json::Value;

use super::matching::{
    LearnedKey, Verdict, body_hash, normal_form, remove_paths, unchanged_by_apply, verdict,
};
use super::object::{Owner, Placement};
use super::runtime::DependentsRuntime;
use super::set::Dependent;

/// The hash what is learned is keyed by: of the body before
/// [`prepare`](super::matching::prepare).
pub(crate) fn desired_hash(body: &Value) -> u64 {
    body_hash(body)
}

/// Whether `live` already matches `body` (prepared), so that the apply can
/// be skipped. `desired_hash` is the hash of the body before [`prepare`]:
/// what is learned is learned for it. May send one dry-run apply (no
/// write); a dry run that fails says "differs", and the real apply
/// reports why.
pub(crate) async fn already_matches(
    runtime: &DependentsRuntime,
    owner: &Owner,
    dependent: &Dependent,
    place: &Placement,
    live: &Value,
    body: &Value,
    desired_hash: u64,
) -> bool {
    let key = LearnedKey {
        owner_uid: owner.uid.clone(),
        dependent: dependent.key.clone(),
        object: place.display(),
    };
    let learned = runtime.learned.form(&key, desired_hash);
    let matching = &dependent.matching;
    match verdict(
        matching,
        live,
        body,
        &runtime.field_manager,
        learned.as_ref(),
    ) {
        Verdict::Matches => return true,
        Verdict::Differs => {
            runtime.learned.forget(&key);
            return false;
        }
        Verdict::AskServer => {}
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
    runtime.learned.remember(key, desired_hash, form);
    true
}
