//! A CRD's conversion webhook (`spec.conversion.strategy: Webhook`),
//! called as kube-apiserver 1.20's webhook converter calls it
//! (apiextensions-apiserver `conversion/webhook_converter.go`): one
//! `ConversionReview` per object not already at the desired version,
//! the answer checked (kind, uid, result, count, apiVersion, kind, name,
//! namespace, uid), and the object's metadata restored but for its labels
//! and annotations. Every failure is worded as 1.20 words it and answered
//! `500` without a reason.

use std::time::Duration;

use serde_json::{Value, json};

use super::client::{self, Endpoint};
use crate::status::ApiError;
use crate::store::Store;

/// The real server's client timeout for conversion webhooks.
const CONVERSION_TIMEOUT: Duration = Duration::from_secs(30);

/// The conversion webhook of a CRD.
#[derive(Debug, Clone)]
pub struct ConversionWebhook {
    endpoint: Result<Endpoint, String>,
    /// The `ConversionReview` version sent (`v1` or `v1beta1`), if any
    /// listed one is known.
    review_version: Option<&'static str>,
}

impl ConversionWebhook {
    /// The webhook of `crd` when its strategy is `Webhook` (`None` else),
    /// its `clientConfig` resolved against `store`.
    #[must_use]
    pub fn of_crd(crd: &Value, store: &Store) -> Option<Self> {
        let conversion = &crd["spec"]["conversion"];
        if conversion["strategy"] != "Webhook" {
            return None;
        }
        let webhook = &conversion["webhook"];
        let endpoint = client::resolve(&webhook["clientConfig"], store).map_err(|e| e.to_string());
        // The first listed version this server speaks, as 1.20 picks it.
        let review_version = webhook["conversionReviewVersions"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|v| match v.as_str() {
                Some("v1") => Some("v1"),
                Some("v1beta1") => Some("v1beta1"),
                _ => None,
            });
        Some(Self {
            endpoint,
            review_version,
        })
    }

    /// `object` converted to `desired` (`group/version`); an object
    /// already there is returned as is, without a call.
    ///
    /// # Errors
    /// [`ApiError::Storage`] (500, no reason) worded as 1.20's converter.
    pub async fn convert(&self, object: Value, desired: &str) -> Result<Value, ApiError> {
        if object["apiVersion"] == desired {
            return Ok(object);
        }
        let gvk = format!(
            "{}, Kind={}",
            object["apiVersion"].as_str().unwrap_or_default(),
            object["kind"].as_str().unwrap_or_default()
        );
        let failed = |why: String| ApiError::Storage(format!("conversion webhook for {gvk} {why}"));
        let Some(version) = self.review_version else {
            return Err(ApiError::Storage(
                "no supported conversion review versions".into(),
            ));
        };
        let endpoint = self
            .endpoint
            .as_ref()
            .map_err(|e| failed(format!("failed: {e}")))?;
        let uid = client::new_uid();
        let mut sent = object.clone();
        // What the real converter sends is decoded from storage, before
        // the resourceVersion is set.
        if let Some(meta) = sent["metadata"].as_object_mut() {
            meta.remove("resourceVersion");
        }
        let review = json!({
            "kind": "ConversionReview",
            "apiVersion": format!("apiextensions.k8s.io/{version}"),
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": [sent]},
            "response": {"uid": "", "convertedObjects": null, "result": {"metadata": {}}},
        });
        tracing::debug!(%desired, %uid, "calling a conversion webhook");
        let answer = client::post(endpoint, &review, CONVERSION_TIMEOUT)
            .await
            .map_err(|e| failed(format!("failed: {e}")))?;
        let converted = converted_objects(&answer, version, &uid)
            .map_err(|e| failed(format!("failed: {e}")))?;
        if converted.len() != 1 {
            return Err(failed(format!(
                "returned {} objects, expected 1",
                converted.len()
            )));
        }
        let mut out = converted.into_iter().next().unwrap_or_default();
        if out["apiVersion"] != desired {
            return Err(failed(format!(
                "returned invalid object at index 0: invalid groupVersion (expected {desired}, received {})",
                out["apiVersion"].as_str().unwrap_or_default()
            )));
        }
        if out["kind"] != object["kind"] {
            return Err(failed(format!(
                "returned invalid object at index 0: invalid kind (expected {}, received {})",
                object["kind"].as_str().unwrap_or_default(),
                out["kind"].as_str().unwrap_or_default()
            )));
        }
        for field in ["name", "namespace", "uid"] {
            let (e, a) = (
                object["metadata"][field].as_str().unwrap_or_default(),
                out["metadata"][field].as_str().unwrap_or_default(),
            );
            if e != a {
                let what = if field == "uid" { "UID" } else { field };
                return Err(failed(format!(
                    "returned invalid object: must have the same {what}: {e} != {a}"
                )));
            }
        }
        restore_metadata(&object, &mut out)
            .map_err(|e| failed(format!("returned invalid metadata: {e}")))?;
        Ok(out)
    }
}

