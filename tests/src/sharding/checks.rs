//! The proof's checks of a run's records, pure so that they are unit
//! tested: handler intervals and their overlaps, charges, histories, status
//! writes per object, and each replica's share.

use std::collections::{BTreeMap, BTreeSet};

use fsm_kube::fsm_core::StateRecord;

use super::ledger::{Event, Records, Report};
use super::machine::PATH;

/// One handler run in one replica: from its start report to its end report
/// (or, when the replica was killed before reporting the end, to the kill).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interval {
    /// The object.
    pub object: String,
    /// The state whose handler ran.
    pub state: String,
    /// The replica.
    pub replica: String,
    /// Start, microseconds since the epoch.
    pub start_us: i64,
    /// End, microseconds since the epoch.
    pub end_us: i64,
    /// Whether no end was reported (closed at the replica's stop instead).
    pub cut: bool,
    /// Whether the handler was cancelled (its controller stopped).
    pub cancelled: bool,
}

/// The intervals of `reports`, taken in time order (a stable sort, so
/// arrival order breaks ties; a `Cancelled` report may arrive late but is
/// timed at the cancellation). An interval without an end report closes at its replica's stop
/// time in `stopped_us`; one of a replica that never stopped closes at
/// `end_of_run_us` and is listed in the second vector (a handler that never
/// ended: suspicious by itself).
#[must_use]
pub fn intervals(
    reports: &[Report],
    stopped_us: &BTreeMap<String, i64>,
    end_of_run_us: i64,
) -> (Vec<Interval>, Vec<Interval>) {
    let mut open: BTreeMap<(String, String), Interval> = BTreeMap::new();
    let mut closed = Vec::new();
    let mut unended = Vec::new();
    let mut in_time = reports.iter().collect::<Vec<_>>();
    in_time.sort_by_key(|r| r.at_us);
    for report in in_time {
        let key = (report.object.clone(), report.replica.clone());
        match report.event {
            Event::Begin => {
                // A begin without the previous end: that handler never
                // reported it; it ended before this one began at the latest.
                if let Some(mut previous) = open.remove(&key) {
                    previous.end_us = report.at_us;
                    previous.cut = true;
                    unended.push(previous.clone());
                    closed.push(previous);
                }
                open.insert(
                    key,
                    Interval {
                        object: report.object.clone(),
                        state: report.state.clone(),
                        replica: report.replica.clone(),
                        start_us: report.at_us,
                        end_us: report.at_us,
                        cut: false,
                        cancelled: false,
                    },
                );
            }
            Event::End | Event::Cancelled => {
                if let Some(mut interval) = open.remove(&key) {
                    interval.end_us = report.at_us;
                    interval.cancelled = report.event == Event::Cancelled;
                    closed.push(interval);
                }
            }
        }
    }
    for (_, mut interval) in open {
        interval.cut = true;
        match stopped_us.get(&interval.replica) {
            Some(stopped) => interval.end_us = (*stopped).max(interval.start_us),
            None => {
                interval.end_us = end_of_run_us;
                unended.push(interval.clone());
            }
        }
        closed.push(interval);
    }
    (closed, unended)
}

/// Pairs of intervals of one object, in two different replicas, that
/// overlap in time: the object was handled by two replicas at once.
#[must_use]
pub fn overlaps(intervals: &[Interval]) -> Vec<(Interval, Interval)> {
    let mut by_object: BTreeMap<&str, Vec<&Interval>> = BTreeMap::new();
    for interval in intervals {
        by_object
            .entry(interval.object.as_str())
            .or_default()
            .push(interval);
    }
    let mut found = Vec::new();
    for list in by_object.values() {
        for (i, a) in list.iter().enumerate() {
            for b in &list[i + 1..] {
                if a.replica != b.replica && a.start_us < b.end_us && b.start_us < a.end_us {
                    found.push(((*a).clone(), (*b).clone()));
                }
            }
        }
    }
    found
}

/// What the ledger says of the non-idempotent call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChargeCheck {
    /// Objects charged under two or more distinct request ids (forbidden).
    pub charged_twice: BTreeMap<String, Vec<String>>,
    /// Objects of the run never charged.
    pub never_charged: Vec<String>,
    /// Objects charged that are not of the run.
    pub unknown: Vec<String>,
    /// Charges repeated with an id already charged (answered as the first).
    pub repeats: usize,
}

impl ChargeCheck {
    /// Exactly one distinct call per object and no repeat.
    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.charged_twice.is_empty()
            && self.never_charged.is_empty()
            && self.unknown.is_empty()
            && self.repeats == 0
    }
}

