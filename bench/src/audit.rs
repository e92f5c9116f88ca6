//! Counting the operator's requests on a real kube-apiserver from its audit
//! log: `scripts/real-apiserver/start` with `FSM_REAL_APISERVER_AUDIT_USER`
//! gives the operator a user of its own and logs that user's requests only
//! (Metadata level, JSON lines), so the driver's and the workload
//! simulation's requests are never in the log and nothing is subtracted.
//!
//! The policy omits the `RequestReceived` stage, which leaves one
//! `ResponseComplete` event per request, plus one `ResponseStarted` event
//! for a long-running request (a watch) before its `ResponseComplete`. A
//! request is counted once, at its first event: a `ResponseComplete` whose
//! `auditID` was already seen started is skipped. kube-apiserver 1.20 wrote
//! a watch's `ResponseStarted` event only when the watch ended, so a watch
//! still open is counted when the operator stops.
//!
//! Verbs are the apiserver's (`get`, `list`, `watch`, `create`, `update`,
//! `patch`, `delete`, …), the resource is `resource/subresource` for a
//! subresource and empty for a non-resource path (discovery), as in the
//! embedded server's log; a 409 on `create` is `AlreadyExists`, on `update`
//! or `patch` a version conflict ([`Counts::conflicts`]).

use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use serde::Deserialize;

use crate::requests::Counts;

/// What went wrong reading the audit log.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The file could not be read.
    #[error("reading the audit log {path}: {source}")]
    Io {
        /// The audit log.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A complete line that is not an audit event.
    #[error("audit log line {line}: {source}")]
    Malformed {
        /// The line's number, from 1.
        line: u64,
        /// The cause.
        source: serde_json::Error,
    },
    /// An event without a response code at a stage that has one.
    #[error("audit log line {line}: no response code")]
    NoCode {
        /// The line's number, from 1.
        line: u64,
    },
}

/// The fields of an `audit.k8s.io/v1` `Event` the count needs.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    #[serde(rename = "auditID")]
    audit_id: String,
    stage: String,
    verb: String,
    user: User,
    object_ref: Option<ObjectRef>,
    response_status: Option<ResponseStatus>,
}

#[derive(Debug, Deserialize)]
struct User {
    username: String,
}

#[derive(Debug, Deserialize)]
struct ObjectRef {
    resource: Option<String>,
    subresource: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ResponseStatus {
    code: Option<u16>,
}

/// Follows an audit log file and counts one user's requests.
#[derive(Debug)]
pub struct AuditReader {
    path: PathBuf,
    user: String,
    offset: u64,
    /// The bytes after the last newline read (a line being written).
    partial: Vec<u8>,
    lines: u64,
    /// Requests counted at `ResponseStarted`, whose `ResponseComplete` is
    /// still to come.
    started: HashSet<String>,
    /// Every request of the user read so far.
    pub counts: Counts,
}

impl AuditReader {
    /// A reader of the audit log at `path` counting `user`'s requests (the
    /// file need not exist yet).
    #[must_use]
    pub fn new(path: PathBuf, user: &str) -> Self {
        AuditReader {
            path,
            user: user.to_owned(),
            offset: 0,
            partial: Vec::new(),
            lines: 0,
            started: HashSet::new(),
            counts: Counts::default(),
        }
    }

