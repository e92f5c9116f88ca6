//! `watch`: a line each time an object's state, attempt, retry time or
//! error changes, from the watches of [`object_changes`]; never by polling.
//!
//! [`Printed`] is pure; [`watch`] does the I/O.

use std::collections::HashMap;
use std::io::Write;

use fsm_core::Timestamp;
use fsm_kube::records::changes::{ObjectChange, object_changes};
use fsm_kube::records::rows::{self, Row};
use futures::StreamExt;

use crate::error::Error;
use crate::table;
use crate::target::Target;

/// What was last printed for each object, so that a line is printed only
/// when something people see changes.
#[derive(Debug, Default)]
pub struct Printed {
    rows: HashMap<(Option<String>, String), Row>,
}

impl Printed {
    /// Whether `row` differs from what was last printed for its object;
    /// records it if so.
    pub fn is_news(&mut self, row: &Row) -> bool {
        let key = (row.namespace.clone(), row.name.clone());
        if self.rows.get(&key) == Some(row) {
            return false;
        }
        self.rows.insert(key, row.clone());
        true
    }

    /// Forgets a deleted object; whether it had been printed.
    pub fn forget(&mut self, namespace: Option<String>, name: String) -> bool {
        self.rows.remove(&(namespace, name)).is_some()
    }
}

/// Prints a header, then a line ([`table::watch_line`]) whenever the
/// state, attempt, retry time or error of an object in `namespace`
/// (`None`: all) changes, and when one is deleted, until the watch ends
/// (never, unless the process is stopped). Watch errors are reported on
/// stderr and retried with backoff.
///
/// # Errors
/// The API's errors reading a record, and output errors.
pub async fn watch(
    client: &kube::Client,
    target: &Target,
    namespace: Option<&str>,
    out: &mut (dyn Write + Send),
) -> Result<(), Error> {
    let namespaces = namespace.is_none() && target.resource.namespaced;
    let write = |out: &mut (dyn Write + Send), text: &str| {
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(Error::Output)
    };
    write(out, &table::watch_header(namespaces))?;
    let mut changes = std::pin::pin!(object_changes(client, target, namespace));
    let mut printed = Printed::default();
    while let Some(change) = changes.next().await {
        match change {
            Err(error) => eprintln!("watch failed (retrying): {error}"),
            Ok(ObjectChange::Deleted {
                namespace: ns,
                name,
            }) => {
                if printed.forget(ns.clone(), name.clone()) {
                    let time = Timestamp::now().strftime("%H:%M:%S");
                    let place = ns
                        .filter(|_| namespaces)
                        .map(|n| format!("{n} "))
                        .unwrap_or_default();
                    write(out, &format!("{time} {place}{name} <deleted>\n"))?;
                }
            }
            Ok(ObjectChange::Touched {
                namespace: ns,
                name,
            }) => {
                if let Some(row) = rows::row(client, target, ns.as_deref(), &name).await?
                    && printed.is_news(&row)
                {
                    write(out, &table::watch_line(&row, Timestamp::now(), namespaces))?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(state: &str, attempt: u32) -> Row {
        Row {
            name: "j1".into(),
            namespace: Some("ns".into()),
            state: Some(state.into()),
            attempt,
            entered_at: None,
            next_attempt_at: None,
            last_error: None,
            compensating: false,
            problem: None,
        }
    }

    #[test]
    fn only_changes_people_see_are_news() {
        let mut printed = Printed::default();
        assert!(printed.is_news(&row("Pending", 0)));
        assert!(!printed.is_news(&row("Pending", 0)));
        assert!(printed.is_news(&row("Pending", 1)));
        assert!(printed.is_news(&row("Done", 0)));
        assert!(printed.forget(Some("ns".into()), "j1".into()));
        assert!(!printed.forget(Some("ns".into()), "j1".into()));
    }
}
