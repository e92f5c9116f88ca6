//! JSON patch (RFC 6902) with JSON pointers (RFC 6901).
//!
//! All six operations are applied in order to a copy of the object; the
//! first failing operation fails the whole patch and nothing is written.
//! As the real server (which uses `evanphx/json-patch`), a `test` of a path
//! that does not exist succeeds when the expected value is `null`:
//! kube-runtime's finalizer helper relies on it to add the first finalizer
//! (`test /metadata/finalizers == null`, then `add`).
//!
//! # Errors
//! A body that is not a list of operations is `400 BadRequest`; an
//! operation that cannot be applied (a missing path, a failed `test`, an
//! unknown `op`) is `422 Invalid`, as the real server answers, with 1.20's
//! generic message (`ApiError::Unprocessable`). A `replace` of a missing
//! key of an object adds it, as 1.20's evanphx/json-patch 4.9 does.

use serde_json::Value;

use crate::status::ApiError;

/// One operation of a JSON patch.
#[derive(Debug, Clone, PartialEq)]
pub enum Operation {
    /// `add` `value` at `path` (inserting into arrays).
    Add {
        /// Target.
        path: Vec<String>,
        /// Value added.
        value: Value,
    },
    /// `remove` the value at `path`.
    Remove {
        /// Target.
        path: Vec<String>,
    },
    /// `replace` the value at `path` (which must exist).
    Replace {
        /// Target.
        path: Vec<String>,
        /// New value.
        value: Value,
    },
    /// `move` the value at `from` to `path`.
    Move {
        /// Source.
        from: Vec<String>,
        /// Target.
        path: Vec<String>,
    },
    /// `copy` the value at `from` to `path`.
    Copy {
        /// Source.
        from: Vec<String>,
        /// Target.
        path: Vec<String>,
    },
    /// `test` that the value at `path` equals `value`.
    Test {
        /// Target.
        path: Vec<String>,
        /// Expected value.
        value: Value,
    },
    /// An operation of another name: it decodes, and fails when applied
    /// (`Unexpected kind: …`), as evanphx/json-patch does.
    Unknown(String),
}

/// Parses a JSON pointer (RFC 6901) into its unescaped reference tokens.
///
/// # Errors
/// A description of the problem when `pointer` is neither empty nor starts with `/`.
pub fn parse_pointer(pointer: &str) -> Result<Vec<String>, String> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(format!("JSON pointer {pointer:?} must start with '/'"));
    };
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn pointer_text(path: &[String]) -> String {
    path.iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// Parses the body of a JSON patch.
///
/// # Errors
/// [`ApiError::BadRequest`] when the body is not a JSON array of valid operations.
pub fn parse(body: &[u8]) -> Result<Vec<Operation>, ApiError> {
    let bad = |m: String| ApiError::BadRequest(format!("error decoding patch: {m}"));
    let value: Value = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
    let ops = match value {
        Value::Array(ops) => ops,
        // Go decodes `null` into an empty patch.
        Value::Null => Vec::new(),
        other => {
            let kind = match other {
                Value::Object(_) => "object",
                Value::String(_) => "string",
                Value::Number(_) => "number",
                _ => "bool",
            };
            return Err(ApiError::BadRequest(format!(
                "json: cannot unmarshal {kind} into Go value of type jsonpatch.Patch"
            )));
        }
    };
    ops.iter()
        .map(|op| {
            let field = |name: &str| -> Result<Vec<String>, ApiError> {
                let text = op
                    .get(name)
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad(format!("operation {op} is missing {name:?}")))?;
                parse_pointer(text).map_err(bad)
            };
            let value = || {
                op.get("value")
                    .cloned()
                    .ok_or_else(|| bad(format!("operation {op} is missing \"value\"")))
            };
            match op.get("op").and_then(Value::as_str) {
                Some("add") => Ok(Operation::Add {
                    path: field("path")?,
                    value: value()?,
                }),
                Some("remove") => Ok(Operation::Remove {
                    path: field("path")?,
                }),
                Some("replace") => Ok(Operation::Replace {
                    path: field("path")?,
                    value: value()?,
                }),
                Some("move") => Ok(Operation::Move {
                    from: field("from")?,
                    path: field("path")?,
                }),
                Some("copy") => Ok(Operation::Copy {
                    from: field("from")?,
                    path: field("path")?,
                }),
                Some("test") => Ok(Operation::Test {
                    path: field("path")?,
                    // A missing value tests for null, as evanphx/json-patch does.
                    value: op.get("value").cloned().unwrap_or(Value::Null),
                }),
                Some(other) => Ok(Operation::Unknown(other.to_string())),
                None => Ok(Operation::Unknown("unknown".to_string())),
            }
        })
        .collect()
}

