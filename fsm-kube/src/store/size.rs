//! Records that do not fit: the API's size limits, checked before a write
//! (so that a record too large is refused with its size and the limit,
//! and nothing is sent), and the server's own refusals mapped onto the
//! same error (in case the estimate is short).
//!
//! The limits are the real API server's (measured on 1.20): a ConfigMap's
//! or Secret's data may hold at most 1 MiB; a whole object must fit in one
//! etcd request (1.5 MiB by default, key and framing included); a request
//! body may be at most 3 MiB.

use fsm_core::StoreError;

/// The most bytes a ConfigMap's or Secret's data may hold.
pub const DATA_LIMIT: usize = 1024 * 1024;

/// The most bytes a whole object may take, serialized as JSON: etcd's
/// default request limit (1.5 MiB) less 1 KiB for the storage key and the
/// request's framing.
pub const OBJECT_LIMIT: usize = 1024 * 1024 + 512 * 1024 - 1024;

/// Records below this size are not weighed against the whole object: no
/// object near [`OBJECT_LIMIT`] is that small once the record is in.
const WEIGH_OBJECT_FROM: usize = 64 * 1024;

/// The size of `value` as compact JSON, without building the text.
pub fn json_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail; a value that cannot be serialized
    // counts what was written before the failure.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The size of `object` as JSON with `record` at `.status.fsm`. For a
/// record under 64 KiB only the record is weighed (cheap, and far from
/// any limit); a larger one is weighed with the whole object.
pub fn object_with_record(object: &impl serde::Serialize, record: &serde_json::Value) -> usize {
    let record_size = json_len(record);
    if record_size < WEIGH_OBJECT_FROM {
        return record_size;
    }
    whole_object_with_record(object, record)
}

/// The size of `object` as JSON with `record` at `.status.fsm`, always
/// weighed whole (for the report of a write the server refused).
pub fn whole_object_with_record(
    object: &impl serde::Serialize,
    record: &serde_json::Value,
) -> usize {
    let record_size = json_len(record);
    let Ok(mut whole) = serde_json::to_value(object) else {
        return record_size;
    };
    match whole.as_object_mut() {
        Some(fields) => {
            let status = fields
                .entry("status")
                .or_insert_with(|| serde_json::json!({}));
            if let Some(status) = status.as_object_mut() {
                status.insert("fsm".to_owned(), record.clone());
            }
            json_len(&whole)
        }
        None => record_size,
    }
}

/// Refuses `size` bytes of `what` over `limit`.
///
/// # Errors
/// [`StoreError::TooLarge`].
pub(crate) fn check(what: &str, size: usize, limit: usize) -> Result<(), StoreError> {
    if size > limit {
        return Err(too_large(what, size, limit));
    }
    Ok(())
}

fn too_large(what: &str, size: usize, limit: usize) -> StoreError {
    StoreError::TooLarge {
        what: what.to_owned(),
        size,
        limit,
    }
}

/// Maps the server's refusal of an object too large (`413`; `422` with
/// "Too long: must have at most N bytes"; `500` from etcd or its gRPC
/// client) onto [`StoreError::TooLarge`] for `size` bytes of `what`, with
/// the limit the server names (else `fallback_limit`); other errors go to
/// [`super::store_error`].
pub(crate) fn refused(
    e: kube::Error,
    what: &str,
    size: usize,
    fallback_limit: usize,
) -> StoreError {
    if !is_too_large(&e) {
        return super::store_error(e);
    }
    let kube::Error::Api(status) = &e else {
        return super::store_error(e);
    };
    let limit = named_limit(&status.message).unwrap_or(fallback_limit);
    self::too_large(what, size, limit)
}

/// Whether `e` is the server refusing an object too large (see
/// [`refused`]).
pub(crate) fn is_too_large(e: &kube::Error) -> bool {
    let kube::Error::Api(status) = e else {
        return false;
    };
    is_too_large_status(status.code, &status.message)
}

/// Whether a server's answer `code` with `message` refuses an object too
/// large.
pub(crate) fn is_too_large_status(code: u16, message: &str) -> bool {
    match code {
        413 => true,
        422 => message.contains("Too long: must have at most"),
        500 => {
            message.contains("request is too large")
                || message.contains("trying to send message larger than max")
        }
        _ => false,
    }
}

/// The number after "limit is " or "at most " in a server's message.
fn named_limit(message: &str) -> Option<usize> {
    ["limit is ", "at most "].iter().find_map(|marker| {
        let rest = &message[message.find(marker)? + marker.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> kube::Error {
        let reason = if code == 409 { "Conflict" } else { "" };
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "message": message, "code": code, "reason": reason,
        }))
        .expect("a Status");
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn object_weighed_with_its_record() {
        let small = serde_json::json!({"state": "A"});
        let object =
            serde_json::json!({"spec": {"d": "x".repeat(1000)}, "status": {"fsm": {"old": 1}}});
        assert_eq!(object_with_record(&object, &small), json_len(&small));
        let big = serde_json::json!({"data": "y".repeat(WEIGH_OBJECT_FROM)});
        let expected =
            serde_json::json!({"spec": {"d": "x".repeat(1000)}, "status": {"fsm": big.clone()}});
        assert_eq!(object_with_record(&object, &big), json_len(&expected));
        assert_eq!(
            json_len(&expected),
            serde_json::to_vec(&expected).unwrap().len()
        );
    }

    #[test]
    fn check_names_size_and_limit() {
        assert!(check("x", 10, 10).is_ok());
        let e = check("the ConfigMap's data", 11, 10).expect_err("over");
        assert_eq!(
            e.to_string(),
            "the record would make the ConfigMap's data 11 bytes, over the limit of 10 bytes"
        );
    }

    #[test]
    fn server_refusals_are_too_large() {
        let cases = [
            (413, "Request entity too large: limit is 3145728", 3_145_728),
            (
                422,
                r#"ConfigMap "w-fsm" is invalid: []: Too long: must have at most 1048576 bytes"#,
                1_048_576,
            ),
            (500, "etcdserver: request is too large", 7),
            (
                500,
                "rpc error: code = ResourceExhausted desc = trying to send message larger than max (3000447 vs. 2097152)",
                7,
            ),
        ];
        for (code, message, limit) in cases {
            match refused(api_error(code, message), "it", 5, 7) {
                StoreError::TooLarge {
                    size: 5, limit: l, ..
                } => assert_eq!(l, limit, "{message}"),
                other => panic!("{message}: {other:?}"),
            }
        }
    }

    #[test]
    fn other_errors_are_not() {
        assert!(matches!(
            refused(api_error(409, "conflict"), "it", 5, 7),
            StoreError::Conflict
        ));
        assert!(matches!(
            refused(api_error(500, "Internal error occurred: boom"), "it", 5, 7),
            StoreError::Backend(_)
        ));
        assert!(matches!(
            refused(api_error(422, "metadata.name: Invalid value"), "it", 5, 7),
            StoreError::Backend(_)
        ));
    }
}