/// Checks the charges of `records` against the run's `objects`.
#[must_use]
pub fn charges(records: &Records, objects: &BTreeSet<String>) -> ChargeCheck {
    let per_object = records.charges_per_object();
    ChargeCheck {
        charged_twice: per_object
            .iter()
            .filter(|(_, ids)| ids.len() > 1)
            .map(|(o, ids)| (o.clone(), ids.clone()))
            .collect(),
        never_charged: objects
            .iter()
            .filter(|o| !per_object.contains_key(*o))
            .cloned()
            .collect(),
        unknown: per_object
            .keys()
            .filter(|o| !objects.contains(*o))
            .cloned()
            .collect(),
        repeats: records.repeats.len(),
    }
}

/// `Ok` when `record` rests in `Done` along the exact path of the
/// workflow, each transition once with contiguous sequence numbers;
/// otherwise what is wrong.
///
/// # Errors
/// A description of the first difference.
pub fn check_history(record: &StateRecord) -> Result<(), String> {
    let seqs: Vec<u64> = record.history.iter().map(|h| h.seq).collect();
    let contiguous: Vec<u64> = (1..=record.history.len() as u64).collect();
    if seqs != contiguous {
        return Err(format!("sequence numbers {seqs:?}"));
    }
    let path: Vec<(Option<&str>, &str)> = record
        .history
        .iter()
        .map(|h| (h.from.as_deref(), h.to.as_str()))
        .collect();
    if path != PATH {
        return Err(format!("path {path:?}"));
    }
    if record.state != super::machine::DONE || record.is_unwinding() {
        return Err(format!("state {}", record.state));
    }
    Ok(())
}

/// One replica's share of a steady phase's objects.
#[derive(Clone, Debug, PartialEq)]
pub struct Share {
    /// The replica.
    pub replica: String,
    /// Objects of the phase it ended at least one handler for.
    pub objects: usize,
    /// `objects` less the even share, over the even share.
    pub deviation: f64,
}

/// The shares of a steady phase: for each of the `replicas` live through
/// it, the number of the phase's `objects` it ended at least one handler
/// for (from the ledger's `End` reports), and its deviation from the even
/// share `objects.len() / replicas.len()`. Also: the objects handled by
/// more than one replica (none in a steady phase), and the objects handled
/// by a replica not in `replicas`.
#[must_use]
pub fn shares(
    reports: &[Report],
    objects: &BTreeSet<String>,
    replicas: &[String],
) -> (Vec<Share>, usize, usize) {
    let mut handlers: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for report in reports {
        if report.event == Event::End && objects.contains(&report.object) {
            handlers
                .entry(report.object.as_str())
                .or_default()
                .insert(report.replica.as_str());
        }
    }
    let mut counts: BTreeMap<&str, usize> = replicas.iter().map(|r| (r.as_str(), 0)).collect();
    let mut shared = 0;
    let mut strangers = 0;
    for by in handlers.values() {
        if by.len() > 1 {
            shared += 1;
        }
        for replica in by {
            match counts.get_mut(replica) {
                Some(n) => *n += 1,
                None => strangers += 1,
            }
        }
    }
    let even = objects.len() as f64 / replicas.len().max(1) as f64;
    let shares = counts
        .into_iter()
        .map(|(replica, n)| Share {
            replica: replica.to_owned(),
            objects: n,
            deviation: (n as f64 - even) / even,
        })
        .collect();
    (shares, shared, strangers)
}

