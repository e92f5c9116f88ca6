//! Fuzzing of the embedded server's selector and patch parsing with
//! proptest: whatever a client sends in `labelSelector`, `fieldSelector` or
//! a PATCH body, the server answers (`Ok` or an `ApiError`) and never
//! panics; what parses means what it says.
//!
//! - Label selectors: random text, and text built from the grammar's own
//!   tokens, never panic; a selector rendered from random requirements
//!   parses back to them, and matches exactly the objects a reference
//!   evaluation says it does.
//! - Field selectors: the same, with a missing field reading as `""`.
//! - JSON pointers: random text never panics; escaped tokens round-trip.
//! - Patches: random bytes and random JSON, of every patch type, on random
//!   targets never panic; a JSON patch that fails leaves the target as it
//!   was (all operations or none); a merge patch is idempotent; a strategic
//!   merge patch on Pod-shaped objects (lists merged by key, with
//!   duplicates, junk elements and directives) never panics.
//!
//! A bounded run is part of `cargo test`; the long run is
//! `PROPTEST_CASES=100000 cargo test -p fsm-testkit --release --test it -- fuzz_parsers::`.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use fsm_testkit::internals::patch::{self, PatchType, json as json_patch, strategic};
use fsm_testkit::internals::{FieldSelector, LabelRequirement, LabelSelector};

// ---------------------------------------------------------------- strategies

/// Any JSON value, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z0-9~/$._-]{0,8}".prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z$/~0-9]{0,6}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

const KEYS: [&str; 4] = ["app", "tier", "example.com/team", "a-b_c.d"];
const VALUES: [&str; 8] = ["", "web", "db", "v1.2", "x_y-z", "0", "3", "10"];

fn label_key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(KEYS.to_vec()).prop_map(str::to_owned),
        "[a-z0-9]([a-z0-9._-]{0,6}[a-z0-9])?",
        // A prefix is a DNS subdomain (no `_`), as the real server checks.
        "[a-z0-9]([a-z0-9-]{0,4}[a-z0-9])?(\\.[a-z0-9]{1,3})?/[a-z0-9]([a-z0-9._-]{0,4}[a-z0-9])?",
    ]
}

fn label_value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(VALUES.to_vec()).prop_map(str::to_owned),
        "([a-z0-9]([a-z0-9._-]{0,6}[a-z0-9])?)?",
    ]
}

fn value_set() -> impl Strategy<Value = BTreeSet<String>> {
    prop::collection::btree_set(label_value(), 1..4)
}

fn label_requirement() -> impl Strategy<Value = LabelRequirement> {
    prop_oneof![
        (label_key(), label_value()).prop_map(|(k, v)| LabelRequirement::Equals(k, v)),
        (label_key(), label_value()).prop_map(|(k, v)| LabelRequirement::NotEquals(k, v)),
        (label_key(), value_set()).prop_map(|(k, s)| LabelRequirement::In(k, s)),
        (label_key(), value_set()).prop_map(|(k, s)| LabelRequirement::NotIn(k, s)),
        label_key().prop_map(LabelRequirement::Exists),
        label_key().prop_map(LabelRequirement::NotExists),
        (label_key(), 0i64..12).prop_map(|(k, n)| LabelRequirement::GreaterThan(k, n)),
        (label_key(), 0i64..12).prop_map(|(k, n)| LabelRequirement::LessThan(k, n)),
    ]
}

/// The query-string form, with the spacing and operator spellings varied.
fn render_label(r: &LabelRequirement, double: bool, space: bool) -> String {
    let sp = if space { " " } else { "" };
    let set = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(",");
    match r {
        LabelRequirement::Equals(k, v) => {
            format!("{k}{sp}{}{sp}{v}", if double { "==" } else { "=" })
        }
        LabelRequirement::NotEquals(k, v) => format!("{k}{sp}!={sp}{v}"),
        LabelRequirement::In(k, s) => format!("{k} in{sp}({})", set(s)),
        LabelRequirement::NotIn(k, s) => format!("{k} notin{sp}({})", set(s)),
        LabelRequirement::Exists(k) => k.clone(),
        LabelRequirement::NotExists(k) => format!("!{k}"),
        LabelRequirement::GreaterThan(k, n) => format!("{k}{sp}>{sp}{n}"),
        LabelRequirement::LessThan(k, n) => format!("{k}{sp}<{sp}{n}"),
    }
}

