//! Upgrading an operator with workflows in flight: two builds of one
//! machine share a store. Build 1 drives objects part of the way and
//! stops; build 2 (a state renamed, a state removed and migrated, a field
//! added) resumes every one to its end, and nothing that must run once
//! runs twice. A record written by a newer build is left untouched, by the
//! engine and by every reader.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use fsm_core::prelude::*;
use fsm_core::{
    Commit, DecodeError, Effect, Engine, EphemeralStore, ObjectKey, Observed, RawRecord,
    ReconcileError, RecordCompatibility, Report, StateRecord, StateStore,
};

/// The cloud both builds call: how often each once-only call ran, per
/// object, and whether instances have booted.
#[derive(Default)]
pub struct Cloud {
    calls: Mutex<BTreeMap<String, u32>>,
    booted: Mutex<bool>,
}

impl Cloud {
    /// Counts a call that must run once per object (`create`, `seed`).
    fn once(&self, call: &str, object: &str) {
        *self
            .calls
            .lock()
            .unwrap()
            .entry(format!("{call} {object}"))
            .or_default() += 1;
    }
    fn calls(&self) -> BTreeMap<String, u32> {
        self.calls.lock().unwrap().clone()
    }
    fn booted(&self) -> bool {
        *self.booted.lock().unwrap()
    }
    fn boot(&self) {
        *self.booted.lock().unwrap() = true;
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the cloud is busy")]
/// The handlers' error (never returned).
pub struct Busy;
impl Classify for Busy {}

/// The object a machine runs for: its name.
type Name = String;

/// Build 1: Requested → Provisioning → Seeding → Ready.
mod v1 {
    use super::*;

    #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[fsm(resource = Name, context = Arc<Cloud>, error = Busy)]
    pub enum Db {
        #[fsm(initial, handler = request, next(Provisioning))]
        Requested,
        #[fsm(handler = provisioning, next(Seeding))]
        Provisioning { id: String },
        #[fsm(handler = seeding, next(Ready))]
        Seeding { id: String },
        #[fsm(final, ready)]
        Ready { id: String },
        #[fsm(failed)]
        Failed,
    }

    async fn request(cx: &mut Step<'_, Db>) -> Result<Transition<Db>, Busy> {
        cx.context().once("create", cx.resource());
        Ok(Transition::next(Db::Provisioning {
            id: format!("i-{}", cx.resource()),
        }))
    }

    async fn provisioning(cx: &mut Step<'_, Db>, id: &str) -> Result<Transition<Db>, Busy> {
        Ok(if cx.context().booted() {
            Transition::next(Db::Seeding { id: id.to_owned() })
        } else {
            Transition::stay()
        })
    }

    async fn seeding(cx: &mut Step<'_, Db>, id: &str) -> Result<Transition<Db>, Busy> {
        cx.context().once("seed", cx.resource());
        Ok(Transition::next(Db::Ready { id: id.to_owned() }))
    }
}

/// Build 2: `Provisioning` is renamed `Starting`; `Seeding` is gone,
/// replaced by `Loading` (which seeds in batches), and the migration maps
/// the one onto the other; `Ready` gained a field with a serde default.
mod v2 {
    use super::*;
    use fsm_core::{Migrated, MigrationError, OldRecord};

    #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[fsm(resource = Name, context = Arc<Cloud>, error = Busy)]
    #[fsm(version = 2, migrate = migrate)]
    pub enum Db {
        #[fsm(initial, handler = request, next(Starting))]
        Requested,
        #[fsm(handler = starting, next(Loading), renamed_from = "Provisioning")]
        Starting { id: String },
        #[fsm(handler = loading, next(Ready))]
        Loading { id: String, batch: u32 },
        #[fsm(final, ready)]
        Ready {
            id: String,
            #[serde(default)]
            tier: String,
        },
        #[fsm(failed)]
        Failed,
    }

    /// Build 1's `Seeding { id }` had not seeded yet (its handler seeds and
    /// leaves in one step): `Loading` from the first batch does it.
    fn migrate(old: OldRecord<'_>) -> Result<Migrated<Db>, MigrationError> {
        match (old.version, old.state) {
            (1, "Seeding") => {
                let id = old
                    .data
                    .and_then(|d| d.get("id"))
                    .and_then(|id| id.as_str())
                    .ok_or_else(|| MigrationError::new("Seeding without an id"))?;
                Ok(Migrated::To(Db::Loading {
                    id: id.to_owned(),
                    batch: 0,
                }))
            }
            _ => Ok(Migrated::Keep),
        }
    }

    async fn request(cx: &mut Step<'_, Db>) -> Result<Transition<Db>, Busy> {
        cx.context().once("create", cx.resource());
        Ok(Transition::next(Db::Starting {
            id: format!("i-{}", cx.resource()),
        }))
    }

    async fn starting(cx: &mut Step<'_, Db>, id: &str) -> Result<Transition<Db>, Busy> {
        Ok(if cx.context().booted() {
            Transition::next(Db::Loading {
                id: id.to_owned(),
                batch: 0,
            })
        } else {
            Transition::stay()
        })
    }

    async fn loading(
        cx: &mut Step<'_, Db>,
        id: &str,
        _batch: &u32,
    ) -> Result<Transition<Db>, Busy> {
        cx.context().once("seed", cx.resource());
        Ok(Transition::next(Db::Ready {
            id: id.to_owned(),
            tier: "standard".to_owned(),
        }))
    }
}

fn observed(name: &str) -> Observed {
    Observed {
        commands: Vec::new(),
        key: ObjectKey::cluster(name),
        ..Observed::default()
    }
}

async fn reconcile<S: Fsm<Resource = Name, Context = Arc<Cloud>>>(
    store: &EphemeralStore,
    cloud: &Arc<Cloud>,
    name: &str,
) -> Result<Report, ReconcileError> {
    let engine = Engine::<S>::new().expect("a valid machine");
    engine
        .reconcile(store, &observed(name), &name.to_owned(), cloud)
        .await
}

/// Reconciles `name` with build `S` until its record is in `state`.
async fn drive_to<S: Fsm<Resource = Name, Context = Arc<Cloud>>>(
    store: &EphemeralStore,
    cloud: &Arc<Cloud>,
    name: &str,
    state: &str,
) {
    for _ in 0..10 {
        let report = reconcile::<S>(store, cloud, name).await.unwrap();
        if report.state == state {
            return;
        }
    }
    panic!("{name} did not reach {state}");
}

fn raw(store: &EphemeralStore, name: &str) -> RawRecord {
    store.get_raw(&ObjectKey::cluster(name)).expect("a record")
}

/// A record as build 3 would write it: a machine version this test's
/// builds do not know, and a state neither has.
fn from_build_3() -> RawRecord {
    RawRecord::Json(serde_json::json!({
        "schemaVersion": 1,
        "machineVersion": 3,
        "state": "Replicating",
        "data": {"replicas": 3},
        "enteredAt": "2024-01-01T00:00:00Z",
    }))
}

#[tokio::test]
async fn build_2_resumes_every_object_build_1_left_half_way_and_runs_nothing_twice() {
    let store = EphemeralStore::new();
    let cloud = Arc::new(Cloud::default());

    // Build 1 runs, then is replaced: one object it has only recorded
    // (its first reconcile would also have run the handler), ...
    let requested = StateRecord::new(&v1::Db::Requested, Timestamp::UNIX_EPOCH).unwrap();
    store
        .save(&ObjectKey::cluster("fresh"), Commit::new(&requested, None))
        .await
        .unwrap();
    // ... one waiting for its instance, one about to seed, one done.
    drive_to::<v1::Db>(&store, &cloud, "booting", "Provisioning").await;
    cloud.boot();
    drive_to::<v1::Db>(&store, &cloud, "seeding", "Seeding").await;
    drive_to::<v1::Db>(&store, &cloud, "done", "Ready").await;
    let before_upgrade = cloud.calls();
    assert_eq!(
        before_upgrade,
        BTreeMap::from([
            ("create booting".to_owned(), 1),
            ("create done".to_owned(), 1),
            ("create seeding".to_owned(), 1),
            ("seed done".to_owned(), 1),
        ])
    );
    // What a pre-flight check of build 2 reports, before it runs.
    let preflight: Vec<RecordCompatibility> = ["fresh", "booting", "seeding", "done"]
        .iter()
        .map(|name| raw(&store, name).compatibility::<v2::Db>())
        .collect();
    assert_eq!(
        preflight,
        [
            RecordCompatibility::Current,
            RecordCompatibility::Renamed {
                from: "Provisioning".into(),
                to: "Starting"
            },
            RecordCompatibility::Migrates {
                from_version: 1,
                from_state: "Seeding".into(),
                to_state: "Loading"
            },
            RecordCompatibility::Current,
        ]
    );

    // Build 2 resumes each object: its first reconcile writes the record
    // back as build 2 reads it, before anything runs.
    for (name, from, to) in [
        ("fresh", "Requested", "Requested"),
        ("booting", "Provisioning", "Starting"),
        ("seeding", "Seeding", "Loading"),
        ("done", "Ready", "Ready"),
    ] {
        let report = reconcile::<v2::Db>(&store, &cloud, name).await.unwrap();
        assert_eq!(
            report.effects.first(),
            Some(&Effect::Upgraded {
                from: from.to_owned(),
                to: to.to_owned(),
                from_version: 1,
                to_version: 2,
            }),
            "{name}: {:?}",
            report.effects
        );
        let upgrades = |r: &Report| {
            r.effects
                .iter()
                .filter(|e| matches!(e, Effect::Upgraded { .. }))
                .count()
        };
        assert_eq!(upgrades(&report), 1, "{name}");
        drive_to::<v2::Db>(&store, &cloud, name, "Ready").await;
        let again = reconcile::<v2::Db>(&store, &cloud, name).await.unwrap();
        assert_eq!(upgrades(&again), 0, "{name} was upgraded twice");
        assert_eq!(again.commits, 0, "{name} at rest is not written again");
    }

    // Every object ends ready; each once-only call ran once per object.
    for name in ["fresh", "booting", "seeding", "done"] {
        let record = raw(&store, name).decode::<v2::Db>().unwrap();
        assert_eq!(record.machine_version, 2, "{name}");
        let tier = if name == "done" { "" } else { "standard" };
        assert_eq!(
            record.current::<v2::Db>().unwrap(),
            v2::Db::Ready {
                id: format!("i-{name}"),
                tier: tier.to_owned()
            },
            "{name}"
        );
    }
    let expected: BTreeMap<String, u32> = ["fresh", "booting", "seeding", "done"]
        .iter()
        .flat_map(|name| [format!("create {name}"), format!("seed {name}")])
        .map(|call| (call, 1))
        .collect();
    assert_eq!(cloud.calls(), expected);

    // The history keeps the names the transitions were made under.
    let booting = raw(&store, "booting").decode::<v2::Db>().unwrap();
    let path: Vec<&str> = booting.history.iter().map(|h| h.to.as_str()).collect();
    assert_eq!(path, ["Requested", "Provisioning", "Loading", "Ready"]);
    assert_eq!(booting.history[2].from.as_deref(), Some("Starting"));
}

#[tokio::test]
async fn a_record_of_a_newer_build_is_left_untouched_by_the_engine() {
    let store = EphemeralStore::new();
    let cloud = Arc::new(Cloud::default());
    let key = ObjectKey::cluster("ahead");
    let version = store.insert_raw(key.clone(), from_build_3());

    let error = reconcile::<v2::Db>(&store, &cloud, "ahead")
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            ReconcileError::NewerRecord {
                found: 3,
                supported: 2
            }
        ),
        "{error:?}"
    );
    assert_eq!(store.get_raw(&key), Some(from_build_3()));
    assert_eq!(store.load(&key).await.unwrap().version, Some(version));
    assert!(cloud.calls().is_empty());

