//! Fuzzing of the record decoder with proptest: whatever a store hands
//! back — random text, random JSON, a real record with any field replaced by
//! anything — decoding answers `Ok` or a `DecodeError`, never panics, and
//! what decodes re-encodes to a record that decodes the same.
//!
//! A bounded run is part of `cargo test`; the long run is
//! `PROPTEST_CASES=200000 cargo test -p fsm-core --release --test it -- decode_fuzz::`.

use proptest::prelude::*;
use serde_json::{Map, Value};

use fsm_core::prelude::*;
use fsm_core::{RawRecord, StateRecord};

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;
impl Classify for Never {}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = (), error = Never)]
enum Fuzz {
    #[fsm(initial, handler = go, next(Busy))]
    Idle,
    #[fsm(handler = busy, compensate = undo, next(Idle, Secret), timeout = "1m")]
    Busy { id: String, tries: u32 },
    #[fsm(sensitive, final)]
    Secret(String),
    #[fsm(failed)]
    Failed,
}

async fn go(_: &mut Step<'_, Fuzz>) -> Result<Transition<Fuzz>, Never> {
    Ok(Transition::next(Fuzz::Busy {
        id: "a".into(),
        tries: 1,
    }))
}
async fn busy(_: &mut Step<'_, Fuzz>, _: &str, _: &u32) -> Result<Transition<Fuzz>, Never> {
    Ok(Transition::fail("done"))
}
async fn undo(_: &mut Step<'_, Fuzz>, _: &str, _: &u32) -> Result<(), Never> {
    Ok(())
}

/// A real record: a workflow that entered, failed and compensated, so that
/// history, trail and compensation are all present.
fn real_record() -> Value {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let settled = runtime
        .block_on(Harness::<Fuzz>::new((), ()).run_until_settled())
        .unwrap();
    let mut record = serde_json::to_value(&settled.record).unwrap();
    // Put the fields the settled record lacks back in, so they get fuzzed.
    record["data"] = serde_json::json!({"id": "x", "tries": 2});
    record["state"] = "Busy".into();
    record["nextAttemptAt"] = "2026-01-01T00:00:00Z".into();
    record["trail"] = serde_json::json!([{"state": "Busy", "data": {"id": "x", "tries": 2}, "enteredAt": "2026-01-01T00:00:00Z"}]);
    record["specSnapshot"] = serde_json::json!({"size": 1});
    record
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,12}".prop_map(Value::from),
        prop_oneof![
            Just("Idle"),
            Just("Busy"),
            Just("Secret"),
            Just("Failed"),
            Just("2026-01-01T00:00:00Z")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 32, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(".{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Every path to a value inside `v`.
fn paths(v: &Value, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(prefix.clone());
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let mut p = prefix.clone();
                p.push(k.clone());
                paths(child, p, out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let mut p = prefix.clone();
                p.push(i.to_string());
                paths(child, p, out);
            }
        }
        _ => {}
    }
}

fn replace(v: &mut Value, path: &[String], with: Value) {
    let Some((first, rest)) = path.split_first() else {
        *v = with;
        return;
    };
    let child = match v {
        Value::Object(map) => map.get_mut(first),
        Value::Array(items) => first.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
        _ => None,
    };
    if let Some(child) = child {
        replace(child, rest, with);
    }
}

fn check(raw: RawRecord) -> Result<(), TestCaseError> {
    if let Ok(record) = raw.decode::<Fuzz>() {
        let again = record.to_raw().unwrap().decode::<Fuzz>().unwrap();
        prop_assert_eq!(&again, &record);
        let state: Fuzz = record.current().unwrap();
        prop_assert_eq!(state.state_name(), record.state.as_str());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_text_never_panics(text in ".{0,200}") {
        check(RawRecord::Text(text))?;
    }

    #[test]
    fn random_json_never_panics(value in json()) {
        check(RawRecord::Json(value))?;
    }

    #[test]
    fn a_real_record_with_any_field_replaced_never_panics(pick in any::<prop::sample::Index>(), with in json()) {
        let mut record = real_record();
        let mut all = Vec::new();
        paths(&record, Vec::new(), &mut all);
        let path = pick.get(&all).clone();
        replace(&mut record, &path, with);
        check(RawRecord::Json(record.clone()))?;
        check(RawRecord::Text(record.to_string()))?;
    }

    #[test]
    fn a_real_record_with_a_field_removed_never_panics(pick in any::<prop::sample::Index>()) {
        let mut record = real_record();
        let keys: Vec<String> = record.as_object().unwrap().keys().cloned().collect();
        let key = pick.get(&keys);
        record.as_object_mut().unwrap().remove(key);
        check(RawRecord::Json(record))?;
    }
}

#[test]
fn the_unfuzzed_record_decodes() {
    let record: StateRecord = RawRecord::Json(real_record()).decode::<Fuzz>().unwrap();
    assert_eq!(record.state, "Busy");
}
