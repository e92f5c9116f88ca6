//! The names sharding writes: the ring label of shard Leases, the shard
//! and drain labels and the epoch annotation of objects, each checked
//! against Kubernetes' limits before anything is written.

use super::ShardError;

/// The label every shard Lease of one operator carries, with the
/// operator's name as value: `operator-fsm.io/shard-ring=<operator>`.
pub const RING_LABEL: &str = "operator-fsm.io/shard-ring";

/// The names one operator's sharding uses.
///
/// ```
/// use fsm_kube::shard::ShardNames;
///
/// let names = ShardNames::new("db-operator").unwrap();
/// assert_eq!(names.shard_label(), "shard.operator-fsm.io/db-operator");
/// assert_eq!(names.drain_label(), "drain.operator-fsm.io/db-operator");
/// assert_eq!(names.ring_selector(), "operator-fsm.io/shard-ring=db-operator");
/// assert_eq!(names.assigner_lease(), "db-operator-sharder");
/// assert!(ShardNames::new(&"x".repeat(64)).is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardNames {
    operator: String,
    shard_label: String,
    drain_label: String,
    epoch_annotation: String,
}

impl ShardNames {
    /// The names of operator `operator`, which must be a valid label value
    /// (at most 63 characters; letters, digits, `-`, `_`, `.`, starting
    /// and ending with a letter or digit), as it names the labels' keys.
    ///
    /// # Errors
    /// [`ShardError::InvalidName`].
    pub fn new(operator: &str) -> Result<ShardNames, ShardError> {
        check_label_value("operator name", operator)?;
        Ok(ShardNames {
            operator: operator.to_owned(),
            shard_label: format!("shard.operator-fsm.io/{operator}"),
            drain_label: format!("drain.operator-fsm.io/{operator}"),
            epoch_annotation: format!("epoch.shard.operator-fsm.io/{operator}"),
        })
    }

    /// The operator's name.
    #[must_use]
    pub fn operator(&self) -> &str {
        &self.operator
    }

    /// The label naming an object's shard:
    /// `shard.operator-fsm.io/<operator>=<shard Lease name>`.
    #[must_use]
    pub fn shard_label(&self) -> &str {
        &self.shard_label
    }

    /// The label asking an object's owner to let it go:
    /// `drain.operator-fsm.io/<operator>=<next shard>`.
    #[must_use]
    pub fn drain_label(&self) -> &str {
        &self.drain_label
    }

    /// The annotation counting an object's assignments
    /// (`epoch.shard.operator-fsm.io/<operator>`): each assignment writes
    /// a greater number, so that a replica can tell a copy from before it
    /// let the object go from a copy assigned to it again.
    #[must_use]
    pub fn epoch_annotation(&self) -> &str {
        &self.epoch_annotation
    }

    /// The label selector of this operator's shard Leases.
    #[must_use]
    pub fn ring_selector(&self) -> String {
        format!("{RING_LABEL}={}", self.operator)
    }

    /// The label selector of the objects of shard `shard`.
    #[must_use]
    pub fn shard_selector(&self, shard: &str) -> String {
        format!("{}={shard}", self.shard_label)
    }

    /// The Lease whose holder runs the assigner: `<operator>-sharder`.
    #[must_use]
    pub fn assigner_lease(&self) -> String {
        format!("{}-sharder", self.operator)
    }

    /// This replica's shard Lease when none is named:
    /// `<operator>-shard-<host>` (the pod's name in a Deployment).
    #[must_use]
    pub fn default_shard_lease(&self, host: &str) -> String {
        format!("{}-shard-{host}", self.operator)
    }

    /// Checks that `shard` can name a shard: it is a label value (at most
    /// 63 characters) and a Lease name.
    ///
    /// # Errors
    /// [`ShardError::InvalidName`].
    pub fn check_shard(&self, shard: &str) -> Result<(), ShardError> {
        check_label_value("shard Lease name", shard)
    }
}

/// Checks `value` against the rules of a label value that is not empty.
fn check_label_value(what: &'static str, value: &str) -> Result<(), ShardError> {
    let invalid = |reason: &'static str| ShardError::InvalidName {
        what,
        value: value.to_owned(),
        reason,
    };
    if value.is_empty() {
        return Err(invalid("it is empty"));
    }
    if value.len() > 63 {
        return Err(invalid(
            "it is longer than 63 characters, the limit of a label value",
        ));
    }
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !edge(value.chars().next()) || !edge(value.chars().last()) {
        return Err(invalid("it must start and end with a letter or a digit"));
    }
    if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(invalid(
            "it may hold only letters, digits, '-', '_' and '.'",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_operator() {
        let names = ShardNames::new("widgets").unwrap();
        assert_eq!(
            names.shard_selector("w-0"),
            "shard.operator-fsm.io/widgets=w-0"
        );
        assert_eq!(names.default_shard_lease("node-1"), "widgets-shard-node-1");
        assert_eq!(
            names.epoch_annotation(),
            "epoch.shard.operator-fsm.io/widgets"
        );
    }

    #[test]
    fn names_that_cannot_be_label_values_are_refused_with_the_reason() {
        let names = ShardNames::new("op").unwrap();
        let long = "a".repeat(64);
        let error = names.check_shard(&long).unwrap_err().to_string();
        assert!(error.contains("63"), "{error}");
        assert!(names.check_shard("-a").is_err());
        assert!(names.check_shard("a/b").is_err());
        assert!(names.check_shard("").is_err());
        assert!(names.check_shard(&"a".repeat(63)).is_ok());
        assert!(ShardNames::new("My_Op.1").is_ok());
    }
}
