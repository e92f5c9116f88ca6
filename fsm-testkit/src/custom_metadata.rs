//! A custom resource's `metadata` decoded as the real server decodes it
//! into `ObjectMeta` (with json-iterator): `labels` and `annotations`
//! must be maps of strings, or the write is refused with 400 and
//! json-iterator's words, which quote the metadata (as Go writes it:
//! keys sorted, compact) around the offending byte.

use serde_json::Value;

/// The string maps of `ObjectMeta`, by JSON name and Go field name.
const STRING_MAPS: [(&str, &str); 2] = [("annotations", "Annotations"), ("labels", "Labels")];

/// Why `metadata` does not decode into `ObjectMeta`, worded as
/// json-iterator words it (`v1.ObjectMeta.Labels: ReadMapCB: expect { or
/// n, but found ", error found in #10 byte of ...|…|..., bigger context
/// ...|…|...`), or `None`.
#[must_use]
pub fn decode_problem(metadata: &Value) -> Option<String> {
    let Value::Object(map) = metadata else {
        return None;
    };
    // Go's encoding/json writes a map with its keys sorted.
    let buf = serde_json::to_string(&sorted(metadata)).ok()?;
    for (key, field) in STRING_MAPS {
        let Some(value) = map.get(key) else {
            continue;
        };
        let start = value_offset(&buf, key)?;
        match value {
            Value::Null => {}
            Value::Object(entries) => {
                let mut keys: Vec<&String> = entries.keys().collect();
                keys.sort();
                for (i, k) in keys.iter().enumerate() {
                    let v = &entries[*k];
                    if v.is_string() || v.is_null() {
                        continue;
                    }
                    let at = entry_offset(&buf, start, k)?;
                    // json-iterator names the first entry's field oddly,
                    // after the struct's `Name`.
                    let op = if i == 0 {
                        format!("v1.ObjectMeta.Name: {field}")
                    } else {
                        format!("v1.ObjectMeta.{field}")
                    };
                    let found = buf[at..].chars().next()?;
                    return Some(report(
                        &op,
                        &format!("ReadString: expects \" or n, but found {found}"),
                        &buf,
                        at + found.len_utf8(),
                    ));
                }
            }
            _ => {
                let found = buf[start..].chars().next()?;
                return Some(report(
                    &format!("v1.ObjectMeta.{field}"),
                    &format!("ReadMapCB: expect {{ or n, but found {found}"),
                    &buf,
                    start + found.len_utf8(),
                ));
            }
        }
    }
    None
}

/// `value` with every object's keys sorted.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// Where the value of the top-level `key` starts in `buf`, a compact
/// object.
fn value_offset(buf: &str, key: &str) -> Option<usize> {
    let needle = format!("{}:", serde_json::to_string(key).ok()?);
    buf.find(&needle).map(|i| i + needle.len())
}

/// Where the value of `key` starts in the compact object at `start`.
fn entry_offset(buf: &str, start: usize, key: &str) -> Option<usize> {
    let needle = format!("{}:", serde_json::to_string(key).ok()?);
    buf[start..].find(&needle).map(|i| start + i + needle.len())
}

/// json-iterator's `ReportError`: `head` is just past the offending byte.
fn report(op: &str, msg: &str, buf: &str, head: usize) -> String {
    let bytes = buf.as_bytes();
    let peek_start = head.saturating_sub(10);
    let peek_end = (head + 10).min(bytes.len());
    let context_start = head.saturating_sub(50);
    let context_end = (head + 50).min(bytes.len());
    let text = |a: usize, b: usize| String::from_utf8_lossy(&bytes[a..b]).into_owned();
    format!(
        "{op}: {msg}, error found in #{} byte of ...|{}|..., bigger context ...|{}|...",
        head - peek_start,
        text(peek_start, peek_end),
        text(context_start, context_end)
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn labels_that_are_no_map_are_worded_as_the_real_server() {
        assert_eq!(
            decode_problem(&json!({"name": "w1", "labels": "x"})).unwrap(),
            "v1.ObjectMeta.Labels: ReadMapCB: expect { or n, but found \", error found in #10 byte of ...|\"labels\":\"x\",\"name\":|..., bigger context ...|{\"labels\":\"x\",\"name\":\"w1\"}|..."
        );
        assert_eq!(
            decode_problem(&json!({"generateName": "zz-", "labels": 5})).unwrap(),
            "v1.ObjectMeta.Labels: ReadMapCB: expect { or n, but found 5, error found in #10 byte of ...|\"labels\":5}|..., bigger context ...|{\"generateName\":\"zz-\",\"labels\":5}|..."
        );
    }

    #[test]
    fn values_that_are_no_strings_are_worded_as_the_real_server() {
        assert_eq!(
            decode_problem(&json!({"name": "w2", "labels": {"a": 1}})).unwrap(),
            "v1.ObjectMeta.Name: Labels: ReadString: expects \" or n, but found 1, error found in #10 byte of ...|ls\":{\"a\":1},\"name\":\"|..., bigger context ...|{\"labels\":{\"a\":1},\"name\":\"w2\"}|..."
        );
        assert_eq!(
            decode_problem(&json!({"name": "w2", "labels": {"a": "b", "c": true}})).unwrap(),
            "v1.ObjectMeta.Labels: ReadString: expects \" or n, but found t, error found in #10 byte of ...|:\"b\",\"c\":true},\"name|..., bigger context ...|{\"labels\":{\"a\":\"b\",\"c\":true},\"name\":\"w2\"}|..."
        );
        assert_eq!(
            decode_problem(&json!({"name": "w2", "labels": {"a": "b"}})),
            None
        );
        assert_eq!(decode_problem(&json!({"name": "w2", "labels": null})), None);
    }
}