/// What the selector must answer, computed independently of the server.
fn reference_label(r: &LabelRequirement, labels: &BTreeMap<String, String>) -> bool {
    let get = |k: &String| labels.get(k);
    match r {
        LabelRequirement::Equals(k, v) => get(k) == Some(v),
        LabelRequirement::NotEquals(k, v) => get(k) != Some(v),
        LabelRequirement::In(k, s) => get(k).is_some_and(|x| s.contains(x)),
        LabelRequirement::NotIn(k, s) => get(k).is_none_or(|x| !s.contains(x)),
        LabelRequirement::Exists(k) => get(k).is_some(),
        LabelRequirement::NotExists(k) => get(k).is_none(),
        LabelRequirement::GreaterThan(k, n) => integer(get(k)).is_some_and(|v| v > *n),
        LabelRequirement::LessThan(k, n) => integer(get(k)).is_some_and(|v| v < *n),
    }
}

/// A label that spells a base-10 integer, as that integer.
fn integer(value: Option<&String>) -> Option<i64> {
    value?.parse().ok()
}

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(label_key(), label_value(), 0..5)
}

/// Text made of the label selector grammar's tokens, in any order: the
/// inputs most likely to reach the parser's corners.
fn selector_soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        label_key(),
        label_value(),
        prop::sample::select(vec![
            "=", "==", "!=", "!", " in ", " notin ", "in", "notin", "(", ")", ",", " ", "/", ".",
            ">", "<", "-", "é", "\u{0}",
        ])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec(token, 0..16).prop_map(|t| t.concat())
}

const FIELDS: [&str; 4] = [
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "status.phase",
];

fn field_requirement() -> impl Strategy<Value = (String, String, u8)> {
    (
        prop::sample::select(FIELDS.to_vec()).prop_map(str::to_owned),
        "[a-z0-9-]{0,5}",
        0u8..3,
    )
}

fn field_object() -> impl Strategy<Value = Value> {
    let maybe = || prop::option::of(prop::sample::select(vec!["", "a", "b-1", "ns"]));
    (maybe(), maybe(), maybe(), maybe()).prop_map(|(name, ns, node, phase)| {
        let mut object = json!({"metadata": {}, "spec": {}, "status": {}});
        if let Some(v) = name {
            object["metadata"]["name"] = v.into();
        }
        if let Some(v) = ns {
            object["metadata"]["namespace"] = v.into();
        }
        if let Some(v) = node {
            object["spec"]["nodeName"] = v.into();
        }
        if let Some(v) = phase {
            object["status"]["phase"] = v.into();
        }
        object
    })
}

fn reference_field(object: &Value, field: &str) -> String {
    field
        .split('.')
        .try_fold(object, |v, seg| v.get(seg))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn pointer_token() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z~/0-9]{0,4}",
        Just("-".to_owned()),
        (0usize..4).prop_map(|i| i.to_string()),
        Just("00".to_owned()),
    ]
}

fn escape(tokens: &[String]) -> String {
    tokens
        .iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// A JSON patch operation, often aimed at paths that exist in `target`.
fn json_op(paths: Vec<Vec<String>>) -> impl Strategy<Value = Value> {
    let path = prop_oneof![
        prop::sample::select(if paths.is_empty() {
            vec![Vec::new()]
        } else {
            paths
        }),
        prop::collection::vec(pointer_token(), 0..4),
    ]
    .prop_map(|p| escape(&p));
    let op = prop::sample::select(vec![
        "add", "remove", "replace", "move", "copy", "test", "bogus",
    ]);
    (op, path.clone(), path, any_json(), 0u8..4).prop_map(|(op, path, from, value, drop)| {
        let mut o = json!({"op": op, "path": path, "from": from, "value": value});
        // Sometimes a required member is missing, or of the wrong type.
        match drop {
            0 => {
                o.as_object_mut().map(|m| m.remove("path"));
            }
            1 => o["from"] = json!(7),
            _ => {}
        }
        o
    })
}

/// Every path of `value` (objects and arrays), as reference tokens.
fn paths_of(value: &Value) -> Vec<Vec<String>> {
    fn walk(v: &Value, here: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        out.push(here.clone());
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    here.push(k.clone());
                    walk(v, here, out);
                    here.pop();
                }
            }
            Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    here.push(i.to_string());
                    walk(v, here, out);
                    here.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, &mut Vec::new(), &mut out);
    out
}