/// The converted objects of a webhook's answer, checked as 1.20 checks
/// it (`getConvertedObjectsFromResponse`).
fn converted_objects(answer: &Value, version: &str, uid: &str) -> Result<Vec<Value>, String> {
    let response = &answer["response"];
    if version == "v1" {
        let (gv, kind) = (
            answer["apiVersion"].as_str().unwrap_or_default(),
            answer["kind"].as_str().unwrap_or_default(),
        );
        if gv != "apiextensions.k8s.io/v1" || kind != "ConversionReview" {
            return Err(format!(
                "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {gv}, Kind={kind}"
            ));
        }
        if !response.is_object() {
            return Err("no response provided".into());
        }
        let got = response["uid"].as_str().unwrap_or_default();
        if got != uid {
            return Err(format!("expected response.uid={uid:?}, got {got:?}"));
        }
    } else if !response.is_object() {
        return Err("no response provided".into());
    }
    let result = &response["result"];
    let status = result["status"].as_str().unwrap_or_default();
    if status != "Success" {
        return Err(match result["message"].as_str().filter(|m| !m.is_empty()) {
            Some(m) => m.to_string(),
            None => format!("response.result.status was '{status}', not 'Success'"),
        });
    }
    Ok(response["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default())
}

/// The original's metadata put back into the converted object, but for
/// the labels and annotations the webhook answered (`restoreObjectMeta`).
fn restore_metadata(original: &Value, converted: &mut Value) -> Result<(), String> {
    let answered = match converted.get("metadata") {
        None => return Err("missing metadata in converted object".into()),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(format!(
                "invalid metadata of type {} in converted object",
                go_type(other)
            ));
        }
    };
    let mut meta = original["metadata"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for field in ["labels", "annotations"] {
        match answered.get(field) {
            None | Some(Value::Null) => {
                meta.remove(field);
            }
            Some(Value::Object(m)) => {
                if let Some((k, v)) = m.iter().find(|(_, v)| !v.is_string()) {
                    return Err(format!(
                        "metadata.{field}[{k}] must be a string, but is {} in converted object",
                        go_type(v)
                    ));
                }
                meta.insert(field.into(), Value::Object(m.clone()));
            }
            Some(other) => {
                return Err(format!(
                    "invalid metadata.{field} of type {} in converted object",
                    go_type(other)
                ));
            }
        }
    }
    converted["metadata"] = Value::Object(meta);
    Ok(())
}

/// The Go type a JSON value decodes to, as `%T` prints it.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked_as_1_20_checks_them() {
        let ok = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "u", "result": {"status": "Success"}, "convertedObjects": [{}]}});
        assert_eq!(converted_objects(&ok, "v1", "u").unwrap().len(), 1);
        assert_eq!(
            converted_objects(&ok, "v1", "w").unwrap_err(),
            "expected response.uid=\"w\", got \"u\""
        );
        let failed = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "u", "result": {"status": "Failure", "message": "no"}}});
        assert_eq!(converted_objects(&failed, "v1", "u").unwrap_err(), "no");
        let bare = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "u", "result": {"status": "Failure"}}});
        assert_eq!(
            converted_objects(&bare, "v1", "u").unwrap_err(),
            "response.result.status was 'Failure', not 'Success'"
        );
        // v1beta1 answers are not checked for kind or uid.
        assert!(converted_objects(&ok, "v1beta1", "other").is_ok());
        let wrong_kind = json!({"apiVersion": "v1", "kind": "Status", "response": {}});
        assert_eq!(
            converted_objects(&wrong_kind, "v1", "u").unwrap_err(),
            "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got v1, Kind=Status"
        );
    }

    #[test]
    fn metadata_is_restored_but_labels_and_annotations() {
        let original = json!({"metadata": {"name": "a", "generation": 1, "labels": {"x": "1"}}});
        let mut converted =
            json!({"metadata": {"name": "a", "generation": 9, "annotations": {"n": "v"}}});
        restore_metadata(&original, &mut converted).unwrap();
        assert_eq!(
            converted["metadata"],
            json!({"name": "a", "generation": 1, "annotations": {"n": "v"}})
        );
        let mut bad = json!({"metadata": {"labels": {"x": 1}}});
        assert_eq!(
            restore_metadata(&original, &mut bad).unwrap_err(),
            "metadata.labels[x] must be a string, but is int64 in converted object"
        );
    }
}
