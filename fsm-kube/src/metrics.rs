//! Prometheus metrics of the machines (with `prometheus-client`), and a
//! small HTTP endpoint to serve them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use fsm_core::{Effect, Report, Timestamp};
use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

/// A family served with its `# HELP` and `# TYPE` lines before its first
/// sample too: `prometheus_client` leaves a family without samples out of
/// `/metrics`, so that a metric that has not happened yet (no timeout so
/// far, no dependent, no shard move) would look like one the operator
/// does not have, to a dashboard or an alert as to a person.
#[derive(Debug)]
struct Declared<M>(M);

impl<M: EncodeMetric> EncodeMetric for Declared<M> {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }

    fn is_empty(&self) -> bool {
        false
    }
}

fn histogram() -> Histogram {
    // 10 ms to about 3 days.
    Histogram::new(exponential_buckets(0.01, 4.0, 14))
}

/// The metrics of one or more machines, registered in a [`Registry`].
///
/// Metric names (all prefixed `operator_fsm_`): `transitions_total{machine,
/// from, to}`, `time_in_state_seconds{machine, state}` (observed when the
/// state is left), `handler_errors_total{machine, state}`,
/// `retries_total{machine, state}`, `timeouts_total{machine, state}`,
/// `compensations_total{machine, outcome}`, `objects{machine, state}`, and
/// for dependent resources `dependent_operations_total{kind, outcome}`
/// (outcome `applied`: created or changed, `unchanged`: found as desired
/// and not written, `pruned`, `deleted` by a teardown, `orphaned`: a
/// kept dependent released instead of deleted, `failed`); for the
/// conversion webhook `conversions_total{outcome}` (`success`, `failure`,
/// `invalid`); in sharded mode ([`crate::shard`]) `shard_objects{operator, shard}` (the
/// active assigner's count per shard label), `shard_ring_member{operator,
/// shard}` (the active assigner's view of each shard Lease: 1 while the
/// shard is given new objects, 0 while it is not yet confirmed alive or is
/// dead), `shard_moves_total{operator}`, `shard_drains_total{operator}`,
/// `shard_releases_total{operator, shard}` and
/// `shard_assigner_active{operator}`.
/// Labels carry machine, state and kind names only, never state data.
#[derive(Clone)]
pub struct FsmMetrics {
    transitions: Family<Labels, Counter>,
    time_in_state: Family<Labels, Histogram, fn() -> Histogram>,
    handler_errors: Family<Labels, Counter>,
    retries: Family<Labels, Counter>,
    timeouts: Family<Labels, Counter>,
    compensations: Family<Labels, Counter>,
    objects: Family<Labels, Gauge>,
    dependent_operations: Family<Labels, Counter>,
    conversions: Family<Labels, Counter>,
    shard_objects: Family<Labels, Gauge>,
    shard_ring: Family<Labels, Gauge>,
    shard_moves: Family<Labels, Counter>,
    shard_drains: Family<Labels, Counter>,
    shard_releases: Family<Labels, Counter>,
    shard_assigner: Family<Labels, Gauge>,
    states: Arc<Mutex<HashMap<(String, String), String>>>,
}

impl std::fmt::Debug for FsmMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FsmMetrics").finish_non_exhaustive()
    }
}

