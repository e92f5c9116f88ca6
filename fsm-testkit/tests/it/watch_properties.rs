//! Property: whatever the writes, a watch started at a list's
//! resourceVersion, replayed onto that list, gives the current list — for
//! any label selector — with increasing resourceVersions.

use std::collections::BTreeMap;
use std::time::Duration;

use fsm_testkit::cluster::{Cluster, DeleteOptions, ListQuery, Part, PatchOptions};
use fsm_testkit::internals::patch::PatchType;
use fsm_testkit::internals::{FieldSelector, LabelSelector, Watch, WatchRequest};
use futures::StreamExt;
use proptest::prelude::*;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
enum Op {
    Create(usize, Option<&'static str>),
    Relabel(usize, Option<&'static str>),
    Delete(usize),
    AddFinalizer(usize),
    ClearFinalizers(usize),
}

fn label() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        Just(None),
        Just(Some("a")),
        Just(Some("b")),
        Just(Some("c"))
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..5usize, label()).prop_map(|(n, l)| Op::Create(n, l)),
        (0..5usize, label()).prop_map(|(n, l)| Op::Relabel(n, l)),
        (0..5usize).prop_map(Op::Delete),
        (0..5usize).prop_map(Op::AddFinalizer),
        (0..5usize).prop_map(Op::ClearFinalizers),
    ]
}

fn labels(l: Option<&str>) -> Value {
    l.map_or(json!(null), |v| json!({"app": v}))
}

/// Applies `op`; refusals (already exists, not found, …) are part of the game.
fn apply(c: &mut Cluster, op: &Op) {
    let Some(def) = c.registry.get("", "v1", "configmaps") else {
        panic!("configmaps are built in");
    };
    let now = jiff::Timestamp::now();
    let name = |n: &usize| format!("cm{n}");
    let _ = match op {
        Op::Create(n, l) => c
            .create(
                &def,
                "default",
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name(n), "labels": labels(*l)}}),
                false,
                now,
            )
            .map(drop),
        Op::Relabel(n, l) => c
            .patch(
                &def,
                "default",
                &name(n),
                PatchType::Merge,
                json!({"metadata": {"labels": labels(*l)}})
                    .to_string()
                    .as_bytes(),
                Part::Main,
                &PatchOptions::default(),
                false,
                now,
            )
            .map(drop),
        Op::Delete(n) => c
            .delete(&def, "default", &name(n), &DeleteOptions::default(), now)
            .map(drop),
        Op::AddFinalizer(n) => c
            .patch(
                &def,
                "default",
                &name(n),
                PatchType::Merge,
                br#"{"metadata": {"finalizers": ["f"]}}"#,
                Part::Main,
                &PatchOptions::default(),
                false,
                now,
            )
            .map(drop),
        Op::ClearFinalizers(n) => c
            .patch(
                &def,
                "default",
                &name(n),
                PatchType::Merge,
                br#"{"metadata": {"finalizers": null}}"#,
                Part::Main,
                &PatchOptions::default(),
                false,
                now,
            )
            .map(drop),
    };
}

fn listed(c: &Cluster, selector: &str) -> (BTreeMap<String, String>, u64) {
    let def = c.registry.get("", "v1", "configmaps").unwrap();
    let q = ListQuery {
        labels: LabelSelector::parse(selector).unwrap(),
        ..ListQuery::default()
    };
    let list = c.list(&def, Some("default"), &q).unwrap();
    let items = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_string(),
                o["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    (items, rv)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn watch_replay_reconstructs_the_selected_list(
        before in proptest::collection::vec(op(), 0..20),
        after in proptest::collection::vec(op(), 0..30),
        selector in prop_oneof![
            Just(""), Just("app=a"), Just("app!=a"), Just("app in (a,b)"), Just("!app"), Just("app")
        ],
    ) {
        let mut c = Cluster::new(10_000, 10_000, 3);
        for o in &before {
            apply(&mut c, o);
        }
        let (mut state, rv) = listed(&c, selector);
        let watch = Watch::start(&c, WatchRequest {
            def: c.registry.get("", "v1", "configmaps").unwrap(),
            namespace: Some("default".into()),
            labels: LabelSelector::parse(selector).unwrap(),
            fields: FieldSelector::default(),
            resource_version: Some(rv),
            send_initial_events: false,
            bookmarks: false,
            timeout: Duration::from_secs(1),
            bookmark_interval: Duration::from_secs(60),
            table: None,
            as_stored: false,
        }).unwrap();
        for o in &after {
            apply(&mut c, o);
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let events: Vec<Value> = runtime.block_on(
            watch.into_stream().map(|b| serde_json::from_slice(&b.unwrap()).unwrap()).collect()
        );
        let mut last = rv;
        for e in &events {
            let name = e["object"]["metadata"]["name"].as_str().unwrap().to_string();
            let erv: u64 = e["object"]["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
            prop_assert!(erv > last, "resourceVersions increase: {} then {}", last, erv);
            last = erv;
            match e["type"].as_str().unwrap() {
                "ADDED" | "MODIFIED" => { state.insert(name, erv.to_string()); }
                "DELETED" => { state.remove(&name); }
                other => prop_assert!(false, "unexpected event type {}", other),
            }
        }
        let (now, _) = listed(&c, selector);
        prop_assert_eq!(state, now);
    }
}
