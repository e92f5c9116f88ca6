//! The upgrade keys: `version`, `migrate`, `renamed_from` (repeatable) and
//! `allow(unreachable, never_rests)`; the table carries them, and the
//! diagram marks the allowed states as the core's does.

use fsm_core::prelude::*;
use fsm_core::{Migrated, MigrationError, OldRecord, RawRecord, RecordCompatibility};

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = (), version = 3, migrate = migrate)]
enum Db {
    #[fsm(initial, handler = provision, next(Ready), renamed_from = "Creating", renamed_from = "New")]
    Provisioning,
    #[fsm(ready, handler = watch, next(Ready))]
    Ready { id: String },
    #[fsm(handler = poll, next(Polling), allow(unreachable, never_rests))]
    Polling,
    #[fsm(final, allow(unreachable))]
    Retired,
    #[fsm(failed, renamed_from = "Broken")]
    Failed,
}

fn migrate(old: OldRecord<'_>) -> Result<Migrated<Db>, MigrationError> {
    match old.state {
        "Seeding" => Ok(Migrated::To(Db::Ready { id: "seeded".into() })),
        "Lost" => Err(MigrationError::new("nothing to go on")),
        _ => Ok(Migrated::Keep),
    }
}

async fn provision(_cx: &mut Step<'_, Db>) -> Result<Transition<Db>, std::convert::Infallible> {
    Ok(Transition::next(Db::Ready { id: "a".into() }))
}

async fn watch(_cx: &mut Step<'_, Db>, _id: &str) -> Result<Transition<Db>, std::convert::Infallible> {
    Ok(Transition::stay())
}

async fn poll(_cx: &mut Step<'_, Db>) -> Result<Transition<Db>, std::convert::Infallible> {
    Ok(Transition::stay())
}

fn record(state: &str, version: u32) -> RawRecord {
    RawRecord::Json(serde_json::json!({
        "schemaVersion": 1,
        "machineVersion": version,
        "state": state,
        "enteredAt": "2024-01-01T00:00:00Z",
    }))
}

fn main() {
    let m = Db::machine();
    assert_eq!(m.validate(), Ok(()));
    assert_eq!(m.version(), 3);
    assert_eq!(m.resolve("New").map(StateMeta::name), Some("Provisioning"));
    assert_eq!(m.state("Failed").map(StateMeta::former_names), Some(&["Broken"][..]));
    assert_eq!(m.unreachable_states(), ["Polling", "Retired"]);
    assert_eq!(m.states_that_never_rest(), ["Polling"]);
    assert_eq!(Db::MERMAID, Db::mermaid());
    assert!(Db::MERMAID.contains("note left of Retired : unreachable"));
    assert!(Db::MERMAID.contains("note left of Polling : never rests"));

    assert_eq!(
        record("Creating", 3).compatibility::<Db>(),
        RecordCompatibility::Renamed { from: "Creating".into(), to: "Provisioning" }
    );
    assert_eq!(
        record("Seeding", 2).compatibility::<Db>(),
        RecordCompatibility::Migrates { from_version: 2, from_state: "Seeding".into(), to_state: "Ready" }
    );
    assert!(!record("Lost", 1).compatibility::<Db>().is_loadable());
}