impl FsmMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let metrics = FsmMetrics {
            transitions: Family::default(),
            time_in_state: Family::new_with_constructor(histogram),
            handler_errors: Family::default(),
            retries: Family::default(),
            timeouts: Family::default(),
            compensations: Family::default(),
            objects: Family::default(),
            dependent_operations: Family::default(),
            conversions: Family::default(),
            shard_objects: Family::default(),
            shard_ring: Family::default(),
            shard_moves: Family::default(),
            shard_drains: Family::default(),
            shard_releases: Family::default(),
            shard_assigner: Family::default(),
            states: Arc::default(),
        };
        let registry = registry.sub_registry_with_prefix("operator_fsm");
        registry.register(
            "transitions",
            "Committed transitions",
            Declared(metrics.transitions.clone()),
        );
        registry.register(
            "time_in_state_seconds",
            "Time spent in a state, observed when it is left",
            Declared(metrics.time_in_state.clone()),
        );
        registry.register(
            "handler_errors",
            "Handler errors",
            Declared(metrics.handler_errors.clone()),
        );
        registry.register(
            "retries",
            "Retries scheduled",
            Declared(metrics.retries.clone()),
        );
        registry.register(
            "timeouts",
            "State timeouts",
            Declared(metrics.timeouts.clone()),
        );
        registry.register(
            "compensations",
            "Compensation steps by outcome",
            Declared(metrics.compensations.clone()),
        );
        registry.register(
            "objects",
            "Objects per state",
            Declared(metrics.objects.clone()),
        );
        registry.register(
            "dependent_operations",
            "Dependent resource operations by kind and outcome (applied, unchanged, pruned, deleted, orphaned, failed)",
            Declared(metrics.dependent_operations.clone()),
        );
        registry.register(
            "conversions",
            "Conversion reviews answered by the conversion webhook, by outcome (success, failure, invalid)",
            Declared(metrics.conversions.clone()),
        );
        registry.register(
            "shard_objects",
            "Objects per shard label (shard=\"\": not assigned), as the active assigner sees them",
            Declared(metrics.shard_objects.clone()),
        );
        registry.register(
            "shard_ring_member",
            "1 while the active assigner gives a shard new objects; 0 while its Lease is not yet seen renewed, or is dead",
            Declared(metrics.shard_ring.clone()),
        );
        registry.register(
            "shard_moves",
            "Objects moved from one shard to another",
            Declared(metrics.shard_moves.clone()),
        );
        registry.register(
            "shard_drains",
            "Drains requested from a live owner",
            Declared(metrics.shard_drains.clone()),
        );
        registry.register(
            "shard_releases",
            "Objects this replica let go of when drained",
            Declared(metrics.shard_releases.clone()),
        );
        registry.register(
            "shard_assigner_active",
            "1 while this replica runs the shard assigner",
            Declared(metrics.shard_assigner.clone()),
        );
        metrics
    }

    /// Sets the number of `operator`'s objects labelled for `shard`.
    pub fn set_shard_objects(&self, operator: &str, shard: &str, count: i64) {
        self.shard_objects
            .get_or_create(&vec![
                ("operator", operator.to_owned()),
                ("shard", shard.to_owned()),
            ])
            .set(count);
    }

    /// Sets whether `operator`'s shard `shard` is a member of the active
    /// assigner's ring (given new objects).
    pub fn set_shard_ring_member(&self, operator: &str, shard: &str, member: bool) {
        self.shard_ring
            .get_or_create(&vec![
                ("operator", operator.to_owned()),
                ("shard", shard.to_owned()),
            ])
            .set(i64::from(member));
    }

    /// Drops shard `shard` of `operator` from the ring metric (its Lease
    /// is gone).
    pub fn remove_shard_ring_member(&self, operator: &str, shard: &str) {
        self.shard_ring.remove(&vec![
            ("operator", operator.to_owned()),
            ("shard", shard.to_owned()),
        ]);
    }

    /// Counts one object of `operator` moved to another shard.
    pub fn count_shard_move(&self, operator: &str) {
        self.shard_moves
            .get_or_create(&vec![("operator", operator.to_owned())])
            .inc();
    }

    /// Counts one drain requested from a live owner.
    pub fn count_shard_drain(&self, operator: &str) {
        self.shard_drains
            .get_or_create(&vec![("operator", operator.to_owned())])
            .inc();
    }

    /// Counts one object shard `shard` let go of.
    pub fn count_shard_release(&self, operator: &str, shard: &str) {
        self.shard_releases
            .get_or_create(&vec![
                ("operator", operator.to_owned()),
                ("shard", shard.to_owned()),
            ])
            .inc();
    }

    /// Marks whether this replica runs `operator`'s shard assigner.
    pub fn set_shard_assigner_active(&self, operator: &str, active: bool) {
        self.shard_assigner
            .get_or_create(&vec![("operator", operator.to_owned())])
            .set(i64::from(active));
    }

    /// Counts one operation on a dependent of `kind` (`Kind` or
    /// `Kind.group`) with `outcome`.
    pub fn observe_dependent(&self, kind: &str, outcome: &'static str) {
        self.dependent_operations
            .get_or_create(&vec![
                ("kind", kind.to_owned()),
                ("outcome", outcome.to_owned()),
            ])
            .inc();
    }

    /// Counts one conversion review answered with `outcome` (`success`,
    /// `failure`: an object could not be converted, `invalid`: not a
    /// review).
    pub fn count_conversion(&self, outcome: &'static str) {
        self.conversions
            .get_or_create(&vec![("outcome", outcome.to_owned())])
            .inc();
    }

    /// Counts what one reconcile of object `uid` of `machine` did.
    pub fn observe(&self, machine: &'static str, uid: &str, report: &Report) {
        let m = || ("machine", machine.to_owned());
        for effect in &report.effects {
            match effect {
                Effect::Entered { from, to, .. } => {
                    let from_label = from.clone().unwrap_or_default();
                    self.transitions
                        .get_or_create(&vec![m(), ("from", from_label), ("to", to.clone())])
                        .inc();
                    if let (Some(from), Some(record)) = (from, &report.record)
                        && let Some(seconds) = time_in(record, to, from)
                    {
                        self.time_in_state
                            .get_or_create(&vec![m(), ("state", from.clone())])
                            .observe(seconds);
                    }
                }
                Effect::RetryScheduled { state, .. }
                | Effect::RetryWithoutAttempt { state, .. } => {
                    self.handler_errors
                        .get_or_create(&vec![m(), ("state", state.clone())])
                        .inc();
                    self.retries
                        .get_or_create(&vec![m(), ("state", state.clone())])
                        .inc();
                }
                Effect::RetriesExhausted { state, .. } | Effect::Failed { state, .. } => {
                    self.handler_errors
                        .get_or_create(&vec![m(), ("state", state.clone())])
                        .inc();
                }
                Effect::TimedOut { state } => {
                    self.timeouts
                        .get_or_create(&vec![m(), ("state", state.clone())])
                        .inc();
                }
                Effect::Compensated { .. } => {
                    self.compensations
                        .get_or_create(&vec![m(), ("outcome", "succeeded".to_owned())])
                        .inc();
                }
                Effect::CompensationFailed { .. } => {
                    self.compensations
                        .get_or_create(&vec![m(), ("outcome", "failed".to_owned())])
                        .inc();
                }
                _ => {}
            }
        }
        if report.released {
            self.set_state(machine, uid, None);
        } else if !report.state.is_empty() {
            self.set_state(machine, uid, Some(&report.state));
        }
    }

    /// Moves object `uid` of `machine` to `state` in the per-state gauge
    /// (`None`: the object is gone).
    pub fn set_state(&self, machine: &'static str, uid: &str, state: Option<&str>) {
        let mut states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (machine.to_owned(), uid.to_owned());
        let previous = match state {
            Some(state) => states.insert(key, state.to_owned()),
            None => states.remove(&key),
        };
        if previous.as_deref() == state {
            return;
        }
        if let Some(previous) = previous {
            self.objects
                .get_or_create(&vec![("machine", machine.to_owned()), ("state", previous)])
                .dec();
        }
        if let Some(state) = state {
            self.objects
                .get_or_create(&vec![
                    ("machine", machine.to_owned()),
                    ("state", state.to_owned()),
                ])
                .inc();
        }
    }
}

