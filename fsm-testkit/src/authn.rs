//! Authentication: ServiceAccount tokens, and the `TokenReview` that
//! checks one (`POST /apis/authentication.k8s.io/v1/tokenreviews`).
//!
//! The tokens are those the token controller puts into a
//! ServiceAccount's `kubernetes.io/service-account-token` Secret (see
//! [`crate::cluster`]): opaque random strings, not JWTs. A token is valid
//! while its Secret exists and the ServiceAccount its annotations name
//! exists with the uid they name, neither being deleted, as the real
//! server's legacy token validator checks. It authenticates as
//! `system:serviceaccount:<namespace>:<name>` in the groups
//! `system:serviceaccounts`, `system:serviceaccounts:<namespace>` and
//! `system:authenticated`, for the audience of a cluster whose issuer is
//! `https://kubernetes.default.svc`.
//!
//! # Caveats
//! The server itself checks no credentials (its kubeconfig carries none),
//! so there is no admin token to review; the real server's other
//! authenticators (token files, certificates) are not there either.

use k8s_openapi::api::authentication::v1::TokenReview;
use serde_json::{Map, Value, json};

use crate::resources::GroupResource;
use crate::reviews::{self, TOKEN_REVIEW};
use crate::status::ApiError;
use crate::store::Store;

/// The type of the Secrets holding ServiceAccount tokens.
pub const TOKEN_SECRET_TYPE: &str = "kubernetes.io/service-account-token";
/// The annotation naming a token Secret's ServiceAccount.
pub const SERVICE_ACCOUNT_NAME: &str = "kubernetes.io/service-account.name";
/// The annotation holding a token Secret's ServiceAccount's uid.
pub const SERVICE_ACCOUNT_UID: &str = "kubernetes.io/service-account.uid";
/// The audience tokens are for (the real server's default: its
/// service-account issuer).
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc";
/// The error of a token no authenticator accepts.
const INVALID_TOKEN: &str = "invalid bearer token";

/// Who a token authenticates as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// `system:serviceaccount:<namespace>:<name>`.
    pub username: String,
    /// The ServiceAccount's uid.
    pub uid: String,
    /// The user's groups.
    pub groups: Vec<String>,
}

fn resource(name: &str) -> GroupResource {
    GroupResource {
        group: String::new(),
        resource: name.into(),
    }
}

fn annotation<'a>(object: &'a Value, key: &str) -> &'a str {
    object["metadata"]["annotations"][key]
        .as_str()
        .unwrap_or_default()
}