/// Applies the patch in `body` to `target`, all operations or none.
///
/// # Errors
/// [`ApiError::BadRequest`] for a malformed patch, [`ApiError::Unprocessable`]
/// for an operation that cannot be applied.
pub fn apply(target: &mut Value, body: &[u8]) -> Result<(), ApiError> {
    let ops = parse(body)?;
    let mut doc = target.clone();
    for op in &ops {
        apply_one(&mut doc, op).map_err(ApiError::Unprocessable)?;
    }
    *target = doc;
    Ok(())
}

fn get<'a>(doc: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(doc, |v, token| match v {
        Value::Object(m) => m.get(token),
        Value::Array(a) => index(token, a.len()).and_then(|i| a.get(i)),
        _ => None,
    })
}

fn get_mut<'a>(doc: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(doc, |v, token| match v {
        Value::Object(m) => m.get_mut(token),
        Value::Array(a) => {
            let len = a.len();
            index(token, len).and_then(|i| a.get_mut(i))
        }
        _ => None,
    })
}

/// An existing array index (no leading zeros, no `-`).
fn index(token: &str, len: usize) -> Option<usize> {
    if token.len() > 1 && token.starts_with('0') {
        return None;
    }
    token.parse::<usize>().ok().filter(|i| *i < len)
}

fn add(doc: &mut Value, path: &[String], value: Value) -> Result<(), String> {
    let Some((last, parent_path)) = path.split_last() else {
        *doc = value;
        return Ok(());
    };
    let missing = || {
        format!(
            "add operation does not apply: doc is missing path: {:?}",
            pointer_text(path)
        )
    };
    match get_mut(doc, parent_path).ok_or_else(missing)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(value);
                return Ok(());
            }
            match last.parse::<usize>() {
                Ok(i) if i <= a.len() && !(last.len() > 1 && last.starts_with('0')) => {
                    a.insert(i, value);
                    Ok(())
                }
                _ => Err(format!(
                    "add operation does not apply: index out of bounds: {:?}",
                    pointer_text(path)
                )),
            }
        }
        _ => Err(missing()),
    }
}

fn remove(doc: &mut Value, path: &[String]) -> Result<Value, String> {
    let missing = || {
        format!(
            "remove operation does not apply: doc is missing path: {:?}",
            pointer_text(path)
        )
    };
    let Some((last, parent_path)) = path.split_last() else {
        return Ok(std::mem::take(doc));
    };
    match get_mut(doc, parent_path).ok_or_else(missing)? {
        Value::Object(m) => m.remove(last).ok_or_else(missing),
        Value::Array(a) => {
            let i = index(last, a.len()).ok_or_else(missing)?;
            Ok(a.remove(i))
        }
        _ => Err(missing()),
    }
}

