//! Reading the server's request log from `/debug/requests` (see
//! `fsm_testkit::debug`), and counting requests by verb, resource and code.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Requests counted by (verb, resource, code); the resource is
/// `resource/subresource` for a subresource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts(pub BTreeMap<(String, String, u16), u64>);

/// One record as `/debug/requests` serves it.
#[derive(Debug, Deserialize)]
struct Record {
    verb: String,
    resource: String,
    subresource: Option<String>,
    code: u16,
}

#[derive(Debug, Deserialize)]
struct Page {
    total: usize,
    first: usize,
    records: Vec<Record>,
}

impl Counts {
    /// Counts one request.
    pub fn add(&mut self, verb: &str, resource: &str, subresource: Option<&str>, code: u16) {
        let resource = match subresource {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource.to_owned(),
        };
        *self.0.entry((verb.to_owned(), resource, code)).or_default() += 1;
    }

    /// Counts the records of a client-side log.
    #[must_use]
    pub fn of_log(log: &fsm_testkit::RequestLog) -> Self {
        let mut counts = Counts::default();
        for r in log.records() {
            counts.add(&r.verb, &r.resource, r.subresource.as_deref(), r.code);
        }
        counts
    }

    /// These counts less `other`'s (saturating at zero).
    #[must_use]
    pub fn minus(&self, other: &Counts) -> Counts {
        let mut out = self.clone();
        for (key, n) in &other.0 {
            if let Some(mine) = out.0.get_mut(key) {
                *mine = mine.saturating_sub(*n);
            }
        }
        out.0.retain(|_, n| *n > 0);
        out
    }

    /// Requests whose verb is `verb` (any resource, any code).
    #[must_use]
    pub fn verb(&self, verb: &str) -> u64 {
        self.sum(|v, _, _| v == verb)
    }

    /// The sum of the counts whose key satisfies `pick`.
    pub fn sum(&self, pick: impl Fn(&str, &str, u16) -> bool) -> u64 {
        self.0
            .iter()
            .filter(|((v, r, c), _)| pick(v, r, *c))
            .map(|(_, n)| n)
            .sum()
    }

    /// One line per (verb, resource, code) with its count, for a run's
    /// directory: which requests a total is made of.
    #[must_use]
    pub fn breakdown(&self) -> String {
        self.0
            .iter()
            .map(|((verb, resource, code), n)| format!("{n:>8} {verb} {resource} {code}\n"))
            .collect()
    }

    /// Writes: create, update, patch, delete.
    #[must_use]
    pub fn writes(&self) -> u64 {
        self.sum(|v, _, _| matches!(v, "create" | "update" | "patch" | "delete"))
    }

    /// Version conflicts: 409 on update or patch.
    #[must_use]
    pub fn conflicts(&self) -> u64 {
        self.sum(|v, _, c| c == 409 && matches!(v, "update" | "patch"))
    }

    /// `AlreadyExists`: 409 on create.
    #[must_use]
    pub fn already_exists(&self) -> u64 {
        self.sum(|v, _, c| c == 409 && v == "create")
    }
}

/// Follows the server's request log.
#[derive(Debug)]
pub struct LogReader {
    addr: SocketAddr,
    seen: usize,
    /// Every request read so far.
    pub counts: Counts,
    /// Records the server dropped before they were read.
    pub dropped: usize,
}

impl LogReader {
    /// A reader of `http://addr/debug/requests`.
    #[must_use]
    pub fn new(addr: SocketAddr) -> Self {
        LogReader {
            addr,
            seen: 0,
            counts: Counts::default(),
            dropped: 0,
        }
    }

    /// Reads the records logged since the last poll.
    ///
    /// # Errors
    /// I/O or a malformed answer.
    pub async fn poll(&mut self) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let mut stream = tokio::net::TcpStream::connect(self.addr).await?;
        let request = format!(
            "GET /debug/requests?since={} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n\r\n",
            self.seen, self.addr
        );
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        let start = answer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or("no body in the answer")?
            + 4;
        let page: Page = serde_json::from_slice(&answer[start..])?;
        self.dropped += page.first - self.seen.min(page.first);
        for r in &page.records {
            self.counts
                .add(&r.verb, &r.resource, r.subresource.as_deref(), r.code);
        }
        self.seen = page.total;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtracts_and_classifies() {
        let mut all = Counts::default();
        all.add("patch", "benchapps", Some("status"), 200);
        all.add("patch", "benchapps", Some("status"), 409);
        all.add("create", "configmaps", None, 409);
        all.add("list", "deployments", None, 200);
        all.add("list", "deployments", None, 200);
        let mut mine = Counts::default();
        mine.add("list", "deployments", None, 200);
        mine.add("list", "deployments", None, 200);
        mine.add("get", "pods", None, 200);
        let theirs = all.minus(&mine);
        assert_eq!(theirs.verb("list"), 0);
        assert_eq!(theirs.writes(), 3);
        assert_eq!(theirs.conflicts(), 1);
        assert_eq!(theirs.already_exists(), 1);
        assert_eq!(theirs.sum(|_, r, _| r == "benchapps/status"), 2);
    }
}