    // A rollback: build 1 meets what build 2 wrote, and leaves it too.
    drive_to::<v2::Db>(&store, &cloud, "rolled-back", "Starting").await;
    let written = raw(&store, "rolled-back");
    let error = reconcile::<v1::Db>(&store, &cloud, "rolled-back")
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            ReconcileError::NewerRecord {
                found: 2,
                supported: 1
            }
        ),
        "{error:?}"
    );
    assert_eq!(raw(&store, "rolled-back"), written);
    assert_eq!(
        written.decode::<v1::Db>(),
        Err(DecodeError::NewerMachine {
            found: 2,
            supported: 1
        })
    );
}

#[tokio::test]
async fn a_record_the_migration_refuses_is_left_untouched_and_reported_corrupt() {
    let store = EphemeralStore::new();
    let cloud = Arc::new(Cloud::default());
    let key = ObjectKey::cluster("odd");
    let odd = RawRecord::Json(serde_json::json!({
        "schemaVersion": 1,
        "state": "Seeding",
        "data": {"name": "no id"},
        "enteredAt": "2024-01-01T00:00:00Z",
    }));
    store.insert_raw(key.clone(), odd.clone());
    let error = reconcile::<v2::Db>(&store, &cloud, "odd")
        .await
        .unwrap_err();
    let ReconcileError::Corrupt(DecodeError::Migration {
        state,
        version,
        reason,
    }) = error
    else {
        panic!("{error:?}");
    };
    assert_eq!(
        (state.as_str(), version, reason.as_str()),
        ("Seeding", 1, "Seeding without an id")
    );
    assert_eq!(store.get_raw(&key), Some(odd));
    assert!(cloud.calls().is_empty());
}