    /// Reads the events written since the last poll.
    ///
    /// # Errors
    /// [`AuditError`] on I/O or a malformed event.
    pub fn poll(&mut self) -> Result<(), AuditError> {
        let io = |source| AuditError::Io {
            path: self.path.clone(),
            source,
        };
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io(e)),
        };
        file.seek(SeekFrom::Start(self.offset)).map_err(io)?;
        let mut fresh = Vec::new();
        file.read_to_end(&mut fresh).map_err(io)?;
        self.offset += fresh.len() as u64;
        self.feed(&fresh)
    }

    /// Counts the complete lines in `partial` + `bytes`, keeping the rest.
    fn feed(&mut self, bytes: &[u8]) -> Result<(), AuditError> {
        self.partial.extend_from_slice(bytes);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return Ok(());
        };
        let complete: Vec<u8> = self.partial.drain(..=end).collect();
        for line in complete.split(|b| *b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            self.lines += 1;
            let event: Event =
                serde_json::from_slice(line).map_err(|source| AuditError::Malformed {
                    line: self.lines,
                    source,
                })?;
            self.count(event)?;
        }
        Ok(())
    }

    fn count(&mut self, event: Event) -> Result<(), AuditError> {
        if event.user.username != self.user {
            return Ok(());
        }
        match event.stage.as_str() {
            "ResponseStarted" => {
                self.started.insert(event.audit_id.clone());
            }
            "ResponseComplete" if self.started.remove(&event.audit_id) => return Ok(()),
            "ResponseComplete" | "Panic" => {}
            // RequestReceived (when a policy keeps it) has no response yet.
            _ => return Ok(()),
        }
        let code = event
            .response_status
            .and_then(|s| s.code)
            .ok_or(AuditError::NoCode { line: self.lines })?;
        let (resource, subresource) = match event.object_ref {
            Some(o) => (o.resource.unwrap_or_default(), o.subresource),
            None => (String::new(), None),
        };
        self.counts
            .add(&event.verb, &resource, subresource.as_deref(), code);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: &str, stage: &str, verb: &str, user: &str, rest: &str) -> String {
        format!(
            r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"{id}","stage":"{stage}","requestURI":"/x","verb":"{verb}","user":{{"username":"{user}","groups":["system:masters"]}},"sourceIPs":["127.0.0.1"]{rest}}}"#
        ) + "\n"
    }

    const OP: &str = "bench-operator";

    fn status_patch(id: &str, code: u16) -> String {
        event(
            id,
            "ResponseComplete",
            "patch",
            OP,
            &format!(
                r#","objectRef":{{"resource":"benchapps","namespace":"default","name":"app-1","apiGroup":"bench.operator-fsm.io","subresource":"status"}},"responseStatus":{{"metadata":{{}},"code":{code}}}"#
            ),
        )
    }

    #[test]
    fn counts_each_request_once_and_only_the_users() {
        let watch = r#","objectRef":{"resource":"benchapps","namespace":"default"},"responseStatus":{"metadata":{},"status":"Success","code":200}"#;
        let create = |id: &str, user: &str, code: u16| {
            event(
                id,
                "ResponseComplete",
                "create",
                user,
                &format!(
                    r#","objectRef":{{"resource":"configmaps","namespace":"default","name":"a"}},"responseStatus":{{"metadata":{{}},"code":{code}}}"#
                ),
            )
        };
        let log = [
            event("w1", "ResponseStarted", "watch", OP, watch),
            status_patch("p1", 200),
            status_patch("p2", 409),
            create("c1", OP, 201),
            create("c2", OP, 409),
            create("c3", "admin", 201),
            event("w1", "ResponseComplete", "watch", OP, watch),
            // A watch that ended before its start was logged.
            event("w2", "ResponseComplete", "watch", OP, watch),
            // Discovery: no objectRef.
            event(
                "d1",
                "ResponseComplete",
                "get",
                OP,
                r#","responseStatus":{"metadata":{},"code":200}"#,
            ),
        ]
        .concat();
        let mut reader = AuditReader::new(PathBuf::new(), OP);
        reader.feed(log.as_bytes()).unwrap();
        let c = &reader.counts;
        assert_eq!(c.verb("watch"), 2);
        assert_eq!(c.sum(|v, r, _| v == "patch" && r == "benchapps/status"), 2);
        assert_eq!(c.conflicts(), 1);
        assert_eq!(c.already_exists(), 1);
        assert_eq!(c.verb("create"), 2, "admin's create is not counted");
        assert_eq!(c.sum(|v, r, _| v == "get" && r.is_empty()), 1);
        assert_eq!(c.sum(|_, _, _| true), 7);
    }

    #[test]
    fn a_line_split_across_polls_is_counted_once_complete() {
        let line = status_patch("p1", 200);
        let (a, b) = line.split_at(40);
        let mut reader = AuditReader::new(PathBuf::new(), OP);
        reader.feed(a.as_bytes()).unwrap();
        assert_eq!(reader.counts, Counts::default());
        reader.feed(b.as_bytes()).unwrap();
        assert_eq!(reader.counts.verb("patch"), 1);
    }

    #[test]
    fn a_corrupt_line_is_reported_with_its_number() {
        let log = status_patch("p1", 200) + "{not json\n";
        let mut reader = AuditReader::new(PathBuf::new(), OP);
        let err = reader.feed(log.as_bytes()).unwrap_err();
        assert!(
            matches!(err, AuditError::Malformed { line: 2, .. }),
            "{err}"
        );
        let no_code = event("x", "ResponseComplete", "get", OP, "");
        let err = AuditReader::new(PathBuf::new(), OP)
            .feed(no_code.as_bytes())
            .unwrap_err();
        assert!(matches!(err, AuditError::NoCode { line: 1 }), "{err}");
    }

    #[test]
    fn polls_a_growing_file() {
        let path = std::env::temp_dir().join(format!("bench-audit-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut reader = AuditReader::new(path.clone(), OP);
        reader.poll().unwrap();
        std::fs::write(&path, status_patch("p1", 200)).unwrap();
        reader.poll().unwrap();
        let mut more = status_patch("p1", 200);
        more.push_str(&status_patch("p2", 200));
        std::fs::write(&path, more).unwrap();
        reader.poll().unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(reader.counts.verb("patch"), 2);
    }
}
