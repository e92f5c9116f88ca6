//! When [`DependentsReconciler`](super::DependentsReconciler) rewrites its
//! `DependentsReady` condition: when its status, reason, observed
//! generation or the set of failed and pending dependents changes, not
//! for each new detail of a message (a rollout's progress: `1 of 3
//! updated`, `2 of 3 updated`), which would be a status write of the
//! owner, and a wake-up of everything watching it, per progress step.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

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

/// What was last written for one owner.
#[derive(Debug)]
struct Written {
    gist: String,
    message: String,
    /// The owner's resourceVersion our status write returned.
    version: Option<u64>,
}

/// The gist and message last written for each owner, by UID, and when a
/// converge last wrote to each owner's set.
#[derive(Debug, Default)]
pub(crate) struct ConditionMemo {
    by_uid: Mutex<HashMap<String, Written>>,
    set_written: Mutex<HashMap<String, Instant>>,
}

impl ConditionMemo {
    /// Notes that a converge wrote to `uid`'s set now.
    pub fn set_written(&self, uid: &str) {
        if let Ok(mut at) = self.set_written.lock() {
            if at.len() >= CAPACITY && !at.contains_key(uid) {
                at.clear();
            }
            at.insert(uid.to_owned(), Instant::now());
        }
    }

    /// Whether a converge wrote to `uid`'s set less than `within` ago.
    pub fn set_written_within(&self, uid: &str, within: Duration) -> bool {
        self.set_written
            .lock()
            .ok()
            .and_then(|at| at.get(uid).map(|t| t.elapsed() < within))
            .unwrap_or(false)
    }

    /// Whether the owner's condition need not be rewritten for `gist`: we
    /// last wrote the same gist, and the owner as read (at
    /// resourceVersion `version`) either still says our `message`, or is
    /// older than our write (a watch lagging behind it: read-your-writes).
    pub fn still_says(
        &self,
        uid: &str,
        gist: &str,
        message: Option<&str>,
        version: Option<u64>,
    ) -> bool {
        let Ok(memo) = self.by_uid.lock() else {
            return false;
        };
        let Some(written) = memo.get(uid) else {
            return false;
        };
        let older = matches!((version, written.version), (Some(read), Some(ours)) if read < ours);
        written.gist == gist && (message == Some(written.message.as_str()) || older)
    }

    /// Remembers that `message` with `gist` was written for `uid`, the
    /// write returning the owner at resourceVersion `version`.
    pub fn wrote(&self, uid: &str, gist: String, message: String, version: Option<u64>) {
        if let Ok(mut memo) = self.by_uid.lock() {
            if memo.len() >= CAPACITY && !memo.contains_key(uid) {
                memo.clear();
            }
            memo.insert(
                uid.to_owned(),
                Written {
                    gist,
                    message,
                    version,
                },
            );
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
        let said = Some("app (1 of 3 updated)");
        assert!(!memo.still_says("u", &one, said, Some(5)));
        memo.wrote("u", one.clone(), "app (1 of 3 updated)".into(), Some(7));
        assert!(memo.still_says("u", &one, said, Some(7)));
        // Someone else rewrote the message: ours is written again.
        assert!(!memo.still_says("u", &one, Some("edited"), Some(9)));
        // The owner as read predates our write (a lagging watch): no
        // condition yet, or an older one, is not rewritten.
        assert!(memo.still_says("u", &one, None, Some(6)));
        assert!(!memo.still_says("u", &one, None, Some(8)));
        assert!(!memo.still_says("u", &one, None, None));
    }
}