/// One row of the classification table: a stored record and how build 2
/// reads it.
struct Row {
    record: serde_json::Value,
    expect: RecordCompatibility,
}

#[test]
fn build_2_classifies_stored_records_without_running_anything() {
    let at = "2024-01-01T00:00:00Z";
    let rows = [
        Row {
            // Written by build 2: as is.
            record: serde_json::json!({"schemaVersion": 1, "machineVersion": 2, "state": "Starting", "data": {"id": "i"}, "enteredAt": at}),
            expect: RecordCompatibility::Current,
        },
        Row {
            // Build 1's `Ready` lacks the added field: its default.
            record: serde_json::json!({"schemaVersion": 1, "state": "Ready", "data": {"id": "i"}, "enteredAt": at}),
            expect: RecordCompatibility::Current,
        },
        Row {
            // A former name loads whatever version wrote it.
            record: serde_json::json!({"schemaVersion": 1, "machineVersion": 2, "state": "Provisioning", "data": {"id": "i"}, "enteredAt": at}),
            expect: RecordCompatibility::Renamed {
                from: "Provisioning".into(),
                to: "Starting",
            },
        },
        Row {
            record: serde_json::json!({"schemaVersion": 1, "machineVersion": 1, "state": "Seeding", "data": {"id": "i"}, "enteredAt": at}),
            expect: RecordCompatibility::Migrates {
                from_version: 1,
                from_state: "Seeding".into(),
                to_state: "Loading",
            },
        },
        Row {
            record: serde_json::json!({"schemaVersion": 1, "machineVersion": 3, "state": "Replicating", "enteredAt": at}),
            expect: RecordCompatibility::Newer {
                version: 3,
                supported: 2,
            },
        },
        Row {
            // A newer build's record need not even be one this build parses.
            record: serde_json::json!({"schemaVersion": 1, "machineVersion": 7, "state": {"a": "shape of its own"}}),
            expect: RecordCompatibility::Newer {
                version: 7,
                supported: 2,
            },
        },
        Row {
            // Build 2's own records are not migrated: `Seeding` is unknown.
            record: serde_json::json!({"schemaVersion": 1, "machineVersion": 2, "state": "Seeding", "data": {"id": "i"}, "enteredAt": at}),
            expect: RecordCompatibility::Unreadable {
                reason: DecodeError::UnknownState {
                    state: "Seeding".into(),
                    machine: "Db",
                },
            },
        },
        Row {
            record: serde_json::json!({"schemaVersion": 1, "state": "Seeding", "data": {}, "enteredAt": at}),
            expect: RecordCompatibility::Unreadable {
                reason: DecodeError::Migration {
                    state: "Seeding".into(),
                    version: 1,
                    reason: "Seeding without an id".into(),
                },
            },
        },
        Row {
            record: serde_json::json!({"schemaVersion": 2, "state": "Ready", "enteredAt": at}),
            expect: RecordCompatibility::Unreadable {
                reason: DecodeError::NewerSchema {
                    found: 2,
                    supported: 1,
                },
            },
        },
    ];
    for Row { record, expect } in rows {
        let raw = RawRecord::Json(record.clone());
        assert_eq!(raw.compatibility::<v2::Db>(), expect, "{record}");
        assert_eq!(
            raw.compatibility::<v2::Db>().is_loadable(),
            raw.decode::<v2::Db>().is_ok(),
            "{record}"
        );
    }
}

