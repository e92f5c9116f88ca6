//! Whether a dependent's live object already matches what we would apply,
//! so that the apply is skipped: the ignore paths, the dependent's own
//! matcher, the structural comparison ([`diff`](super::diff)) and, when
//! that says "differs", a dry-run apply whose answer is remembered
//! ([`learned`]). The rules are documented on
//! [`converge`](super::converge), under *When nothing is written*.

mod ignore;
mod learned;
mod server_form;

use std::sync::Arc;

use kube::api::{Patch, PatchParams};
use serde_json::Value;

use super::diff::{holds, stops_nothing};
use super::object::{Owner, Placement};
use super::runtime::DependentsRuntime;
use super::set::Dependent;

pub(crate) use ignore::IgnorePath;
pub(crate) use learned::LearnedForms;

use ignore::{keep_live_values, remove_paths};
use learned::{LearnedKey, body_hash};
use server_form::{normal_form, unchanged_by_apply};

/// A dependent's own matcher: `(desired, live) -> matches`.
pub(crate) type MatchFn = Arc<dyn Fn(&Value, &Value) -> bool + Send + Sync>;

/// How one dependent decides that its live object matches.
#[derive(Clone)]
pub(crate) struct Matching {
    /// The ignore paths as given (parsed when the set is built).
    pub(crate) ignore_given: Vec<String>,
    /// The parsed ignore paths.
    pub(crate) ignored: Vec<IgnorePath>,
    /// The dependent's matcher, replacing the comparison of values.
    pub(crate) matcher: Option<MatchFn>,
    /// Whether a difference is checked with a dry-run apply.
    pub(crate) dry_run: bool,
}

impl Default for Matching {
    fn default() -> Self {
        Matching {
            ignore_given: Vec::new(),
            ignored: Vec::new(),
            matcher: None,
            dry_run: true,
        }
    }
}

impl Matching {
    /// Parses the given ignore paths.
    ///
    /// # Errors
    /// The first path that does not parse, and why.
    pub(crate) fn parse_ignored(&mut self) -> Result<(), (String, String)> {
        self.ignored = self
            .ignore_given
            .iter()
            .map(|p| IgnorePath::parse(p).map_err(|why| (p.clone(), why)))
            .collect::<Result<_, _>>()?;
        Ok(())
    }
}

/// What the comparison without the server concluded.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Matches,
    Differs,
    AskServer,
}

/// Prepares `body` for an apply onto `live`: ignored fields take the live
/// values (so an apply leaves them as someone set them).
pub(crate) fn prepare(dependent: &Dependent, body: &mut Value, live: Option<&Value>) {
    if let Some(live) = live {
        keep_live_values(body, live, &dependent.matching.ignored);
    }
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
    match verdict(
        dependent,
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
    remove_paths(&mut form, &dependent.matching.ignored);
    tracing::debug!(dependent = dependent.key, object = %place.display(), "the server's normal form matches: no write, remembered");
    runtime.learned.remember(key, desired_hash, form);
    true
}

/// The hash what is learned is keyed by.
pub(crate) fn desired_hash(body: &Value) -> u64 {
    body_hash(body)
}

/// The decision without the server: a field we stopped applying differs;
/// then the dependent's matcher decides if it has one; else the live
/// object holding the body's values (ignored paths left out), or the
/// learned normal form, matches; else the server is asked (unless the
/// dependent turned dry runs off).
fn verdict(
    dependent: &Dependent,
    live: &Value,
    body: &Value,
    manager: &str,
    learned: Option<&Value>,
) -> Verdict {
    let matching = &dependent.matching;
    if !stops_nothing(live, body, manager) {
        return Verdict::Differs;
    }
    if let Some(matcher) = &matching.matcher {
        return if matcher(body, live) {
            Verdict::Matches
        } else {
            Verdict::Differs
        };
    }
    let mut compared = body.clone();
    remove_paths(&mut compared, &matching.ignored);
    if holds(live, &compared) || learned.is_some_and(|form| holds(live, form)) {
        Verdict::Matches
    } else if matching.dry_run {
        Verdict::AskServer
    } else {
        Verdict::Differs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use serde_json::json;

    fn dependent() -> Dependent {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        Dependent::new("c", &cm)
    }

    fn parsed(mut d: Dependent) -> Dependent {
        d.matching.parse_ignored().unwrap();
        d
    }

    #[test]
    fn equal_values_match_and_a_difference_asks_the_server_unless_turned_off() {
        let live = json!({"data": {"cpu": "1"}});
        let d = dependent();
        assert_eq!(
            verdict(&d, &live, &json!({"data": {"cpu": "1"}}), "op", None),
            Verdict::Matches
        );
        let normalised = json!({"data": {"cpu": "1000m"}});
        assert_eq!(
            verdict(&d, &live, &normalised, "op", None),
            Verdict::AskServer
        );
        let off = dependent().dry_run_compare(false);
        assert_eq!(
            verdict(&off, &live, &normalised, "op", None),
            Verdict::Differs
        );
    }

    #[test]
    fn a_learned_form_matches_while_the_live_object_holds_it() {
        let d = dependent();
        let body = json!({"data": {"cpu": "1000m"}});
        let form = json!({"data": {"cpu": "1"}});
        assert_eq!(
            verdict(&d, &json!({"data": {"cpu": "1"}}), &body, "op", Some(&form)),
            Verdict::Matches
        );
        assert_eq!(
            verdict(&d, &json!({"data": {"cpu": "2"}}), &body, "op", Some(&form)),
            Verdict::AskServer
        );
    }

    #[test]
    fn ignored_paths_are_left_out_of_the_comparison() {
        let d = parsed(dependent().ignore("/spec/replicas"));
        let live = json!({"spec": {"replicas": 5, "image": "a"}});
        let body = json!({"spec": {"replicas": 1, "image": "a"}});
        assert_eq!(verdict(&d, &live, &body, "op", None), Verdict::Matches);
        let mut prepared = body.clone();
        prepare(&d, &mut prepared, Some(&live));
        assert_eq!(
            prepared["spec"]["replicas"], 5,
            "an apply keeps the live value"
        );
        let mut created = body.clone();
        prepare(&d, &mut created, None);
        assert_eq!(
            created["spec"]["replicas"], 1,
            "a create applies the desired value"
        );
    }

    #[test]
    fn the_matcher_decides_but_a_field_we_stopped_applying_still_differs() {
        let d = dependent().matcher(|desired: &Value, live: &Value| {
            desired["data"]["version"] == live["data"]["version"]
        });
        let live = json!({"data": {"version": "1", "noise": "x"},
            "metadata": {"managedFields": [{"manager": "op", "operation": "Apply",
                "fieldsV1": {"f:data": {"f:version": {}, "f:old": {}}}}]}});
        let body = json!({"data": {"version": "1", "noise": "y"}});
        assert_eq!(verdict(&d, &live, &body, "someone", None), Verdict::Matches);
        assert_eq!(
            verdict(
                &d,
                &live,
                &json!({"data": {"version": "2"}}),
                "someone",
                None
            ),
            Verdict::Differs
        );
        assert_eq!(
            verdict(&d, &live, &body, "op", None),
            Verdict::Differs,
            "data.old is ours and no longer applied"
        );
    }
}
