//! The request log: what clients asked, counted by verb and resource, so
//! tests and benchmarks can count API calls.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

/// One request, as the server understood it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`; discovery and other non-resource paths are `get`.
    pub verb: String,
    /// API group of the resource ("" for core or non-resource paths).
    pub group: String,
    /// Plural resource name; "" for non-resource paths (discovery, `/version`).
    pub resource: String,
    /// `status` for the status subresource.
    pub subresource: Option<String>,
    /// Namespace of the request, if any.
    pub namespace: Option<String>,
    /// Object name, if any.
    pub name: Option<String>,
    /// The request path.
    pub path: String,
    /// HTTP status code of the answer.
    pub code: u16,
}

#[derive(Debug, Default)]
struct Inner {
    records: VecDeque<RequestRecord>,
    counts: BTreeMap<(String, String), usize>,
    total: usize,
}

/// A log of requests: counts of every request, and the most recent records.
#[derive(Debug)]
pub struct RequestLog {
    inner: Mutex<Inner>,
    keep: usize,
}

impl Default for RequestLog {
    fn default() -> Self {
        Self::new(10_000)
    }
}

impl RequestLog {
    /// A log keeping the last `keep` records (counts cover every request).
    #[must_use]
    pub fn new(keep: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            keep,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave the counts inconsistent.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds a record.
    pub fn record(&self, r: RequestRecord) {
        let mut inner = self.lock();
        *inner
            .counts
            .entry((r.verb.clone(), r.resource.clone()))
            .or_default() += 1;
        inner.total += 1;
        inner.records.push_back(r);
        while inner.records.len() > self.keep {
            inner.records.pop_front();
        }
    }

    /// How many `verb` requests on `resource` (plural, e.g. `configmaps`;
    /// `"*"` for any resource) were made.
    #[must_use]
    pub fn count(&self, verb: &str, resource: &str) -> usize {
        self.lock()
            .counts
            .iter()
            .filter(|((v, r), _)| v == verb && (resource == "*" || r == resource))
            .map(|(_, n)| n)
            .sum()
    }

    /// Counts keyed by (verb, resource).
    #[must_use]
    pub fn counts(&self) -> BTreeMap<(String, String), usize> {
        self.lock().counts.clone()
    }

    /// The total number of requests.
    #[must_use]
    pub fn total(&self) -> usize {
        self.lock().total
    }

    /// The most recent records, oldest first.
    #[must_use]
    pub fn records(&self) -> Vec<RequestRecord> {
        self.lock().records.iter().cloned().collect()
    }

    /// The total number of requests and the kept records from number
    /// `since` on (counting from 0 at the first request ever logged),
    /// oldest first. Records already dropped are skipped: the first
    /// returned is then number `total - records.len()`.
    #[must_use]
    pub fn records_since(&self, since: usize) -> (usize, Vec<RequestRecord>) {
        let inner = self.lock();
        let oldest = inner.total - inner.records.len();
        let skip = since.clamp(oldest, inner.total) - oldest;
        (
            inner.total,
            inner.records.iter().skip(skip).cloned().collect(),
        )
    }

    /// Forgets everything.
    pub fn clear(&self) {
        *self.lock() = Inner::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_since_returns_only_the_tail() {
        let log = RequestLog::new(3);
        for verb in ["a", "b", "c", "d", "e"] {
            log.record(rec(verb, "pods"));
        }
        let verbs = |since| {
            let (total, records) = log.records_since(since);
            (
                total,
                records.into_iter().map(|r| r.verb).collect::<Vec<_>>(),
            )
        };
        assert_eq!(verbs(4), (5, vec!["e".to_owned()]));
        assert_eq!(verbs(5), (5, vec![]));
        assert_eq!(verbs(99), (5, vec![]));
        // 0 and 1 were dropped: the tail starts at the oldest kept.
        assert_eq!(
            verbs(0),
            (5, vec!["c".to_owned(), "d".to_owned(), "e".to_owned()])
        );
    }

    fn rec(verb: &str, resource: &str) -> RequestRecord {
        RequestRecord {
            verb: verb.into(),
            group: String::new(),
            resource: resource.into(),
            subresource: None,
            namespace: None,
            name: None,
            path: "/".into(),
            code: 200,
        }
    }

    #[test]
    fn counts_by_verb_and_resource() {
        let log = RequestLog::new(2);
        log.record(rec("get", "pods"));
        log.record(rec("get", "pods"));
        log.record(rec("list", "pods"));
        log.record(rec("get", "configmaps"));
        assert_eq!(log.count("get", "pods"), 2);
        assert_eq!(log.count("get", "*"), 3);
        assert_eq!(log.count("watch", "pods"), 0);
        assert_eq!(log.total(), 4);
        assert_eq!(log.records().len(), 2, "only the last records are kept");
        log.clear();
        assert_eq!(log.total(), 0);
    }
}