#[test]
fn renames_and_migrations_reach_the_trail_and_the_unwinding_target() {
    let raw = RawRecord::Json(serde_json::json!({
        "schemaVersion": 1,
        "state": "Provisioning",
        "data": {"id": "i"},
        "enteredAt": "2024-01-01T00:00:00Z",
        "attempt": 2,
        "lastError": "busy",
        "history": [{"seq": 1, "to": "Provisioning", "at": "2024-01-01T00:00:00Z"}],
        "trail": [
            {"state": "Seeding", "data": {"id": "i"}, "enteredAt": "2024-01-01T00:00:00Z"},
            {"state": "Provisioning", "data": {"id": "i"}, "enteredAt": "2024-01-01T00:00:00Z"},
        ],
    }));
    let upgraded = raw.upgrade::<v2::Db>().unwrap();
    assert!(upgraded.changed);
    assert_eq!(upgraded.stored_state, "Provisioning");
    assert_eq!(upgraded.stored_version, 1);
    let record = upgraded.record;
    assert_eq!(record.state, "Starting");
    // A rename is the same state: its retry bookkeeping stays.
    assert_eq!(
        (record.attempt, record.last_error.as_deref()),
        (2, Some("busy"))
    );
    let trail: Vec<&str> = record.trail.iter().map(|t| t.state.as_str()).collect();
    assert_eq!(trail, ["Loading", "Starting"]);
    assert_eq!(
        record.trail[0].data,
        Some(serde_json::json!({"id": "i", "batch": 0}))
    );
    assert_eq!(record.history[0].to, "Provisioning");

    // A migrated current state is another state: its retries start over.
    let seeding = RawRecord::Json(serde_json::json!({
        "schemaVersion": 1,
        "state": "Seeding",
        "data": {"id": "i"},
        "enteredAt": "2024-01-01T00:00:00Z",
        "attempt": 2,
        "lastError": "busy",
    }));
    let record = seeding.decode::<v2::Db>().unwrap();
    assert_eq!(
        (record.state.as_str(), record.attempt, record.last_error),
        ("Loading", 0, None)
    );
}