fn apply_one(doc: &mut Value, op: &Operation) -> Result<(), String> {
    match op {
        Operation::Add { path, value } => add(doc, path, value.clone()),
        Operation::Remove { path } => remove(doc, path).map(drop),
        Operation::Replace { path, value } => {
            // evanphx/json-patch 4.9 (1.20's) replaces a missing key of an
            // existing object: it adds it.
            if let Some((last, parent)) = path.split_last()
                && let Some(Value::Object(map)) = get_mut(doc, parent)
            {
                map.insert(last.clone(), value.clone());
                return Ok(());
            }
            let slot = get_mut(doc, path).ok_or_else(|| {
                format!(
                    "replace operation does not apply: doc is missing key: {}",
                    pointer_text(path)
                )
            })?;
            *slot = value.clone();
            Ok(())
        }
        Operation::Move { from, path } => {
            if path.len() > from.len() && path.starts_with(from) {
                return Err(format!(
                    "move operation does not apply: cannot move {} into its own child {}",
                    pointer_text(from),
                    pointer_text(path)
                ));
            }
            let value = remove(doc, from).map_err(|_| {
                format!(
                    "move operation does not apply: doc is missing from path: {}",
                    pointer_text(from)
                )
            })?;
            add(doc, path, value)
        }
        Operation::Copy { from, path } => {
            let value = get(doc, from).cloned().ok_or_else(|| {
                format!(
                    "copy operation does not apply: doc is missing from path: {}",
                    pointer_text(from)
                )
            })?;
            add(doc, path, value)
        }
        Operation::Unknown(kind) => Err(format!("Unexpected kind: {kind}")),
        Operation::Test { path, value } => match get(doc, path) {
            Some(found) if found == value => Ok(()),
            None if value.is_null() => Ok(()),
            _ => Err(format!(
                "testing value {} failed: test failed",
                pointer_text(path)
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(doc: Value, patch: Value) -> Result<Value, ApiError> {
        let mut d = doc;
        apply(&mut d, patch.to_string().as_bytes())?;
        Ok(d)
    }

    #[test]
    fn pointers_unescape() {
        assert_eq!(parse_pointer("").unwrap(), Vec::<String>::new());
        assert_eq!(parse_pointer("/a~1b/c~0d/0").unwrap(), ["a/b", "c~d", "0"]);
        assert!(parse_pointer("a").is_err());
        assert_eq!(pointer_text(&["a/b".into()]), "/a~1b");
    }

    #[test]
    fn rfc6902_operations() {
        let doc = json!({"a": {"b": [1, 2, 3]}, "c": "x"});
        let cases = [
            (
                json!([{"op":"add","path":"/a/b/1","value":9}]),
                json!({"a":{"b":[1,9,2,3]},"c":"x"}),
            ),
            (
                json!([{"op":"add","path":"/a/b/-","value":4}]),
                json!({"a":{"b":[1,2,3,4]},"c":"x"}),
            ),
            (
                json!([{"op":"add","path":"/d","value":{"e":1}}]),
                json!({"a":{"b":[1,2,3]},"c":"x","d":{"e":1}}),
            ),
            (
                json!([{"op":"remove","path":"/a/b/0"}]),
                json!({"a":{"b":[2,3]},"c":"x"}),
            ),
            (
                json!([{"op":"replace","path":"/c","value":"y"}]),
                json!({"a":{"b":[1,2,3]},"c":"y"}),
            ),
            (
                json!([{"op":"move","from":"/c","path":"/a/c"}]),
                json!({"a":{"b":[1,2,3],"c":"x"}}),
            ),
            (
                json!([{"op":"copy","from":"/a/b/2","path":"/a/b/0"}]),
                json!({"a":{"b":[3,1,2,3]},"c":"x"}),
            ),
            (
                json!([{"op":"test","path":"/a/b","value":[1,2,3]},{"op":"remove","path":"/a"}]),
                json!({"c":"x"}),
            ),
            (
                json!([{"op":"test","path":"/missing","value":null}]),
                doc.clone(),
            ),
        ];
        for (patch, want) in cases {
            assert_eq!(run(doc.clone(), patch.clone()).unwrap(), want, "{patch}");
        }
    }

    #[test]
    fn failures_are_atomic_and_unprocessable() {
        let doc = json!({"a": [1]});
        for patch in [
            json!([{"op":"add","path":"/a/-","value":2},{"op":"test","path":"/a/0","value":5}]),
            json!([{"op":"remove","path":"/b"}]),
            json!([{"op":"replace","path":"/a/1","value":0}]),
            json!([{"op":"add","path":"/x/y","value":0}]),
            json!([{"op":"add","path":"/a/5","value":0}]),
            json!([{"op":"move","from":"/a","path":"/a/0"}]),
            json!([{"op":"test","path":"/a/0","value":null}]),
            json!([{"op":"jump","path":"/a"}]),
        ] {
            let mut d = doc.clone();
            let e = apply(&mut d, patch.to_string().as_bytes()).unwrap_err();
            assert_eq!((e.code().as_u16(), e.reason()), (422, "Invalid"), "{patch}");
            assert_eq!(d, doc, "nothing applied for {patch}");
        }
        for bad in [
            "{}",
            "[{\"op\":\"add\",\"path\":\"/a\"}]",
            "[{\"op\":\"add\",\"path\":\"a\",\"value\":1}]",
        ] {
            let e = apply(&mut json!({}), bad.as_bytes()).unwrap_err();
            assert_eq!(e.reason(), "BadRequest", "{bad}");
        }
    }
}
