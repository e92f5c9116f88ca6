//! Saga scopes on a long-lived object: a `Shop` is provisioned, then
//! upgraded version after version, each upgrade a compensable migration
//! that rolls the deployment back. Reaching the `ready` state closes the
//! scope: a failed upgrade undoes only itself, the trail stays bounded over
//! a hundred upgrades, deletion still undoes what the object made (the
//! latest entry of each state), and a record written before scopes loads
//! under the new rule.

use std::sync::{Arc, Mutex};

use fsm_core::prelude::*;
use fsm_core::{Engine, EphemeralStore, ObjectKey, Observed, RawRecord, StateRecord};

/// The world the handlers act on: the version the deployment runs, the
/// versions whose migration fails, and a log of every call.
#[derive(Default)]
struct World {
    deployed: Mutex<u32>,
    broken: Mutex<Vec<u32>>,
    log: Mutex<Vec<String>>,
}

impl World {
    fn note(&self, line: String) {
        self.log.lock().unwrap().push(line);
    }
    fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }
    fn deployed(&self) -> u32 {
        *self.deployed.lock().unwrap()
    }
    fn deploy(&self, version: u32) {
        *self.deployed.lock().unwrap() = version;
    }
}

/// The spec: the version the shop should run.
struct Spec {
    version: u32,
}

#[derive(Debug, thiserror::Error)]
#[error("migration to v{0} failed")]
struct MigrationFailed(u32);

impl Classify for MigrationFailed {
    fn class(&self) -> ErrorClass {
        ErrorClass::Permanent
    }
}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Spec, context = Arc<World>, error = MigrationFailed)]
#[fsm(on_spec_change = continue, on_delete = compensate)]
enum Shop {
    #[fsm(initial, handler = provision, compensate = deprovision, next(Serving))]
    Provisioning,
    #[fsm(handler = migrate, compensate = roll_back, next(Serving))]
    Migrating { from: u32, to: u32 },
    #[fsm(ready, handler = serve, next(Migrating))]
    Serving { version: u32 },
    #[fsm(failed)]
    Failed,
}

async fn provision(cx: &mut Step<'_, Shop>) -> Result<Transition<Shop>, MigrationFailed> {
    let version = cx.resource().version;
    cx.context().note(format!("provision v{version}"));
    cx.context().deploy(version);
    Ok(Transition::next(Shop::Serving { version }))
}

async fn deprovision(cx: &mut Step<'_, Shop>) -> Result<(), MigrationFailed> {
    cx.context().note("deprovision".to_owned());
    cx.context().deploy(0);
    Ok(())
}

async fn migrate(
    cx: &mut Step<'_, Shop>,
    from: &u32,
    to: &u32,
) -> Result<Transition<Shop>, MigrationFailed> {
    if cx.context().broken.lock().unwrap().contains(to) {
        return Err(MigrationFailed(*to));
    }
    cx.context().note(format!("migrate v{from}->v{to}"));
    cx.context().deploy(*to);
    Ok(Transition::next(Shop::Serving { version: *to }))
}

async fn roll_back(cx: &mut Step<'_, Shop>, from: &u32, to: &u32) -> Result<(), MigrationFailed> {
    cx.context().note(format!("roll back v{to}->v{from}"));
    cx.context().deploy(*from);
    Ok(())
}

async fn serve(
    cx: &mut Step<'_, Shop>,
    version: &u32,
) -> Result<Transition<Shop>, MigrationFailed> {
    let wanted = cx.resource().version;
    if wanted == *version {
        return Ok(Transition::stay());
    }
    Ok(Transition::next(Shop::Migrating {
        from: *version,
        to: wanted,
    }))
}

/// One shop in a store, reconciled as the runtime would: the spec's
/// generation goes up with each version asked for.
struct Fixture {
    store: EphemeralStore,
    world: Arc<World>,
    engine: Engine<Shop>,
    generation: i64,
    spec: Spec,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            store: EphemeralStore::new(),
            world: Arc::new(World::default()),
            engine: Engine::new().expect("a valid machine"),
            generation: 1,
            spec: Spec { version: 1 },
        }
    }

    fn key() -> ObjectKey {
        ObjectKey::namespaced("shops", "corner")
    }

    fn observed(&self, deleting: bool) -> Observed {
        Observed {
            commands: Vec::new(),
            key: Self::key(),
            generation: Some(self.generation),
            deleting,
            ..Observed::default()
        }
    }

    /// Reconciles until nothing is left to do now; the last state.
    async fn settle(&self, deleting: bool) -> String {
        let mut state = String::new();
        for _ in 0..50 {
            let report = self
                .engine
                .reconcile(
                    &self.store,
                    &self.observed(deleting),
                    &self.spec,
                    &self.world,
                )
                .await
                .expect("a reconcile");
            state = report.state.clone();
            if report.commits == 0 || report.released {
                return state;
            }
        }
        panic!("no rest after 50 reconciles (in {state})");
    }

    /// Asks for `version` and reconciles to rest.
    async fn upgrade_to(&mut self, version: u32) -> String {
        self.spec.version = version;
        self.generation += 1;
        self.settle(false).await
    }

    fn record(&self) -> StateRecord {
        stored(&self.store, &Self::key())
    }
}