fn target_and_json_patch() -> impl Strategy<Value = (Value, Vec<u8>)> {
    any_json().prop_flat_map(|target| {
        let ops = prop::collection::vec(json_op(paths_of(&target)), 0..5);
        (Just(target), ops).prop_map(|(t, ops)| {
            let body = serde_json::to_vec(&ops).unwrap_or_default();
            (t, body)
        })
    })
}

/// A list element of a merged list: mostly `{name: …}` objects (with
/// duplicates), sometimes directives or junk.
fn container() -> impl Strategy<Value = Value> {
    let name = prop::sample::select(vec!["a", "b", "c"]);
    prop_oneof![
        4 => (name.clone(), any_json()).prop_map(|(n, image)| json!({"name": n, "image": image})),
        1 => name.clone().prop_map(|n| json!({"name": n, "$patch": "delete"})),
        1 => name.prop_map(|n| json!({"name": n, "$patch": "replace"})),
        1 => any_json(),
        1 => Just(json!({"image": "no-name"})),
    ]
}

fn pod_shaped() -> impl Strategy<Value = Value> {
    let list = || prop::collection::vec(container(), 0..4);
    let finalizers = prop::collection::vec(
        prop_oneof![
            prop::sample::select(vec!["x", "y"]).prop_map(Value::from),
            any_json()
        ],
        0..3,
    );
    (
        list(),
        list(),
        finalizers,
        any_json(),
        prop::option::of(any_json()),
        0u8..4,
    )
        .prop_map(|(containers, env, finalizers, junk, directive, shape)| {
            let mut pod = json!({
                "metadata": {"finalizers": finalizers, "labels": {"app": "x"}},
                "spec": {
                    "containers": containers,
                    "volumes": env,
                    "x": junk,
                },
                "status": {"conditions": [{"type": "Ready"}, {"type": "Ready"}, 3]},
            });
            if let Some(d) = directive {
                pod["spec"]["$setElementOrder/containers"] = d.clone();
                pod["metadata"]["$deleteFromPrimitiveList/finalizers"] = d.clone();
                pod["$retainKeys"] = d;
            }
            match shape {
                // A list where an object is expected, and the reverse.
                0 => pod["spec"]["containers"] = json!({"name": "a"}),
                1 => pod["metadata"] = json!(["not", "an", "object"]),
                2 => pod["spec"]["$patch"] = json!("replace"),
                _ => {}
            }
            pod
        })
}

/// A Pod's definition: strategic merge patches merge its lists by key.
fn pod() -> &'static patch::ResourceDef {
    patch::builtin("Pod").expect("Pods are served")
}

/// A custom resource's definition, or a Pod's.
fn def_of(custom: bool) -> patch::ResourceDef {
    if custom {
        patch::custom()
    } else {
        pod().clone()
    }
}

const KINDS: [PatchType; 4] = [
    PatchType::Merge,
    PatchType::Json,
    PatchType::StrategicMerge,
    PatchType::Apply,
];

// --------------------------------------------------------------- properties

