//! The data of ConfigMaps and Secrets: keys that are config keys
//! (`IsConfigMapKey`), and no key in both of a ConfigMap's `data` and
//! `binaryData`.

use serde_json::Value;

use super::field::{FieldErrors, go_string, key};
use crate::resources::ResourceDef;
use crate::status::Cause;

const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// The causes of a ConfigMap's data and binary data.
#[must_use]
pub fn config_map_causes(_def: &ResourceDef, object: &Value) -> Vec<Cause> {
    let mut e = FieldErrors::new();
    let binary = object["binaryData"].as_object();
    if let Some(data) = object["data"].as_object() {
        for k in data.keys() {
            keys_of(k, "data", &mut e);
            if binary.is_some_and(|b| b.contains_key(k)) {
                e.invalid(
                    &key("data", k),
                    &go_string(k),
                    "duplicate of key present in binaryData",
                );
            }
        }
    }
    if let Some(binary) = binary {
        for k in binary.keys() {
            keys_of(k, "binaryData", &mut e);
        }
    }
    e.into_causes()
}

/// The causes of a Secret's data (its `stringData` is folded in first).
#[must_use]
pub fn secret_causes(_def: &ResourceDef, object: &Value) -> Vec<Cause> {
    let mut e = FieldErrors::new();
    let mut keys: Vec<&String> = object["data"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .collect();
    for k in object["stringData"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.sort();
    for k in &keys {
        keys_of(k, "data", &mut e);
    }
    secret_type_causes(object, &keys, &mut e);
    e.into_causes()
}

/// What a Secret's type requires (1.20's `ValidateSecret`): a service
/// account token names its account, a TLS Secret has its certificate and
/// key, a Docker config its file, basic auth a username or a password, SSH
/// auth a private key. The paths are 1.20's, `data[%s][…]` included.
/// (Whether a Docker config is JSON is not checked.)
fn secret_type_causes(object: &Value, keys: &[&String], e: &mut FieldErrors) {
    let has = |k: &str| keys.iter().any(|key| key.as_str() == k);
    match object["type"].as_str().unwrap_or_default() {
        "kubernetes.io/service-account-token" => {
            let named = object["metadata"]["annotations"]["kubernetes.io/service-account.name"]
                .as_str()
                .is_some_and(|n| !n.is_empty());
            if !named {
                e.required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                    "",
                );
            }
        }
        "kubernetes.io/dockercfg" if !has(".dockercfg") => e.required("data[.dockercfg]", ""),
        "kubernetes.io/dockerconfigjson" if !has(".dockerconfigjson") => {
            e.required("data[.dockerconfigjson]", "");
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            e.required("data[%s][username]", "");
            e.required("data[%s][password]", "");
        }
        "kubernetes.io/ssh-auth" => {
            let empty = |v: &Value| v.as_str().is_none_or(str::is_empty);
            if empty(&object["data"]["ssh-privatekey"])
                && empty(&object["stringData"]["ssh-privatekey"])
            {
                e.required("data[%s][ssh-privatekey]", "");
            }
        }
        "kubernetes.io/tls" => {
            for k in ["tls.crt", "tls.key"] {
                if !has(k) {
                    e.required(&key("data", k), "");
                }
            }
        }
        _ => {}
    }
}

fn keys_of(k: &str, path: &str, e: &mut FieldErrors) {
    for problem in config_key_problems(k) {
        e.invalid(&key(path, k), &go_string(k), &problem);
    }
}

/// Why `k` is no config key.
#[must_use]
pub fn config_key_problems(k: &str) -> Vec<String> {
    let mut out = Vec::new();
    if k.len() > 253 {
        out.push("must be no more than 253 characters".into());
    }
    if k.is_empty()
        || !k
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
    {
        out.push(CONFIG_KEY_MSG.into());
    }
    if k == "." {
        out.push("must not be '.'".into());
    } else if k == ".." {
        out.push("must not be '..'".into());
    } else if k.starts_with("..") {
        out.push("must not start with '..'".into());
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn def() -> ResourceDef {
        ResourceDef::builtin("", "v1", "ConfigMap", "configmaps", true)
    }

    #[test]
    fn config_keys_as_the_real_server() {
        assert!(config_key_problems("ok.txt").is_empty());
        assert_eq!(config_key_problems(".."), ["must not be '..'"]);
        assert_eq!(config_key_problems("a/b"), [CONFIG_KEY_MSG]);
        assert_eq!(config_key_problems("..a"), ["must not start with '..'"]);
    }

    #[test]
    fn data_keys_are_checked_in_order() {
        let causes = config_map_causes(
            &def(),
            &json!({"data": {"bad key": "x", "ok.txt": "1"}, "binaryData": {"ok.txt": "AA=="}}),
        );
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["data[bad key]", "data[ok.txt]"]);
        let secret = secret_causes(
            &def(),
            &json!({"data": {"a b": "eA=="}, "stringData": {"c/d": "y"}}),
        );
        assert_eq!(secret.len(), 2);
        assert_eq!(secret[1].field, "data[c/d]");
    }
}
