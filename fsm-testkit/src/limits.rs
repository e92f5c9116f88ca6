//! Size limits, as a real kube-apiserver (1.20, measured) and its etcd
//! enforce them:
//!
//! - a request body over [`MAX_REQUEST_BODY`] (3 MiB) is refused with
//!   `413 RequestEntityTooLarge`, "Request entity too large: limit is
//!   3145728", before it is decoded;
//! - a ConfigMap whose `data` and `binaryData` values, or a Secret whose
//!   `data` values (after `stringData` is folded in), add up to more than
//!   [`MAX_DATA_BYTES`] (1 MiB; keys do not count) is `422 Invalid` with a
//!   `FieldValueTooLong` cause (field `[]` for a ConfigMap, `data` for a
//!   Secret), also on a dry run;
//! - an object that does not fit in one etcd request fails with `500` and
//!   no reason: "etcdserver: request is too large" over etcd's
//!   [`ETCD_MAX_REQUEST_BYTES`] (1.5 MiB), and gRPC's "trying to send
//!   message larger than max" over [`GRPC_MAX_SEND_BYTES`] (2 MiB). The size
//!   of the request is estimated by [`etcd_request_bytes`].

use serde_json::Value;

use crate::resources::{GroupResource, ResourceDef};
use crate::status::{ApiError, Cause, Subject};

/// The largest request body the server reads (`--max-request-bytes`'s
/// sibling in the API server: 3 MiB).
pub const MAX_REQUEST_BODY: usize = 3 * 1024 * 1024;

/// The most bytes a ConfigMap's or Secret's data may hold (`MaxSecretSize`).
pub const MAX_DATA_BYTES: usize = 1024 * 1024;

/// etcd's default `--max-request-bytes`: 1.5 MiB.
pub const ETCD_MAX_REQUEST_BYTES: usize = 1024 * 1024 + 512 * 1024;

/// The API server's gRPC client refuses to send a message over 2 MiB.
pub const GRPC_MAX_SEND_BYTES: usize = 2 * 1024 * 1024;

/// What an etcd transaction adds to the key and the value: measured on
/// 1.20 (a custom resource of 1 572 735 bytes of JSON under a 56-byte key
/// was the largest accepted).
const ETCD_FRAMING_BYTES: usize = 73;

/// The 413 answer to a body over [`MAX_REQUEST_BODY`].
#[must_use]
pub fn body_too_large() -> ApiError {
    ApiError::RequestEntityTooLarge(format!(
        "Request entity too large: limit is {MAX_REQUEST_BODY}"
    ))
}

/// Refuses a ConfigMap whose data (`data` and `binaryData`, decoded)
/// exceeds [`MAX_DATA_BYTES`], as the real server's validation does.
///
/// # Errors
/// `Invalid` with one `FieldValueTooLong` cause.
pub fn check_config_map_size(
    def: &ResourceDef,
    name: &str,
    object: &Value,
) -> Result<(), ApiError> {
    let size = text_values(&object["data"]) + decoded_values(&object["binaryData"]);
    check_data_bytes(def, name, size, "[]")
}

/// Refuses a Secret whose `data` (decoded) exceeds [`MAX_DATA_BYTES`], as
/// the real server's validation does. `object` is the Secret as it would
/// be stored (`stringData` already folded into `data`).
///
/// # Errors
/// `Invalid` with one `FieldValueTooLong` cause.
pub fn check_secret_size(def: &ResourceDef, name: &str, object: &Value) -> Result<(), ApiError> {
    check_data_bytes(def, name, decoded_values(&object["data"]), "data")
}

/// `Invalid` (the real server's cause at `field`) when `size` is over
/// [`MAX_DATA_BYTES`].
fn check_data_bytes(
    def: &ResourceDef,
    name: &str,
    size: usize,
    field: &str,
) -> Result<(), ApiError> {
    if size <= MAX_DATA_BYTES {
        return Ok(());
    }
    Err(ApiError::Invalid(
        Subject::new(&def.group, &def.kind, name),
        vec![Cause {
            reason: "FieldValueTooLong".into(),
            message: format!("Too long: must have at most {MAX_DATA_BYTES} bytes"),
            field: field.into(),
        }],
    ))
}

/// The size of the etcd request that stores `object` under the key of
/// `gr`, `namespace`, `name`: its compact JSON, the key
/// (`/registry/[group/]resource/[namespace/]name`) and the transaction's
/// framing. An estimate: the real server's value is its own encoding
/// (JSON for custom resources, protobuf for built-in kinds).
#[must_use]
pub fn etcd_request_bytes(
    gr: &GroupResource,
    namespace: &str,
    name: &str,
    object: &Value,
) -> usize {
    let value = serde_json::to_vec(object).map_or(0, |v| v.len());
    let key: usize = ["registry", &gr.group, &gr.resource, namespace, name]
        .iter()
        .filter(|part| !part.is_empty())
        .map(|part| part.len() + 1)
        .sum();
    value + key + ETCD_FRAMING_BYTES
}