/// The user a ServiceAccount token authenticates as, or `None` for a
/// token that is not (or no longer) one.
#[must_use]
pub fn authenticate(store: &Store, token: &str) -> Option<UserInfo> {
    if token.is_empty() {
        return None;
    }
    let secret = store
        .list(&resource("secrets"), None)
        .into_iter()
        .filter(|s| s["type"] == TOKEN_SECRET_TYPE)
        .find(|s| {
            s["data"]["token"]
                .as_str()
                .and_then(crate::base64::decode)
                .is_some_and(|t| t == token.as_bytes())
        })?;
    let namespace = secret["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = annotation(&secret, SERVICE_ACCOUNT_NAME);
    let account = store.get(&resource("serviceaccounts"), namespace, name)?;
    let uid = account["metadata"]["uid"].as_str().unwrap_or_default();
    let deleting = |o: &Value| o["metadata"].get("deletionTimestamp").is_some();
    if uid != annotation(&secret, SERVICE_ACCOUNT_UID) || deleting(&account) || deleting(&secret) {
        return None;
    }
    Some(UserInfo {
        username: format!("system:serviceaccount:{namespace}:{name}"),
        uid: uid.to_string(),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".into(),
        ],
    })
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
fn go_quoted(list: &[String]) -> String {
    let quoted: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

/// Answers a `TokenReview` (the request body): the object with its
/// `status`: `authenticated`, `user` and `audiences` for a valid token,
/// an empty `user` and the real server's `error` otherwise (also for a
/// valid token whose `spec.audiences` do not include [`API_AUDIENCE`]).
/// Nothing is stored.
///
/// # Errors
/// `400 BadRequest` for a body that does not decode (see
/// [`reviews::decode`]) or has no token (`token is required for
/// TokenReview in authentication`).
pub fn review(store: &Store, bytes: &[u8]) -> Result<Value, ApiError> {
    let (body, typed) = reviews::decode::<TokenReview>(&TOKEN_REVIEW, bytes)?;
    let token = typed.spec.token.unwrap_or_default();
    if token.is_empty() {
        return Err(ApiError::BadRequest(
            "token is required for TokenReview in authentication".into(),
        ));
    }
    let audiences = typed.spec.audiences.unwrap_or_default();
    let status = match authenticate(store, &token) {
        None => json!({"user": {}, "error": INVALID_TOKEN}),
        Some(_) if !audiences.is_empty() && !audiences.iter().any(|a| a == API_AUDIENCE) => {
            json!({"user": {}, "error": format!(
                "[{INVALID_TOKEN}, token audiences {} is invalid for the target audiences {}]",
                go_quoted(&[API_AUDIENCE.to_string()]),
                go_quoted(&audiences)
            )})
        }
        Some(user) => json!({
            "authenticated": true,
            "user": {"username": user.username, "uid": user.uid, "groups": user.groups},
            "audiences": [API_AUDIENCE],
        }),
    };
    let mut spec = Map::new();
    for field in ["token", "audiences"] {
        if let Some(v) = body["spec"].get(field).filter(|v| !reviews::is_empty(v)) {
            spec.insert(field.into(), v.clone());
        }
    }
    Ok(json!({
        "kind": TOKEN_REVIEW.kind,
        "apiVersion": TOKEN_REVIEW.api_version(),
        "metadata": reviews::answer_metadata(&body),
        "spec": spec,
        "status": status,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Store {
        let mut store = Store::new(100, 16);
        store.put(
            &resource("serviceaccounts"),
            "app",
            "web",
            json!({"metadata": {"name": "web", "namespace": "app", "uid": "u-1"}}),
        );
        let secret = |name: &str, uid: &str, token: &str| {
            json!({"metadata": {"name": name, "namespace": "app",
                    "annotations": {SERVICE_ACCOUNT_NAME: "web", SERVICE_ACCOUNT_UID: uid}},
                   "type": TOKEN_SECRET_TYPE,
                   "data": {"token": crate::base64::encode(token.as_bytes())}})
        };
        store.put(
            &resource("secrets"),
            "app",
            "web-token-abcde",
            secret("web-token-abcde", "u-1", "good"),
        );
        store.put(
            &resource("secrets"),
            "app",
            "web-token-old",
            secret("web-token-old", "u-0", "stale"),
        );
        store
    }

    fn ask(store: &Store, spec: Value) -> Result<Value, ApiError> {
        review(store, json!({"spec": spec}).to_string().as_bytes())
    }

    #[test]
    fn a_token_authenticates_as_its_service_account() {
        let s = store();
        let user = authenticate(&s, "good").unwrap();
        assert_eq!(user.username, "system:serviceaccount:app:web");
        assert_eq!(user.uid, "u-1");
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:app",
                "system:authenticated"
            ]
        );
        assert_eq!(authenticate(&s, "stale"), None, "another account's uid");
        assert_eq!(authenticate(&s, "nope"), None);
        assert_eq!(authenticate(&s, ""), None);
    }

    #[test]
    fn reviews_answer_as_the_real_server() {
        let s = store();
        let ok = ask(&s, json!({"token": "good"})).unwrap();
        assert_eq!(ok["status"]["authenticated"], true);
        assert_eq!(ok["status"]["audiences"], json!([API_AUDIENCE]));
        assert_eq!(ok["spec"], json!({"token": "good"}));
        assert_eq!(ok["metadata"], json!({"creationTimestamp": null}));
        let bad = ask(&s, json!({"token": "garbage"})).unwrap();
        assert_eq!(
            bad["status"],
            json!({"user": {}, "error": "invalid bearer token"})
        );
        let elsewhere = ask(&s, json!({"token": "good", "audiences": ["x"]})).unwrap();
        assert_eq!(
            elsewhere["status"]["error"],
            r#"[invalid bearer token, token audiences ["https://kubernetes.default.svc"] is invalid for the target audiences ["x"]]"#
        );
        let e = ask(&s, json!({})).unwrap_err();
        assert_eq!(e.code().as_u16(), 400);
        assert_eq!(
            e.to_string(),
            "token is required for TokenReview in authentication"
        );
    }
}
