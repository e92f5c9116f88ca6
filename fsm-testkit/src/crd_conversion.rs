//! A CRD's `spec.conversion`, validated as kube-apiserver 1.20 validates
//! it (apiextensions `validateCustomResourceConversion`). The fields are
//! named as 1.20 names them, after its internal type: the v1 API's
//! `webhook.clientConfig` is `webhookClientConfig`, its
//! `webhook.conversionReviewVersions` is `conversionReviewVersions`.

use serde_json::Value;

use crate::status::Cause;

const FIELD: &str = "spec.conversion";
const URL_FORM: &str = "; desired format: https://host[/path]";

/// The causes of `spec`'s `conversion`.
#[must_use]
pub fn causes(spec: &Value) -> Vec<Cause> {
    let conversion = &spec["conversion"];
    if !conversion.is_object() {
        return Vec::new();
    }
    let mut causes = Vec::new();
    let strategy = conversion["strategy"].as_str().unwrap_or_default();
    if !matches!(strategy, "None" | "Webhook") {
        causes.push(Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: {strategy:?}: supported values: \"None\", \"Webhook\""
            ),
            field: format!("{FIELD}.strategy"),
        });
    }
    let webhook = &conversion["webhook"];
    let config = &webhook["clientConfig"];
    let versions = webhook["conversionReviewVersions"].as_array();
    let client_config = format!("{FIELD}.webhookClientConfig");
    let review_versions = format!("{FIELD}.conversionReviewVersions");
    if strategy != "Webhook" {
        if config.is_object() {
            causes.push(Cause::forbidden(
                &client_config,
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if versions.is_some_and(|v| !v.is_empty()) {
            causes.push(Cause::forbidden(
                &review_versions,
                "should not be set when strategy is not set to Webhook",
            ));
        }
        return causes;
    }
    if !config.is_object() {
        causes.push(Cause::required(
            &client_config,
            "required when strategy is set to Webhook",
        ));
    } else if config.get("url").is_some() == config.get("service").is_some() {
        causes.push(Cause::required(
            &client_config,
            "exactly one of url or service is required",
        ));
    } else if let Some(url) = config["url"].as_str() {
        causes.extend(url_causes(&format!("{client_config}.url"), url));
    }
    match versions.filter(|v| !v.is_empty()) {
        None => causes.push(Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value".into(),
            field: review_versions,
        }),
        Some(list) => {
            let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
            if !names.iter().any(|v| matches!(*v, "v1" | "v1beta1")) {
                let shown: Vec<String> = names.iter().map(|v| format!("{v:?}")).collect();
                causes.push(Cause {
                    reason: "FieldValueInvalid".into(),
                    message: format!(
                        "Invalid value: []string{{{}}}: must include at least one of v1, v1beta1",
                        shown.join(", ")
                    ),
                    field: review_versions,
                });
            }
        }
    }
    causes
}

/// A webhook URL's causes (`ValidateWebhookURL` with https forced).
fn url_causes(field: &str, url: &str) -> Vec<Cause> {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return vec![Cause::required(
            field,
            &format!("url must be a valid URL: parse {url:?}: invalid URI{URL_FORM}"),
        )];
    };
    let mut causes = Vec::new();
    let scheme = uri.scheme_str().unwrap_or_default();
    if scheme != "https" {
        causes.push(Cause::invalid(
            field,
            scheme,
            &format!("'https' is the only allowed URL scheme{URL_FORM}"),
        ));
    }
    if uri.host().is_none_or(str::is_empty) {
        causes.push(Cause::invalid(
            field,
            "",
            &format!("host must be provided{URL_FORM}"),
        ));
    }
    if let Some(query) = uri.query() {
        causes.push(Cause::invalid(
            field,
            query,
            "query parameters are not permitted in the URL",
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn webhook_settings_are_checked_as_1_20_checks_them() {
        let fields = |spec: Value| -> Vec<String> {
            causes(&spec)
                .into_iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect()
        };
        assert_eq!(
            fields(json!({"conversion": {"strategy": "Webhook"}})),
            [
                "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
                "spec.conversion.conversionReviewVersions: Required value",
            ]
        );
        assert_eq!(
            fields(json!({"conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": "http://h/x"}, "conversionReviewVersions": ["v3"]}}})),
            [
                "spec.conversion.webhookClientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
                "spec.conversion.conversionReviewVersions: Invalid value: []string{\"v3\"}: must include at least one of v1, v1beta1",
            ]
        );
        assert_eq!(
            fields(json!({"conversion": {"strategy": "None", "webhook": {
                "clientConfig": {"url": "https://h/x"}}}})),
            [
                "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook"
            ]
        );
        assert!(fields(json!({"conversion": {"strategy": "None"}})).is_empty());
    }
}