/// Successful status writes (patch or update of `resource/status`, 2xx)
/// per object name, from the server's request log.
#[must_use]
pub fn status_writes(
    log: &[fsm_testkit::RequestRecord],
    resource: &str,
) -> BTreeMap<String, usize> {
    let mut per_object = BTreeMap::new();
    for r in log {
        if (r.verb == "patch" || r.verb == "update")
            && r.resource == resource
            && r.subresource.as_deref() == Some("status")
            && (200..300).contains(&r.code)
            && let Some(name) = &r.name
        {
            *per_object.entry(name.clone()).or_default() += 1;
        }
    }
    per_object
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(event: Event, object: &str, replica: &str, at_us: i64) -> Report {
        Report {
            event,
            object: object.into(),
            state: "Pending".into(),
            replica: replica.into(),
            at_us,
        }
    }

    #[test]
    fn a_handover_after_the_kill_does_not_overlap() {
        let reports = [
            report(Event::Begin, "o", "a", 10),
            report(Event::Begin, "o", "b", 50),
            report(Event::End, "o", "b", 60),
        ];
        let stopped = BTreeMap::from([("a".to_owned(), 40)]);
        let (intervals, unended) = intervals(&reports, &stopped, 100);
        assert!(unended.is_empty());
        assert_eq!(intervals.len(), 2);
        let cut = intervals.iter().find(|i| i.replica == "a").unwrap();
        assert!(cut.cut);
        assert_eq!(cut.end_us, 40);
        assert!(overlaps(&intervals).is_empty());
    }

    #[test]
    fn a_handler_before_the_kill_lands_overlaps() {
        let reports = [
            report(Event::Begin, "o", "a", 10),
            report(Event::Begin, "o", "b", 30),
            report(Event::End, "o", "b", 60),
        ];
        let stopped = BTreeMap::from([("a".to_owned(), 40)]);
        let (intervals, _) = intervals(&reports, &stopped, 100);
        let found = overlaps(&intervals);
        assert_eq!(found.len(), 1);
        let mut pair = [found[0].0.replica.as_str(), found[0].1.replica.as_str()];
        pair.sort_unstable();
        assert_eq!(pair, ["a", "b"]);
    }

    #[test]
    fn one_replica_handling_in_sequence_is_no_overlap_and_an_unended_handler_is_listed() {
        let reports = [
            report(Event::Begin, "o", "a", 10),
            report(Event::End, "o", "a", 20),
            report(Event::Begin, "o", "a", 20),
            report(Event::Begin, "p", "a", 25),
        ];
        let (intervals, unended) = intervals(&reports, &BTreeMap::new(), 100);
        assert_eq!(intervals.len(), 3);
        assert!(overlaps(&intervals).is_empty());
        assert_eq!(unended.len(), 2, "{unended:?}");
    }

    #[test]
    fn a_late_cancellation_report_closes_its_handler_at_the_drop() {
        let reports = [
            report(Event::Begin, "o", "a", 10),
            report(Event::Begin, "o", "a", 30),
            report(Event::Cancelled, "o", "a", 20),
            report(Event::End, "o", "a", 40),
            report(Event::Begin, "o", "b", 25),
            report(Event::End, "o", "b", 28),
        ];
        let (intervals, unended) = intervals(&reports, &BTreeMap::new(), 100);
        assert!(unended.is_empty(), "{unended:?}");
        assert_eq!(intervals.iter().filter(|i| i.cancelled).count(), 1);
        assert!(overlaps(&intervals).is_empty());
    }

    #[test]
    fn charges_count_distinct_ids_and_repeats_apart() {
        use super::super::ledger::{Charge, ChargeRequest};
        let charge = |object: &str, id: &str| Charge {
            request: ChargeRequest {
                object: object.into(),
                request_id: id.into(),
                replica: "a".into(),
            },
            at_us: 0,
        };
        let mut records = Records::default();
        records.charges.insert("1".into(), charge("o", "1"));
        records.charges.insert("2".into(), charge("o", "2"));
        records.charges.insert("3".into(), charge("x", "3"));
        records.repeats.push(charge("o", "1"));
        let objects = BTreeSet::from(["o".to_owned(), "p".to_owned()]);
        let check = charges(&records, &objects);
        assert_eq!(check.charged_twice.len(), 1);
        assert_eq!(check.never_charged, ["p"]);
        assert_eq!(check.unknown, ["x"]);
        assert_eq!(check.repeats, 1);
        assert!(!check.is_clean());
    }

    #[test]
    fn shares_count_objects_per_replica_against_the_even_share() {
        let reports = [
            report(Event::End, "o1", "a", 1),
            report(Event::End, "o1", "a", 2),
            report(Event::End, "o2", "a", 3),
            report(Event::End, "o3", "b", 4),
            report(Event::End, "o4", "b", 5),
            report(Event::End, "o4", "c", 6),
            report(Event::Begin, "o5", "b", 7),
        ];
        let objects: BTreeSet<String> = ["o1", "o2", "o3", "o4"].map(String::from).into();
        let (shares, shared, strangers) = shares(&reports, &objects, &["a".into(), "b".into()]);
        assert_eq!(shared, 1);
        assert_eq!(strangers, 1);
        assert_eq!(shares[0].objects, 2);
        assert_eq!(shares[1].objects, 2);
        assert!(shares.iter().all(|s| s.deviation.abs() < 1e-9));
    }

    #[test]
    fn status_writes_count_successful_status_patches_per_object() {
        let record =
            |verb: &str, sub: Option<&str>, name: &str, code: u16| fsm_testkit::RequestRecord {
                verb: verb.into(),
                group: "proof.operator-fsm.io".into(),
                resource: "orders".into(),
                subresource: sub.map(String::from),
                namespace: Some("ns".into()),
                name: Some(name.into()),
                path: String::new(),
                code,
            };
        let log = [
            record("patch", Some("status"), "o", 200),
            record("patch", Some("status"), "o", 409),
            record("patch", None, "o", 200),
            record("patch", Some("status"), "p", 200),
            record("update", Some("status"), "p", 200),
        ];
        let writes = status_writes(&log, "orders");
        assert_eq!(writes["o"], 1);
        assert_eq!(writes["p"], 2);
    }
}
