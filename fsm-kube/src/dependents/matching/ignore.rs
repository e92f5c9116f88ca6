//! Ignore paths: fields of a dependent's objects that are not ours to keep
//! once the object exists (a replica count an autoscaler sets, an
//! annotation a mesh injects). Parsed once, when the set is built.
//!
//! The syntax is a JSON pointer (RFC 6901: `/spec/replicas`, `~1` for a
//! `/` in a key and `~0` for a `~`) in which a segment `*` stands for
//! every element of a list or every entry of an object:
//! `/spec/template/spec/containers/*/image`. A numeric segment is a list
//! index or an object key, whichever the value holds.

use serde_json::Value;

/// One segment of an [`IgnorePath`].
#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    /// An object key (or, on a list, an index).
    Key(String),
    /// Every list element or object entry.
    Any,
}

/// A parsed ignore path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IgnorePath {
    text: String,
    segments: Vec<Segment>,
}

/// Paths an ignore path may not name: what identifies the object, and
/// what the runtime itself applies.
const RESERVED: &[&str] = &[
    "/apiVersion",
    "/kind",
    "/metadata/name",
    "/metadata/namespace",
    "/metadata/ownerReferences",
    "/metadata/labels/app.kubernetes.io~1managed-by",
    "/metadata/labels/operator-fsm.io~1owner-uid",
    "/metadata/labels/operator-fsm.io~1dependent",
];

impl IgnorePath {
    /// Parses `text`.
    ///
    /// # Errors
    /// Why it is no ignore path: it does not start with `/`, names the
    /// whole object, has an empty segment, a `~` not followed by `0` or
    /// `1`, or names what identifies the object or what the runtime
    /// applies (`/kind`, `/metadata/name`, the owner reference, the
    /// dependent labels).
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let Some(rest) = text.strip_prefix('/') else {
            return Err("an ignore path is a JSON pointer: it starts with `/`".to_owned());
        };
        if rest.is_empty() {
            return Err("`/` names the whole object, which cannot be ignored".to_owned());
        }
        let mut segments = Vec::new();
        for raw in rest.split('/') {
            if raw.is_empty() {
                return Err("it has an empty segment (`//` or a trailing `/`)".to_owned());
            }
            if raw == "*" {
                segments.push(Segment::Any);
                continue;
            }
            segments.push(Segment::Key(unescape(raw)?));
        }
        if RESERVED
            .iter()
            .any(|r| text == *r || text.starts_with(&format!("{r}/")))
        {
            return Err(
                "it names what identifies the object or what the runtime applies".to_owned(),
            );
        }
        Ok(IgnorePath {
            text: text.to_owned(),
            segments,
        })
    }
}

/// A pointer segment with `~1` and `~0` decoded.
fn unescape(raw: &str) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '~' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('0') => out.push('~'),
            Some('1') => out.push('/'),
            _ => return Err(format!("`~` in `{raw}` is not followed by 0 or 1")),
        }
    }
    Ok(out)
}

/// Gives `body`'s fields at `paths` the values they have in `live` (and
/// removes those the live counterpart of their parent lacks), so that
/// applying `body` leaves them as they are. List elements are paired by
/// their `name` when both have one, else by position; a field whose parent
/// has no live counterpart (a list element we add) keeps its desired value.
pub(crate) fn keep_live_values(body: &mut Value, live: &Value, paths: &[IgnorePath]) {
    for path in paths {
        keep_live(body, Some(live), &path.segments);
    }
}

fn keep_live(body: &mut Value, live: Option<&Value>, segments: &[Segment]) {
    let (Some((first, rest)), Some(live)) = (segments.split_first(), live) else {
        return;
    };
    match body {
        Value::Object(map) => {
            let keys: Vec<String> = match first {
                Segment::Key(k) => vec![k.clone()],
                Segment::Any => map.keys().cloned().collect(),
            };
            for key in keys {
                let live_child = live.get(&key);
                if rest.is_empty() {
                    match live_child {
                        Some(value) => {
                            map.insert(key, value.clone());
                        }
                        None => {
                            map.remove(&key);
                        }
                    }
                } else if let Some(child) = map.get_mut(&key) {
                    keep_live(child, live_child, rest);
                }
            }
        }
        Value::Array(items) => {
            let live_items = live.as_array();
            let indexes: Vec<usize> = match first {
                Segment::Key(k) => k.parse().ok().into_iter().collect(),
                Segment::Any => (0..items.len()).collect(),
            };
            let mut gone = Vec::new();
            for i in indexes {
                let Some(item) = items.get_mut(i) else {
                    continue;
                };
                let live_item = live_items.and_then(|l| paired(item, i, l));
                if rest.is_empty() {
                    match live_item {
                        Some(value) => *item = value.clone(),
                        None => gone.push(i),
                    }
                } else {
                    keep_live(item, live_item, rest);
                }
            }
            for i in gone.into_iter().rev() {
                items.remove(i);
            }
        }
        _ => {}
    }
}