proptest! {
    #[test]
    fn label_selectors_never_panic_on_any_text(input in any::<String>(), object in any_json()) {
        if let Ok(selector) = LabelSelector::parse(&input) {
            let _ = selector.matches(&object);
        }
    }

    #[test]
    fn label_selectors_never_panic_on_grammar_soup(input in selector_soup(), labels in labels()) {
        if let Ok(selector) = LabelSelector::parse(&input) {
            let _ = selector.matches(&json!({"metadata": {"labels": labels}}));
        }
    }

    #[test]
    fn label_selectors_parse_back_and_match_as_written(
        requirements in prop::collection::vec(label_requirement(), 0..5),
        double in any::<bool>(),
        space in any::<bool>(),
        labels in labels(),
    ) {
        let text = requirements
            .iter()
            .map(|r| render_label(r, double, space))
            .collect::<Vec<_>>()
            .join(",");
        let selector = LabelSelector::parse(&text)
            .map_err(|e| TestCaseError::fail(format!("{text:?} did not parse: {e:?}")))?;
        prop_assert_eq!(selector.requirements(), requirements.as_slice(), "{}", text);
        let expected = requirements.iter().all(|r| reference_label(r, &labels));
        let object = json!({"metadata": {"labels": labels}});
        prop_assert_eq!(selector.matches(&object), expected, "{} on {}", text, object);
    }

    #[test]
    fn field_selectors_never_panic(input in any::<String>(), object in any_json()) {
        if let Ok(selector) = FieldSelector::parse(&input) {
            let _ = selector.matches(&object);
            let _ = selector.pinned_name();
            let _ = selector.check_supported(&["spec.nodeName".to_owned()]);
        }
    }

    #[test]
    fn field_selectors_match_as_written(
        requirements in prop::collection::vec(field_requirement(), 0..4),
        object in field_object(),
    ) {
        let text = requirements
            .iter()
            .map(|(f, v, op)| format!("{f}{}{v}", ["=", "==", "!="][usize::from(*op)]))
            .collect::<Vec<_>>()
            .join(",");
        let selector = FieldSelector::parse(&text)
            .map_err(|e| TestCaseError::fail(format!("{text:?} did not parse: {e:?}")))?;
        let expected = requirements
            .iter()
            .all(|(f, v, op)| (reference_field(&object, f) == *v) != (*op == 2));
        prop_assert_eq!(selector.matches(&object), expected, "{} on {}", text, object);
        let pinned = requirements
            .iter()
            .find(|(f, _, op)| f == "metadata.name" && *op != 2)
            .map(|(_, v, _)| v.as_str());
        prop_assert_eq!(selector.pinned_name(), pinned, "{}", text);
        let supported = requirements
            .iter()
            .all(|(f, _, _)| f.starts_with("metadata.") || f == "spec.nodeName");
        prop_assert_eq!(
            selector.check_supported(&["spec.nodeName".to_owned()]).is_ok(),
            supported,
            "{}",
            text
        );
    }

    #[test]
    fn json_pointers_never_panic_and_round_trip(
        text in any::<String>(),
        tokens in prop::collection::vec(pointer_token(), 0..5),
    ) {
        let _ = json_patch::parse_pointer(&text);
        prop_assert_eq!(json_patch::parse_pointer(&escape(&tokens)), Ok(tokens));
    }

    #[test]
    fn patches_of_random_bytes_never_panic(
        mut target in any_json(),
        body in prop::collection::vec(any::<u8>(), 0..64),
        custom in any::<bool>(),
    ) {
        let def = def_of(custom);
        for kind in KINDS {
            let _ = patch::apply_patch(kind, &mut target, &body, &def);
        }
        let _ = json_patch::parse(&body);
    }

    #[test]
    fn patches_of_random_json_never_panic(
        target in any_json(),
        body in any_json(),
        custom in any::<bool>(),
    ) {
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        let def = def_of(custom);
        for kind in KINDS {
            let mut t = target.clone();
            let _ = patch::apply_patch(kind, &mut t, &bytes, &def);
        }
        let mut t = target.clone();
        let _ = strategic::apply(pod(), &mut t, &body);
        let mut t = target;
        patch::merge(&mut t, &body);
    }

    #[test]
    fn a_failed_json_patch_changes_nothing((target, body) in target_and_json_patch()) {
        let mut patched = target.clone();
        match json_patch::apply(&mut patched, &body) {
            Ok(()) => {
                // The same operations through the dispatcher agree.
                let mut again = target.clone();
                prop_assert!(patch::apply_patch(PatchType::Json, &mut again, &body, &def_of(true)).is_ok());
                prop_assert_eq!(again, patched);
            }
            Err(_) => prop_assert_eq!(patched, target, "a failed patch changed the target"),
        }
    }

    #[test]
    fn merge_patches_are_idempotent(target in any_json(), patch in any_json()) {
        let mut once = target.clone();
        patch::merge(&mut once, &patch);
        let mut twice = once.clone();
        patch::merge(&mut twice, &patch);
        prop_assert_eq!(&twice, &once);
        if target.is_object() {
            let mut unchanged = target.clone();
            patch::merge(&mut unchanged, &json!({}));
            prop_assert_eq!(unchanged, target);
        }
    }

    #[test]
    fn strategic_merge_of_pod_shapes_never_panics(target in pod_shaped(), patch in pod_shaped()) {
        let mut t = target.clone();
        prop_assert!(strategic::apply(pod(), &mut t, &patch).is_ok());
        let bytes = serde_json::to_vec(&patch).unwrap_or_default();
        let mut t = target;
        prop_assert!(patch::apply_patch(PatchType::StrategicMerge, &mut t, &bytes, pod()).is_ok()
            || !patch.is_object());
    }
}