/// How long the record was in `from` before entering `to`, from its history.
fn time_in(record: &fsm_core::StateRecord, to: &str, from: &str) -> Option<f64> {
    let entered_to = record.history.iter().rev().find(|h| h.to == to)?;
    let entered_from = record
        .history
        .iter()
        .rev()
        .find(|h| h.to == from && h.seq < entered_to.seq)?;
    let span: Timestamp = entered_to.at;
    Some(span.duration_since(entered_from.at).as_secs_f64().max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gauge_follows_objects_between_states() {
        let mut registry = Registry::default();
        let metrics = FsmMetrics::new(&mut registry);
        metrics.set_state("Db", "u1", Some("A"));
        metrics.set_state("Db", "u2", Some("A"));
        metrics.set_state("Db", "u1", Some("B"));
        metrics.set_state("Db", "u2", None);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("operator_fsm_objects{machine=\"Db\",state=\"A\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("operator_fsm_objects{machine=\"Db\",state=\"B\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn every_family_is_declared_before_its_first_sample() {
        let mut registry = Registry::default();
        let _metrics = FsmMetrics::new(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for family in [
            "transitions counter",
            "time_in_state_seconds histogram",
            "timeouts counter",
            "objects gauge",
            "dependent_operations counter",
            "shard_moves counter",
            "shard_releases counter",
            "shard_assigner_active gauge",
        ] {
            assert!(
                text.contains(&format!("# TYPE operator_fsm_{family}\n")),
                "{family}: {text}"
            );
        }
        assert!(!text.contains("operator_fsm_timeouts_total{"), "{text}");
    }
}
