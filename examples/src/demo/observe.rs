//! Reading each object's machine record from the cluster, whichever store
//! its operator uses.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::{Client, ResourceExt};
use operator_fsm::core::{HistoryEntry, StateRecord, Timestamp};
use operator_fsm::store::{OWNER_UID_LABEL, RecordObject, record_object_name_for};

use crate::database::{Database, DbState};
use crate::integration::Integration;
use crate::mutable_jar::Keycloak;
use crate::shop::Shop;
use crate::webpage::WebPage;

/// The kinds the demo runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// [`Keycloak`], record in its status.
    Keycloak,
    /// [`Integration`], record in its status.
    Integration,
    /// [`Database`], record in its Secret (see
    /// [`record_object_name_for`]).
    Database,
    /// [`WebPage`] run by its machine, record in its status.
    WebPage,
    /// [`Shop`], record in its status.
    Shop,
}

impl Kind {
    /// The kind's name as `kubectl` shows it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Keycloak => "keycloak",
            Kind::Integration => "integration",
            Kind::Database => "database",
            Kind::WebPage => "webpage",
            Kind::Shop => "shop",
        }
    }
}

/// One object the demo follows, and the state it must rest in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tracked {
    /// Its kind.
    pub kind: Kind,
    /// Its name.
    pub name: String,
    /// The state it must rest in.
    pub expected: &'static str,
    /// What the object demonstrates, for the summary.
    pub story: &'static str,
}

/// What the demo knows of one object's machine.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectView {
    /// Which object.
    pub tracked: Tracked,
    /// Its record; `None` before the operator's first commit.
    pub record: Option<StateRecord>,
}

impl ObjectView {
    /// The current state's name, or `-`.
    pub fn state(&self) -> &str {
        self.record.as_ref().map_or("-", |r| r.state.as_str())
    }

    /// Failed attempts of the current state.
    pub fn attempt(&self) -> u32 {
        self.record.as_ref().map_or(0, |r| r.attempt)
    }

    /// Whether compensation is running.
    pub fn unwinding(&self) -> bool {
        self.record.as_ref().is_some_and(StateRecord::is_unwinding)
    }

    /// The last error, if the state has one.
    pub fn last_error(&self) -> Option<&str> {
        self.record.as_ref()?.last_error.as_deref()
    }

    /// The transitions committed, oldest first.
    pub fn history(&self) -> &[HistoryEntry] {
        self.record.as_ref().map_or(&[], |r| r.history.as_slice())
    }

    /// How long it has been in its state at `now`.
    pub fn time_in_state(&self, now: Timestamp) -> Duration {
        self.record.as_ref().map_or(Duration::ZERO, |r| {
            let ms = now.as_millisecond() - r.entered_at.as_millisecond();
            Duration::from_millis(u64::try_from(ms).unwrap_or(0))
        })
    }

    /// Whether it rests in its expected state: there, not compensating, no
    /// retry pending.
    pub fn at_rest_as_expected(&self) -> bool {
        self.record.as_ref().is_some_and(|r| {
            r.state == self.tracked.expected && !r.is_unwinding() && r.next_attempt_at.is_none()
        })
    }
}

fn decode(value: serde_json::Value) -> Option<StateRecord> {
    serde_json::from_value(value).ok()
}

/// The record of one object, read from its store.
///
/// # Errors
/// The API's error (a missing object is `Ok(None)`).
pub async fn read_record(
    client: &Client,
    namespace: &str,
    kind: Kind,
    name: &str,
) -> Result<Option<StateRecord>, kube::Error> {
    Ok(match kind {
        Kind::Keycloak => Api::<Keycloak>::namespaced(client.clone(), namespace)
            .get_opt(name)
            .await?
            .and_then(|o| o.status?.fsm)
            .and_then(|f| decode(f.to_value())),
        Kind::Integration => Api::<Integration>::namespaced(client.clone(), namespace)
            .get_opt(name)
            .await?
            .and_then(|o| o.status?.fsm)
            .and_then(|f| decode(f.to_value())),
        Kind::WebPage => Api::<WebPage>::namespaced(client.clone(), namespace)
            .get_opt(name)
            .await?
            .and_then(|o| o.status?.fsm)
            .and_then(|f| decode(f.to_value())),
        Kind::Shop => Api::<Shop>::namespaced(client.clone(), namespace)
            .get_opt(name)
            .await?
            .and_then(|o| o.status?.fsm)
            .and_then(|f| decode(f.to_value())),
        Kind::Database => {
            // The record's Secret can outlive a deleted Database until
            // garbage collection: only read it while the Database exists.
            let databases = Api::<Database>::namespaced(client.clone(), namespace);
            let Some(database) = databases.get_opt(name).await? else {
                return Ok(None);
            };
            // Its record object, unless it is an earlier Database's.
            Api::<Secret>::namespaced(client.clone(), namespace)
                .get_opt(&record_object_name_for::<DbState>(&database.name_any()))
                .await?
                .filter(|s| s.labels().get(OWNER_UID_LABEL) == database.uid().as_ref())
                .and_then(|s| s.record_text()?.ok())
                .and_then(|text| serde_json::from_str(&text).ok())
        }
    })
}

/// Every tracked object's view.
///
/// # Errors
/// The API's error.
pub async fn observe(
    client: &Client,
    namespace: &str,
    tracked: &[Tracked],
) -> Result<Vec<ObjectView>, kube::Error> {
    let mut views = Vec::with_capacity(tracked.len());
    for t in tracked {
        let record = read_record(client, namespace, t.kind, &t.name).await?;
        views.push(ObjectView {
            tracked: t.clone(),
            record,
        });
    }
    Ok(views)
}
