//! How a dependent decides that its live object already matches what we
//! would apply, without the server: the ignore paths, the dependent's own
//! matcher, the structural comparison ([`diff`](super::diff)) and the
//! normal forms learned from dry runs ([`learned`]). Asking the server (the
//! dry run) is `unchanged`'s. The rules are documented on
//! [`converge`](super::converge), under *When nothing is written*.

mod ignore;
mod learned;
mod server_form;

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use super::diff::{holds, stops_nothing};

pub(crate) use ignore::{IgnorePath, remove_paths};
pub(crate) use learned::{LearnedForms, LearnedKey, body_hash};
pub(crate) use server_form::{normal_form, unchanged_by_apply};

use ignore::keep_live_values;

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
    /// What of `body` is compared with the live object: all of it, or,
    /// with ignore paths, a copy without them.
    pub(crate) fn compared<'b>(&self, body: &'b Value) -> Cow<'b, Value> {
        if self.ignored.is_empty() {
            Cow::Borrowed(body)
        } else {
            let mut compared = body.clone();
            remove_paths(&mut compared, &self.ignored);
            Cow::Owned(compared)
        }
    }

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
pub(crate) enum Verdict {
    /// The live object matches: no write.
    Matches,
    /// It differs: apply.
    Differs,
    /// The comparison cannot tell: a dry run can.
    AskServer,
}

/// Prepares `body` for an apply onto `live`: ignored fields take the live
/// values (so an apply leaves them as someone set them).
pub(crate) fn prepare(matching: &Matching, body: &mut Value, live: Option<&Value>) {
    if let Some(live) = live {
        keep_live_values(body, live, &matching.ignored);
    }
}

/// The decision without the server: a field we stopped applying differs;
/// then the dependent's matcher decides if it has one; else the live
/// object holding the body's values (ignored paths left out), or the
/// learned normal form, matches; else the server is asked (unless the
/// dependent turned dry runs off).
pub(crate) fn verdict(
    matching: &Matching,
    live: &Value,
    body: &Value,
    manager: &str,
    learned: Option<&Value>,
) -> Verdict {
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
    if holds(live, &matching.compared(body)) || learned.is_some_and(|form| holds(live, form)) {
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
    use serde_json::json;

    fn ignoring(paths: &[&str]) -> Matching {
        let mut m = Matching {
            ignore_given: paths.iter().map(|p| (*p).to_owned()).collect(),
            ..Matching::default()
        };
        m.parse_ignored().unwrap();
        m
    }

    #[test]
    fn equal_values_match_and_a_difference_asks_the_server_unless_turned_off() {
        let live = json!({"data": {"cpu": "1"}});
        let m = Matching::default();
        assert_eq!(
            verdict(&m, &live, &json!({"data": {"cpu": "1"}}), "op", None),
            Verdict::Matches
        );
        let normalised = json!({"data": {"cpu": "1000m"}});
        assert_eq!(
            verdict(&m, &live, &normalised, "op", None),
            Verdict::AskServer
        );
        let off = Matching {
            dry_run: false,
            ..Matching::default()
        };
        assert_eq!(
            verdict(&off, &live, &normalised, "op", None),
            Verdict::Differs
        );
    }

    #[test]
    fn a_learned_form_matches_while_the_live_object_holds_it() {
        let m = Matching::default();
        let body = json!({"data": {"cpu": "1000m"}});
        let form = json!({"data": {"cpu": "1"}});
        assert_eq!(
            verdict(&m, &json!({"data": {"cpu": "1"}}), &body, "op", Some(&form)),
            Verdict::Matches
        );
        assert_eq!(
            verdict(&m, &json!({"data": {"cpu": "2"}}), &body, "op", Some(&form)),
            Verdict::AskServer
        );
    }

    #[test]
    fn ignored_paths_are_left_out_of_the_comparison() {
        let m = ignoring(&["/spec/replicas"]);
        let live = json!({"spec": {"replicas": 5, "image": "a"}});
        let body = json!({"spec": {"replicas": 1, "image": "a"}});
        assert_eq!(verdict(&m, &live, &body, "op", None), Verdict::Matches);
        let mut prepared = body.clone();
        prepare(&m, &mut prepared, Some(&live));
        assert_eq!(
            prepared["spec"]["replicas"], 5,
            "an apply keeps the live value"
        );
        let mut created = body.clone();
        prepare(&m, &mut created, None);
        assert_eq!(
            created["spec"]["replicas"], 1,
            "a create applies the desired value"
        );
    }

    #[test]
    fn a_malformed_ignore_path_is_named_with_why() {
        let mut m = Matching {
            ignore_given: vec!["/spec/replicas".into(), "spec.replicas".into()],
            ..Matching::default()
        };
        let (path, why) = m.parse_ignored().unwrap_err();
        assert_eq!(path, "spec.replicas");
        assert!(why.contains("starts with `/`"), "{why}");
    }

    #[test]
    fn the_matcher_decides_but_a_field_we_stopped_applying_still_differs() {
        let m = Matching {
            matcher: Some(Arc::new(|desired: &Value, live: &Value| {
                desired["data"]["version"] == live["data"]["version"]
            })),
            ..Matching::default()
        };
        let live = json!({"data": {"version": "1", "noise": "x"},
            "metadata": {"managedFields": [{"manager": "op", "operation": "Apply",
                "fieldsV1": {"f:data": {"f:version": {}, "f:old": {}}}}]}});
        let body = json!({"data": {"version": "1", "noise": "y"}});
        assert_eq!(verdict(&m, &live, &body, "someone", None), Verdict::Matches);
        assert_eq!(
            verdict(
                &m,
                &live,
                &json!({"data": {"version": "2"}}),
                "someone",
                None
            ),
            Verdict::Differs
        );
        assert_eq!(
            verdict(&m, &live, &body, "op", None),
            Verdict::Differs,
            "data.old is ours and no longer applied"
        );
    }
}