/// The element of `live` that `item` (at `index` of its list) stands for.
fn paired<'l>(item: &Value, index: usize, live: &'l [Value]) -> Option<&'l Value> {
    match item.get("name").and_then(Value::as_str) {
        Some(name) => live
            .iter()
            .find(|l| l.get("name").and_then(Value::as_str) == Some(name)),
        None => live.get(index),
    }
}

/// Removes the fields at `paths` from `value` (every match of a `*`).
pub(crate) fn remove_paths(value: &mut Value, paths: &[IgnorePath]) {
    for path in paths {
        remove(value, &path.segments);
    }
}

fn remove(value: &mut Value, segments: &[Segment]) {
    let Some((first, rest)) = segments.split_first() else {
        return;
    };
    match (value, first) {
        (Value::Object(map), Segment::Key(k)) => {
            if rest.is_empty() {
                map.remove(k);
            } else if let Some(child) = map.get_mut(k) {
                remove(child, rest);
            }
        }
        (Value::Object(map), Segment::Any) => {
            if rest.is_empty() {
                map.clear();
            } else {
                map.values_mut().for_each(|child| remove(child, rest));
            }
        }
        (Value::Array(items), Segment::Key(k)) => {
            if let Ok(i) = k.parse::<usize>()
                && i < items.len()
            {
                if rest.is_empty() {
                    items.remove(i);
                } else {
                    remove(&mut items[i], rest);
                }
            }
        }
        (Value::Array(items), Segment::Any) => {
            if rest.is_empty() {
                items.clear();
            } else {
                items.iter_mut().for_each(|child| remove(child, rest));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(texts: &[&str]) -> Vec<IgnorePath> {
        texts
            .iter()
            .map(|t| IgnorePath::parse(t).unwrap())
            .collect()
    }

    #[test]
    fn paths_are_json_pointers_with_a_wildcard() {
        let p = IgnorePath::parse("/metadata/annotations/example.com~1owner").unwrap();
        assert_eq!(
            p.segments,
            [
                Segment::Key("metadata".into()),
                Segment::Key("annotations".into()),
                Segment::Key("example.com/owner".into())
            ]
        );
        assert_eq!(p.text, "/metadata/annotations/example.com~1owner");
        let any = IgnorePath::parse("/spec/containers/*/image").unwrap();
        assert_eq!(any.segments[2], Segment::Any);
    }

    #[test]
    fn malformed_paths_are_refused_with_why() {
        for (bad, why) in [
            ("spec/replicas", "starts with `/`"),
            ("/", "whole object"),
            ("", "starts with `/`"),
            ("/spec//replicas", "empty segment"),
            ("/spec/", "empty segment"),
            ("/a~2b", "not followed by 0 or 1"),
            ("/a~", "not followed by 0 or 1"),
            ("/metadata/name", "identifies the object"),
            ("/metadata/ownerReferences/0", "identifies the object"),
            ("/kind", "identifies the object"),
        ] {
            let err = IgnorePath::parse(bad).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }

    #[test]
    fn ignored_fields_take_the_live_values_or_go_when_live_has_none() {
        let live = json!({"spec": {"replicas": 5, "template": {"spec": {"containers": [
            {"name": "sidecar", "image": "mesh:2"},
            {"name": "app", "image": "app:9"}
        ]}}}});
        let mut body = json!({"spec": {"replicas": 1, "paused": false, "template": {"spec": {"containers": [
            {"name": "app", "image": "app:1"},
            {"name": "new", "image": "new:1"}
        ]}}}});
        keep_live_values(
            &mut body,
            &live,
            &paths(&[
                "/spec/replicas",
                "/spec/paused",
                "/spec/template/spec/containers/*/image",
            ]),
        );
        assert_eq!(
            body,
            json!({"spec": {"replicas": 5, "template": {"spec": {"containers": [
                {"name": "app", "image": "app:9"},
                {"name": "new", "image": "new:1"}
            ]}}}})
        );
    }

    #[test]
    fn ignored_fields_are_removed_everywhere_they_match() {
        let mut value = json!({"metadata": {"annotations": {"a": "1", "b": "2"}},
            "spec": {"items": [{"x": 1, "y": 2}, {"x": 3}], "replicas": 2}});
        remove_paths(
            &mut value,
            &paths(&[
                "/metadata/annotations/*",
                "/spec/items/*/x",
                "/spec/replicas",
                "/absent/path",
            ]),
        );
        assert_eq!(
            value,
            json!({"metadata": {"annotations": {}}, "spec": {"items": [{"y": 2}, {}]}})
        );
    }
}