/// A store where another replica writes the record right after this one
/// loads it, once.
struct Racing {
    inner: EphemeralStore,
    raced: std::sync::atomic::AtomicBool,
}

impl StateStore for Racing {
    fn load<'a>(
        &'a self,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, Result<fsm_core::Loaded, fsm_core::StoreError>> {
        Box::pin(async move {
            let loaded = self.inner.load(key).await?;
            if !self.raced.swap(true, std::sync::atomic::Ordering::SeqCst)
                && let Some(raw) = &loaded.record
            {
                self.inner.insert_raw(key.clone(), raw.clone());
            }
            Ok(loaded)
        })
    }

    fn save<'a>(
        &'a self,
        key: &'a ObjectKey,
        commit: Commit<'a>,
    ) -> BoxFuture<'a, Result<fsm_core::Version, fsm_core::StoreError>> {
        self.inner.save(key, commit)
    }

    fn delete<'a>(
        &'a self,
        key: &'a ObjectKey,
        expected: Option<&'a fsm_core::Version>,
    ) -> BoxFuture<'a, Result<(), fsm_core::StoreError>> {
        self.inner.delete(key, expected)
    }
}

#[tokio::test]
async fn an_upgrade_that_conflicts_commits_nothing_and_runs_nothing() {
    let store = Racing {
        inner: EphemeralStore::new(),
        raced: false.into(),
    };
    let cloud = Arc::new(Cloud::default());
    let key = ObjectKey::cluster("raced");
    let requested = StateRecord::new(&v1::Db::Requested, Timestamp::UNIX_EPOCH).unwrap();
    store
        .inner
        .save(&key, Commit::new(&requested, None))
        .await
        .unwrap();
    let written = store.inner.get_raw(&key);

    let engine = Engine::<v2::Db>::new().unwrap();
    let resource = "raced".to_owned();
    let error = engine
        .reconcile(&store, &observed("raced"), &resource, &cloud)
        .await
        .unwrap_err();
    assert!(matches!(error, ReconcileError::Conflict), "{error:?}");
    assert_eq!(store.inner.get_raw(&key), written);
    assert!(
        cloud.calls().is_empty(),
        "a handler ran on an uncommitted upgrade"
    );

    // The next reconcile upgrades, then runs the handler once.
    let report = engine
        .reconcile(&store, &observed("raced"), &resource, &cloud)
        .await
        .unwrap();
    assert!(matches!(
        report.effects.first(),
        Some(Effect::Upgraded { .. })
    ));
    assert_eq!(
        cloud.calls(),
        BTreeMap::from([("create raced".to_owned(), 1)])
    );
}