/// The record as the store holds it (no rule of this build applied).
fn stored(store: &EphemeralStore, key: &ObjectKey) -> StateRecord {
    let raw = store.get_raw(key).expect("a stored record");
    serde_json::from_value(raw.as_json()).expect("a record")
}

/// `(state, closed)` of each entry of the record's trail.
fn trail(record: &StateRecord) -> Vec<(String, bool)> {
    record
        .trail
        .iter()
        .map(|e| (e.state.clone(), e.closed))
        .collect()
}

#[tokio::test]
async fn a_failed_upgrade_undoes_only_itself() {
    let mut shop = Fixture::new();
    assert_eq!(shop.settle(false).await, "Serving");
    assert_eq!(shop.upgrade_to(2).await, "Serving");
    assert_eq!(shop.world.take_log(), ["provision v1", "migrate v1->v2"]);

    shop.world.broken.lock().unwrap().push(3);
    shop.world.deploy(3); // the migration got half way before failing
    assert_eq!(shop.upgrade_to(3).await, "Failed");
    assert_eq!(
        shop.world.take_log(),
        ["roll back v3->v2"],
        "only the open scope (v2->v3) is undone; v1->v2 finished and stays"
    );
    assert_eq!(shop.world.deployed(), 2);
    let record = shop.record();
    assert_eq!(record.last_error.as_deref(), Some("migration to v3 failed"));
    assert_eq!(
        trail(&record),
        [("Provisioning".into(), true), ("Migrating".into(), true)],
        "the closed scopes stay for deletion"
    );
}

#[tokio::test]
async fn the_trail_stays_bounded_over_a_hundred_upgrades() {
    let mut shop = Fixture::new();
    shop.settle(false).await;
    for version in 2..=101 {
        assert_eq!(shop.upgrade_to(version).await, "Serving");
        let record = shop.record();
        assert!(
            record.trail.len() <= 2,
            "after v{version}: {:?}",
            trail(&record)
        );
        assert!(
            record.open_trail().is_empty(),
            "a resting shop has no open scope"
        );
    }
    let record = shop.record();
    assert_eq!(
        record.trail.last().and_then(|e| e.data.clone()),
        Some(serde_json::json!({"from": 100, "to": 101})),
        "the latest entry of each state is the one kept"
    );
}

#[tokio::test]
async fn deletion_undoes_the_latest_of_each_closed_state_in_reverse_order() {
    let mut shop = Fixture::new();
    shop.settle(false).await;
    for version in 2..=5 {
        shop.upgrade_to(version).await;
    }
    shop.world.take_log();
    shop.settle(true).await;
    assert_eq!(
        shop.world.take_log(),
        ["roll back v5->v4", "deprovision"],
        "each compensable state once, newest first"
    );
    assert_eq!(shop.world.deployed(), 0);
}

#[tokio::test]
async fn deletion_after_a_failed_upgrade_still_deprovisions() {
    let mut shop = Fixture::new();
    shop.settle(false).await;
    shop.world.broken.lock().unwrap().push(2);
    assert_eq!(shop.upgrade_to(2).await, "Failed");
    assert_eq!(
        shop.world.take_log(),
        ["provision v1", "roll back v2->v1"],
        "the failed migration, entered, is undone"
    );
    shop.settle(true).await;
    assert_eq!(shop.world.take_log(), ["deprovision"]);
}

