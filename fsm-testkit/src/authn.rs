//! Authentication: ServiceAccount tokens, and the `TokenReview` that
//! checks one (`POST /apis/authentication.k8s.io/v1/tokenreviews`).
//!
//! The tokens are those the token controller puts into a
//! ServiceAccount's `kubernetes.io/service-account-token` Secret (see
//! [`crate::cluster`]). Not JWTs, but like them they carry their claims
//! (namespace, Secret, account and its uid, [`Claims`]) readable, and a
//! random part that makes them unguessable; where a JWT is signed, a token
//! here is valid only if it is the copy its Secret holds. A token is valid
//! while its Secret exists and the ServiceAccount it names exists with the
//! uid it names, neither being deleted: the real server's legacy token
//! validator's checks, in its order and with its errors (`Token has been
//! invalidated`, …). It authenticates as
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

/// What a token says: whose it is and where its copy is kept.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Claims {
    /// The namespace of the account and the Secret.
    pub namespace: String,
    /// The Secret holding the token.
    pub secret: String,
    /// The ServiceAccount's name.
    pub account: String,
    /// The ServiceAccount's uid.
    pub uid: String,
}

impl Claims {
    /// The token for these claims with `random` (hex) as its unguessable
    /// part: `<base64 of the claims as JSON>.<random>`.
    #[must_use]
    pub fn token(&self, random: &str) -> String {
        let claims = serde_json::to_string(self).unwrap_or_default();
        format!("{}.{random}", crate::base64::encode(claims.as_bytes()))
    }

    /// The claims of `token`, if it is one of this server's.
    fn of(token: &str) -> Option<Self> {
        let (claims, random) = token.split_once('.')?;
        if random.is_empty() {
            return None;
        }
        serde_json::from_slice(&crate::base64::decode(claims)?).ok()
    }
}

/// The user a ServiceAccount token authenticates as.
///
/// # Errors
/// Why not, as the real server's `TokenReview` words it:
/// `invalid bearer token` for a token that is none of this server's,
/// `[invalid bearer token, <why>]` for one that no longer is valid (its
/// Secret or account gone or being deleted, another uid, not its Secret's
/// copy).
pub fn authenticate(store: &Store, token: &str) -> Result<UserInfo, String> {
    let claims = Claims::of(token).ok_or_else(|| INVALID_TOKEN.to_string())?;
    let invalid = |why: String| format!("[{INVALID_TOKEN}, {why}]");
    let deleting = |o: &Value| o["metadata"].get("deletionTimestamp").is_some();
    let ns = claims.namespace.as_str();
    let secret = store
        .get(&resource("secrets"), ns, &claims.secret)
        .filter(|s| !deleting(s))
        .ok_or_else(|| invalid("Token has been invalidated".into()))?;
    let copy = secret["data"]["token"]
        .as_str()
        .and_then(crate::base64::decode)
        .unwrap_or_default();
    if copy != token.as_bytes() {
        return Err(invalid("Token does not match server's copy".into()));
    }
    let account = store
        .get(&resource("serviceaccounts"), ns, &claims.account)
        .ok_or_else(|| {
            invalid(format!(
                "ServiceAccount {ns}/{} has been deleted",
                claims.account
            ))
        })?;
    if deleting(&account) {
        return Err(invalid(format!(
            "ServiceAccount {ns}/{} is marked for deletion",
            claims.account
        )));
    }
    let uid = account["metadata"]["uid"].as_str().unwrap_or_default();
    if uid != claims.uid {
        return Err(invalid(format!(
            "ServiceAccount UID ({uid}) does not match claim ({})",
            claims.uid
        )));
    }
    Ok(UserInfo {
        username: format!("system:serviceaccount:{ns}:{}", claims.account),
        uid: uid.to_string(),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
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
        Err(error) => json!({"user": {}, "error": error}),
        Ok(_) if !audiences.is_empty() && !audiences.iter().any(|a| a == API_AUDIENCE) => {
            json!({"user": {}, "error": format!(
                "[{INVALID_TOKEN}, token audiences {} is invalid for the target audiences {}]",
                go_quoted(&[API_AUDIENCE.to_string()]),
                go_quoted(&audiences)
            )})
        }
        Ok(user) => json!({
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

    fn claims(secret: &str, uid: &str) -> Claims {
        Claims {
            namespace: "app".into(),
            secret: secret.into(),
            account: "web".into(),
            uid: uid.into(),
        }
    }

    /// An account `web` (uid u-1) in `app` with the token Secret
    /// `web-token-abcde`; returns the store and the token.
    fn store() -> (Store, String) {
        let mut store = Store::new(100, 16);
        store.put(
            &resource("serviceaccounts"),
            "app",
            "web",
            json!({"metadata": {"name": "web", "namespace": "app", "uid": "u-1"}}),
        );
        let token = claims("web-token-abcde", "u-1").token("0f0f");
        store.put(
            &resource("secrets"),
            "app",
            "web-token-abcde",
            json!({"metadata": {"name": "web-token-abcde", "namespace": "app",
                    "annotations": {SERVICE_ACCOUNT_NAME: "web", SERVICE_ACCOUNT_UID: "u-1"}},
                   "type": TOKEN_SECRET_TYPE,
                   "data": {"token": crate::base64::encode(token.as_bytes())}}),
        );
        (store, token)
    }

    fn ask(store: &Store, spec: Value) -> Result<Value, ApiError> {
        review(store, json!({"spec": spec}).to_string().as_bytes())
    }

    #[test]
    fn a_token_authenticates_as_its_service_account() {
        let (s, token) = store();
        let user = authenticate(&s, &token).unwrap();
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
        for (bad, error) in [
            ("nope".to_string(), "invalid bearer token"),
            (String::new(), "invalid bearer token"),
            (
                claims("web-token-abcde", "u-1").token("1111"),
                "[invalid bearer token, Token does not match server's copy]",
            ),
            (
                claims("web-token-gone", "u-1").token("0f0f"),
                "[invalid bearer token, Token has been invalidated]",
            ),
        ] {
            assert_eq!(authenticate(&s, &bad), Err(error.to_string()));
        }
    }

    #[test]
    fn reviews_answer_as_the_real_server() {
        let (s, token) = store();
        let ok = ask(&s, json!({"token": token})).unwrap();
        assert_eq!(ok["status"]["authenticated"], true);
        assert_eq!(ok["status"]["audiences"], json!([API_AUDIENCE]));
        assert_eq!(ok["spec"], json!({"token": token}));
        assert_eq!(ok["metadata"], json!({"creationTimestamp": null}));
        let bad = ask(&s, json!({"token": "garbage"})).unwrap();
        assert_eq!(
            bad["status"],
            json!({"user": {}, "error": "invalid bearer token"})
        );
        let elsewhere = ask(&s, json!({"token": token, "audiences": ["x"]})).unwrap();
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