/// A record a store kept decoded after committing it: the build that wrote
/// it reads it as is; another build reads it as its JSON, through the same
/// renames, migrations and refusals as any stored record.
#[test]
fn a_record_kept_decoded_is_upgraded_like_its_json_by_other_builds() {
    use fsm_core::DecodedRecord;
    let at = Timestamp::UNIX_EPOCH;
    let keep = |machine, record: &StateRecord| {
        RawRecord::Decoded(DecodedRecord::new(machine, Arc::new(record.clone())))
    };

    // Build 2's own commit: read without decoding, the same record.
    let own = StateRecord::new(&v2::Db::Starting { id: "i".into() }, at).unwrap();
    let upgraded = keep(v2::Db::machine(), &own).upgrade::<v2::Db>().unwrap();
    assert_eq!(upgraded.record, own);
    assert_eq!(upgraded.compatibility, RecordCompatibility::Current);
    assert!(!upgraded.changed);
    let from_json = own.to_raw().unwrap().upgrade::<v2::Db>().unwrap();
    assert_eq!(from_json.record, upgraded.record);

    // Build 1's commit, read by build 2: migrated like its JSON.
    let old = StateRecord::new(&v1::Db::Seeding { id: "i".into() }, at).unwrap();
    let upgraded = keep(v1::Db::machine(), &old).upgrade::<v2::Db>().unwrap();
    let from_json = old.to_raw().unwrap().upgrade::<v2::Db>().unwrap();
    assert_eq!(upgraded.record, from_json.record);
    assert!(upgraded.changed);
    assert_eq!(upgraded.record.state, "Loading");

    // Build 2's commit, read by build 1 (a rollback): refused, as newer.
    assert_eq!(
        keep(v2::Db::machine(), &own)
            .upgrade::<v1::Db>()
            .unwrap_err(),
        DecodeError::NewerMachine {
            found: 2,
            supported: 1
        }
    );
}