#[tokio::test]
async fn a_record_written_before_scopes_loads_under_the_new_rule() {
    // An earlier build kept every compensable state on the trail, open,
    // for the object's life: provisioned, then upgraded v1->v2->v3.
    let mut shop = Fixture::new();
    shop.spec.version = 3;
    let legacy = serde_json::json!({
        "schemaVersion": 1,
        "state": "Serving",
        "data": {"version": 3},
        "enteredAt": "2026-01-03T00:00:00Z",
        "observedGeneration": 1,
        "transitions": 5,
        "trail": [
            {"state": "Provisioning", "enteredAt": "2026-01-01T00:00:00Z"},
            {"state": "Migrating", "data": {"from": 1, "to": 2}, "enteredAt": "2026-01-02T00:00:00Z"},
            {"state": "Migrating", "data": {"from": 2, "to": 3}, "enteredAt": "2026-01-03T00:00:00Z"},
        ],
    });
    shop.store
        .insert_raw(Fixture::key(), RawRecord::Json(legacy.clone()));
    shop.world.deploy(3);

    // At rest it is read, not rewritten: no write for the new rule alone.
    assert_eq!(shop.settle(false).await, "Serving");
    assert_eq!(
        shop.store.get_raw(&Fixture::key()),
        Some(RawRecord::Json(legacy)),
        "nothing committed"
    );

    // The next upgrade fails: only it is undone, not v1->v2 and v2->v3.
    shop.world.broken.lock().unwrap().push(4);
    assert_eq!(shop.upgrade_to(4).await, "Failed");
    assert_eq!(shop.world.take_log(), ["roll back v4->v3"]);
    assert_eq!(shop.world.deployed(), 3);
    assert_eq!(
        trail(&shop.record()),
        [("Provisioning".into(), true), ("Migrating".into(), true)],
        "the scope closed, keeping the latest Migrating"
    );
}

/// A machine whose `Cutover` makes the copy before it final.
#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Spec, context = Arc<World>, error = MigrationFailed)]
enum Move {
    #[fsm(initial, handler = copy, compensate = drop_copy, next(Cutover))]
    Copying,
    #[fsm(handler = cut_over, commits, compensate = switch_back, next(Verifying))]
    Cutover,
    #[fsm(handler = verify, next(Done))]
    Verifying,
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

async fn copy(cx: &mut Step<'_, Move>) -> Result<Transition<Move>, MigrationFailed> {
    cx.context().note("copy".to_owned());
    Ok(Transition::next(Move::Cutover))
}
async fn drop_copy(cx: &mut Step<'_, Move>) -> Result<(), MigrationFailed> {
    cx.context().note("drop copy".to_owned());
    Ok(())
}
async fn cut_over(cx: &mut Step<'_, Move>) -> Result<Transition<Move>, MigrationFailed> {
    cx.context().note("cut over".to_owned());
    Ok(Transition::next(Move::Verifying))
}
async fn switch_back(cx: &mut Step<'_, Move>) -> Result<(), MigrationFailed> {
    cx.context().note("switch back".to_owned());
    Ok(())
}
async fn verify(cx: &mut Step<'_, Move>) -> Result<Transition<Move>, MigrationFailed> {
    Err(MigrationFailed(cx.resource().version))
}

#[tokio::test]
async fn a_commits_state_makes_the_steps_before_it_final() {
    let store = EphemeralStore::new();
    let world = Arc::new(World::default());
    let engine = Engine::<Move>::new().unwrap();
    let observed = Observed {
        commands: Vec::new(),
        key: ObjectKey::cluster("move"),
        ..Observed::default()
    };
    let spec = Spec { version: 1 };
    let mut state = String::new();
    for _ in 0..20 {
        let report = engine
            .reconcile(&store, &observed, &spec, &world)
            .await
            .unwrap();
        state = report.state;
        if report.commits == 0 {
            break;
        }
    }
    assert_eq!(state, "Failed");
    assert_eq!(
        world.take_log(),
        ["copy", "cut over", "switch back"],
        "the failure after the cut-over undoes the cut-over, not the copy"
    );
    let record = stored(&store, &ObjectKey::cluster("move"));
    assert_eq!(trail(&record), [("Copying".into(), true)]);
}

#[tokio::test]
async fn a_failed_shop_recovers_when_its_spec_changes() {
    // `on_failed_spec_change` is not given: `restart`, the default.
    let mut shop = Fixture::new();
    shop.settle(false).await;
    assert_eq!(shop.upgrade_to(2).await, "Serving");
    shop.world.broken.lock().unwrap().push(3);
    assert_eq!(shop.upgrade_to(3).await, "Failed");
    shop.world.take_log();

    // The person reverts the spec: the workflow starts again from the
    // initial state, for the new generation, and rests where it should.
    assert_eq!(shop.upgrade_to(2).await, "Serving");
    assert_eq!(shop.world.take_log(), ["provision v2"]);
    let record = shop.record();
    assert_eq!(record.data, Some(serde_json::json!({"version": 2})));
    assert_eq!(record.last_error, None);
    assert_eq!(record.observed_generation, Some(shop.generation));
    assert_eq!(
        trail(&record),
        [("Provisioning".into(), true), ("Migrating".into(), true)],
        "the finished upgrade stays for deletion, the provisioning in its first place"
    );

    // And deleting it undoes each state once, the last built first.
    shop.settle(true).await;
    assert_eq!(shop.world.take_log(), ["roll back v2->v1", "deprovision"]);
}