/// Refuses to store `object` when its etcd request would be too large,
/// with the real server's answers.
///
/// # Errors
/// `Storage` (500, no reason) with etcd's or gRPC's message.
pub fn check_storable(
    gr: &GroupResource,
    namespace: &str,
    name: &str,
    object: &Value,
) -> Result<(), ApiError> {
    let size = etcd_request_bytes(gr, namespace, name, object);
    if size > GRPC_MAX_SEND_BYTES {
        return Err(ApiError::Storage(format!(
            "rpc error: code = ResourceExhausted desc = trying to send message larger than max ({size} vs. {GRPC_MAX_SEND_BYTES})"
        )));
    }
    if size > ETCD_MAX_REQUEST_BYTES {
        return Err(ApiError::Storage("etcdserver: request is too large".into()));
    }
    Ok(())
}

/// The bytes of a map of strings.
fn text_values(map: &Value) -> usize {
    map.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, v)| v.as_str())
        .map(str::len)
        .sum()
}

/// The decoded bytes of a map of base64 strings.
fn decoded_values(map: &Value) -> usize {
    map.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, v)| v.as_str())
        .map(crate::base64::decoded_len)
        .sum()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::base64::encode as base64;

    fn def(plural: &str) -> std::sync::Arc<ResourceDef> {
        crate::builtins::registry()
            .get("", "v1", plural)
            .expect("a built-in resource")
    }

    #[test]
    fn configmap_data_counts_values_not_keys() {
        let cms = def("configmaps");
        let at_limit = json!({"data": {"k".repeat(300): "a".repeat(MAX_DATA_BYTES / 2),
                                        "j".repeat(300): "b".repeat(MAX_DATA_BYTES / 2)}});
        assert_eq!(check_config_map_size(&cms, "cm", &at_limit), Ok(()));
        let over = json!({"data": {"k": "a".repeat(MAX_DATA_BYTES / 2)},
                          "binaryData": {"j": base64(&vec![0; MAX_DATA_BYTES / 2 + 1])}});
        let err = check_config_map_size(&cms, "cm", &over).expect_err("over the limit");
        let status = err.to_status();
        assert_eq!(status["code"], 422);
        assert_eq!(status["reason"], "Invalid");
        assert_eq!(
            status["message"],
            r#"ConfigMap "cm" is invalid: []: Too long: must have at most 1048576 bytes"#
        );
        assert_eq!(
            status["details"]["causes"][0]["reason"],
            "FieldValueTooLong"
        );
        assert_eq!(status["details"]["causes"][0]["field"], "[]");
    }

    #[test]
    fn secret_data_counts_decoded_bytes() {
        let secrets = def("secrets");
        let at_limit = json!({"data": {"k": base64(&vec![0; MAX_DATA_BYTES])}});
        assert_eq!(check_secret_size(&secrets, "s", &at_limit), Ok(()));
        let over = json!({"data": {"k": base64(&vec![0; MAX_DATA_BYTES / 2]),
                                   "x": base64(&vec![0; MAX_DATA_BYTES / 2 + 1])}});
        let status = check_secret_size(&secrets, "s", &over)
            .expect_err("over the limit")
            .to_status();
        assert_eq!(
            status["message"],
            r#"Secret "s" is invalid: data: Too long: must have at most 1048576 bytes"#
        );
        assert_eq!(status["details"]["causes"][0]["field"], "data");
    }

    #[test]
    fn other_kinds_have_no_data_limit() {
        let pods = def("pods");
        assert!(crate::builtins::rules_of(&pods).check_size.is_none());
    }

    #[test]
    fn etcd_limit_at_the_measured_boundary() {
        let gr = GroupResource {
            group: "limits.example.com".into(),
            resource: "blobs".into(),
        };
        let object = |n: usize| json!({"spec": {"d": "a".repeat(n)}});
        let base = etcd_request_bytes(&gr, "limits-probe", "s1572482", &object(0));
        let fits = ETCD_MAX_REQUEST_BYTES - base;
        assert_eq!(
            check_storable(&gr, "limits-probe", "s1572482", &object(fits)),
            Ok(())
        );
        let err = check_storable(&gr, "limits-probe", "s1572482", &object(fits + 1))
            .expect_err("one byte over");
        let status = err.to_status();
        assert_eq!(status["code"], 500);
        assert_eq!(status["message"], "etcdserver: request is too large");
        assert!(
            status.get("reason").is_none(),
            "1.20 gives no reason: {status}"
        );
        let err = check_storable(&gr, "ns", "n", &object(GRPC_MAX_SEND_BYTES)).expect_err("huge");
        assert!(
            err.to_string()
                .starts_with("rpc error: code = ResourceExhausted desc = trying to send message larger than max ("),
            "{err}"
        );
    }

    #[test]
    fn body_limit_reads_like_the_real_server() {
        let status = body_too_large().to_status();
        assert_eq!(status["code"], 413);
        assert_eq!(status["reason"], "RequestEntityTooLarge");
        assert_eq!(
            status["message"],
            "Request entity too large: limit is 3145728"
        );
        assert!(status.get("details").is_none());
    }
}
