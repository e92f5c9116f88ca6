//! What 1.20 checks in the status a controller writes to a workload
//! (`Validate…StatusUpdate`): counts not negative, counts not above
//! `status.replicas`, available not above ready, a collision count not
//! decremented. Each kind's rules are a table ([`StatusRules`]).

use serde_json::Value;

use super::field::FieldErrors;
use crate::status::Cause;

/// What a kind's status update validation checks.
struct StatusRules {
    /// The counts that may not be negative, in the order checked.
    nonnegative: &'static [&'static str],
    /// The counts that may not exceed `status.replicas`, in order.
    at_most_replicas: &'static [&'static str],
    /// Whether `availableReplicas` may not exceed `readyReplicas`.
    available_at_most_ready: bool,
    /// Whether `collisionCount` may not go down.
    collision_count_kept: bool,
}

const DEPLOYMENT: StatusRules = StatusRules {
    nonnegative: &[
        "observedGeneration",
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
        "unavailableReplicas",
        "collisionCount",
    ],
    at_most_replicas: &["updatedReplicas", "readyReplicas", "availableReplicas"],
    available_at_most_ready: true,
    collision_count_kept: true,
};

const REPLICA_SET: StatusRules = StatusRules {
    nonnegative: &[
        "replicas",
        "fullyLabeledReplicas",
        "readyReplicas",
        "availableReplicas",
        "observedGeneration",
    ],
    at_most_replicas: &["fullyLabeledReplicas", "readyReplicas", "availableReplicas"],
    available_at_most_ready: true,
    collision_count_kept: false,
};

const STATEFUL_SET: StatusRules = StatusRules {
    nonnegative: &[
        "replicas",
        "readyReplicas",
        "currentReplicas",
        "updatedReplicas",
        "observedGeneration",
        "collisionCount",
    ],
    at_most_replicas: &["readyReplicas", "currentReplicas", "updatedReplicas"],
    available_at_most_ready: false,
    collision_count_kept: true,
};

const DAEMON_SET: StatusRules = StatusRules {
    nonnegative: &[
        "currentNumberScheduled",
        "numberMisscheduled",
        "desiredNumberScheduled",
        "numberReady",
        "observedGeneration",
        "updatedNumberScheduled",
        "numberAvailable",
        "numberUnavailable",
        "collisionCount",
    ],
    at_most_replicas: &[],
    available_at_most_ready: false,
    collision_count_kept: true,
};

const JOB: StatusRules = StatusRules {
    nonnegative: &["active", "succeeded", "failed"],
    at_most_replicas: &[],
    available_at_most_ready: false,
    collision_count_kept: false,
};

/// A Deployment's status update.
#[must_use]
pub fn deployment(new: &Value, old: &Value) -> Vec<Cause> {
    causes(&DEPLOYMENT, new, old)
}

/// A ReplicaSet's status update.
#[must_use]
pub fn replica_set(new: &Value, old: &Value) -> Vec<Cause> {
    causes(&REPLICA_SET, new, old)
}

/// A StatefulSet's status update.
#[must_use]
pub fn stateful_set(new: &Value, old: &Value) -> Vec<Cause> {
    causes(&STATEFUL_SET, new, old)
}

/// A DaemonSet's status update.
#[must_use]
pub fn daemon_set(new: &Value, old: &Value) -> Vec<Cause> {
    causes(&DAEMON_SET, new, old)
}

/// A Job's status update.
#[must_use]
pub fn job(new: &Value, old: &Value) -> Vec<Cause> {
    causes(&JOB, new, old)
}

fn causes(rules: &StatusRules, new: &Value, old: &Value) -> Vec<Cause> {
    let mut e = FieldErrors::new();
    let status = &new["status"];
    let count = |key: &str| status[key].as_i64().unwrap_or(0);
    for key in rules.nonnegative {
        e.nonnegative(&format!("status.{key}"), &status[*key]);
    }
    for key in rules.at_most_replicas {
        if count(key) > count("replicas") {
            e.invalid(
                &format!("status.{key}"),
                &count(key).to_string(),
                "cannot be greater than status.replicas",
            );
        }
    }
    if rules.available_at_most_ready && count("availableReplicas") > count("readyReplicas") {
        e.invalid(
            "status.availableReplicas",
            &count("availableReplicas").to_string(),
            "cannot be greater than readyReplicas",
        );
    }
    if rules.collision_count_kept
        && let Some(before) = old["status"]["collisionCount"].as_i64()
    {
        let now = status["collisionCount"].as_i64();
        if now.is_none_or(|n| n < before) {
            e.invalid(
                "status.collisionCount",
                &now.unwrap_or(0).to_string(),
                "cannot be decremented",
            );
        }
    }
    e.into_causes()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fields(causes: Vec<Cause>) -> Vec<String> {
        causes.into_iter().map(|c| c.field).collect()
    }

    #[test]
    fn a_deployment_status_is_checked_in_1_20_order() {
        let new = json!({"status": {"replicas": 2, "readyReplicas": 5, "availableReplicas": -1}});
        assert_eq!(
            fields(deployment(&new, &json!({}))),
            ["status.availableReplicas", "status.readyReplicas"]
        );
        let over = json!({"status": {"replicas": 2, "readyReplicas": 1, "availableReplicas": 2}});
        assert_eq!(
            deployment(&over, &json!({}))[0].message,
            "Invalid value: 2: cannot be greater than readyReplicas"
        );
    }

    #[test]
    fn a_collision_count_is_not_decremented() {
        let old = json!({"status": {"collisionCount": 2}});
        assert_eq!(
            fields(stateful_set(
                &json!({"status": {"collisionCount": 1}}),
                &old
            )),
            ["status.collisionCount"]
        );
        assert!(daemon_set(&json!({"status": {"collisionCount": 3}}), &old).is_empty());
        assert!(job(&json!({"status": {"active": 1}}), &old).is_empty());
    }
}
