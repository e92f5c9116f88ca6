//! When [`DependentsReconciler`](super::DependentsReconciler) rewrites its
//! `DependentsReady` condition: when its status, reason, observed
//! generation or the set of failed and pending dependents changes, not
//! for each new detail of a message (a rollout's progress: `1 of 3
//! updated`, `2 of 3 updated`), which would be a status write of the
//! owner, and a wake-up of everything watching it, per progress step.

use std::collections::HashMap;
use std::sync::Mutex;

use super::report::Convergence;

/// At most this many owners are remembered; then all are forgotten (each
/// owner's next differing message is written once more).
const CAPACITY: usize = 100_000;

/// The gist of a `DependentsReady` condition: what makes it worth writing.
pub(crate) fn gist(convergence: &Convergence, reason: &str, generation: Option<i64>) -> String {
    let failed: Vec<&str> = convergence.failed().collect();
    let pending: Vec<&str> = convergence.pending().collect();
    let ready = if failed.is_empty() && pending.is_empty() {
        convergence.summary()
    } else {
        String::new()
    };
    format!(
        "{reason}|{generation:?}|failed:{}|pending:{}|{ready}",
        failed.join(","),
        pending.join(",")
    )
}

/// The gist and message last written for each owner, by UID.
#[derive(Debug, Default)]
pub(crate) struct ConditionMemo {
    by_uid: Mutex<HashMap<String, (String, String)>>,
}

impl ConditionMemo {
    /// Whether the owner's condition, now saying `message`, is the one we
    /// last wrote with the same `gist` (then it need not be rewritten).
    pub fn still_says(&self, uid: &str, gist: &str, message: &str) -> bool {
        self.by_uid
            .lock()
            .ok()
            .and_then(|m| m.get(uid).map(|(g, w)| g == gist && w == message))
            .unwrap_or(false)
    }

    /// Remembers that `message` with `gist` was written for `uid`.
    pub fn wrote(&self, uid: &str, gist: String, message: String) {
        if let Ok(mut memo) = self.by_uid.lock() {
            if memo.len() >= CAPACITY && !memo.contains_key(uid) {
                memo.clear();
            }
            memo.insert(uid.to_owned(), (gist, message));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dependents::DependentState;

    fn pending(why: &str) -> Convergence {
        Convergence {
            dependents: vec![
                ("config".into(), DependentState::Ready),
                ("app".into(), DependentState::NotReady(why.into())),
            ],
            ..Convergence::default()
        }
    }

    #[test]
    fn progress_details_keep_the_gist_a_new_pending_key_or_readiness_does_not() {
        let one = gist(&pending("1 of 3 updated"), "Pending", Some(1));
        assert_eq!(one, gist(&pending("2 of 3 updated"), "Pending", Some(1)));
        assert_ne!(one, gist(&pending("2 of 3 updated"), "Pending", Some(2)));
        let ready = Convergence {
            dependents: vec![("config".into(), DependentState::Ready)],
            ..Convergence::default()
        };
        assert_ne!(one, gist(&ready, "Ready", Some(1)));

        let memo = ConditionMemo::default();
        assert!(!memo.still_says("u", &one, "app (1 of 3 updated)"));
        memo.wrote("u", one.clone(), "app (1 of 3 updated)".into());
        assert!(memo.still_says("u", &one, "app (1 of 3 updated)"));
        // Someone else rewrote the message: ours is written again.
        assert!(!memo.still_says("u", &one, "edited"));
    }
}
