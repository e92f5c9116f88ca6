//! The ServiceAccount token controller of kube-controller-manager 1.20
//! (`serviceaccount-token`): every ServiceAccount gets a token Secret.
//!
//! - A ServiceAccount written (created or updated) that references no
//!   token Secret of its own gets one: a Secret `<sa>-token-<5 random
//!   characters>` of type `kubernetes.io/service-account-token`, annotated
//!   with the account's name and uid, holding `token` (its claims and a
//!   random part, see [`crate::authn`]), `namespace` and `ca.crt` (empty: the
//!   server has no CA); then `{name: <secret>}` is appended to the
//!   account's `secrets`.
//! - A ServiceAccount removed takes its token Secrets with it.
//! - A token Secret removed is taken off its account's `secrets`, and the
//!   account, left without a token, gets a new one.
//!
//! Both writes are the controller's (field manager
//! `kube-controller-manager`), made within the request that stored or
//! removed the account, so a watch sees the account `ADDED`, its Secret
//! `ADDED`, then the account `MODIFIED`, in that order, as on a real
//! cluster (where the controller runs a moment later).
//!
//! # Caveats
//! A token Secret created by a client (the way to get a token once the
//! controller stopped making them, 1.24) is not filled in, and a token
//! Secret naming an account that does not exist is not deleted, as the
//! real controller does. Each namespace's `default` account is made by
//! [`super::service_accounts`].

use ring::rand::{SecureRandom, SystemRandom};
use serde_json::{Value, json};

use super::meta::str_at;
use super::{Cluster, DeleteOptions, Ownership, Part, namespaces, present};
use crate::authn::{Claims, SERVICE_ACCOUNT_NAME, SERVICE_ACCOUNT_UID, TOKEN_SECRET_TYPE};
use crate::resources::{GroupResource, ResourceDef};

/// The field manager of the controller's writes.
const MANAGER: &str = "kube-controller-manager";

fn core(resource: &str) -> GroupResource {
    GroupResource {
        group: String::new(),
        resource: resource.into(),
    }
}

/// Whether `def` is the core ServiceAccount resource.
pub(super) fn is_service_account(def: &ResourceDef) -> bool {
    def.group_resource() == core("serviceaccounts")
}

/// Whether `secret` holds a token of `account` (its name annotation names
/// it and its uid annotation, if any, is the account's).
fn is_token_of(secret: &Value, account: &Value) -> bool {
    let annotations = &secret["metadata"]["annotations"];
    let uid = annotations[SERVICE_ACCOUNT_UID]
        .as_str()
        .unwrap_or_default();
    secret["type"] == TOKEN_SECRET_TYPE
        && annotations[SERVICE_ACCOUNT_NAME].as_str() == Some(str_at(account, "name"))
        && (uid.is_empty() || uid == str_at(account, "uid"))
}

/// A fresh, unguessable token for `claims`: its random part is 32 bytes
/// from the system's generator. `None` if the generator fails.
fn new_token(claims: &Claims) -> Option<String> {
    let mut bytes = [0_u8; 32];
    SystemRandom::new().fill(&mut bytes).ok()?;
    let random: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Some(claims.token(&random))
}

impl Cluster {
    /// The token Secrets of `account` in its namespace.
    fn tokens_of(&self, account: &Value) -> Vec<String> {
        self.store
            .list(&core("secrets"), Some(str_at(account, "namespace")))
            .into_iter()
            .filter(|s| is_token_of(s, account))
            .map(|s| str_at(&s, "name").to_string())
            .collect()
    }

    fn terminating(&self, ns: &str) -> bool {
        self.store
            .get(&namespaces(), "", ns)
            .is_none_or(|n| n["metadata"].get("deletionTimestamp").is_some())
    }

    /// After `account` (a ServiceAccount) was stored: gives it a token
    /// Secret unless it references one of its own (the real
    /// `ensureReferencedToken`). Failures are logged, as the real
    /// controller's are.
    pub(super) fn ensure_token(&mut self, account: &Value, now: jiff::Timestamp) {
        let (ns, name) = (str_at(account, "namespace"), str_at(account, "name"));
        if account["metadata"].get("deletionTimestamp").is_some() || self.terminating(ns) {
            return;
        }
        let referenced: Vec<&str> = account["secrets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str())
            .collect();
        let tokens = self.tokens_of(account);
        if tokens.iter().any(|t| referenced.contains(&t.as_str())) {
            return;
        }
        let (Some(secrets), Some(accounts)) = (
            self.registry.preferred(&core("secrets")),
            self.registry.preferred(&core("serviceaccounts")),
        ) else {
            return;
        };
        let secret_name = self.generate_name(&secrets, ns, &format!("{name}-token-"));
        let claims = Claims {
            namespace: ns.into(),
            secret: secret_name.clone(),
            account: name.into(),
            uid: str_at(account, "uid").into(),
        };
        let Some(token) = new_token(&claims) else {
            tracing::error!(
                ns,
                name,
                "no random token: the account gets no token Secret"
            );
            return;
        };
        let secret = json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": secret_name,
                "namespace": ns,
                "annotations": {
                    SERVICE_ACCOUNT_NAME: name,
                    SERVICE_ACCOUNT_UID: str_at(account, "uid"),
                },
            },
            "type": TOKEN_SECRET_TYPE,
            "data": {
                "token": crate::base64::encode(token.as_bytes()),
                "namespace": crate::base64::encode(ns.as_bytes()),
                "ca.crt": "",
            },
        });
        let owner = Ownership::Update(MANAGER);
        if let Err(e) = self.create_as(&secrets, ns, secret, false, now, &owner) {
            tracing::warn!(ns, name, error = %e, "creating a token Secret");
            return;
        }
        let Some(live) = self.store.get(&core("serviceaccounts"), ns, name) else {
            return;
        };
        let mut updated = present(&accounts, &live);
        let reference = json!({"name": secret_name});
        match updated.get_mut("secrets").and_then(Value::as_array_mut) {
            Some(list) => list.push(reference),
            None => updated["secrets"] = json!([reference]),
        }
        let (ns, name) = (ns.to_string(), name.to_string());
        if let Err(e) = self.update_as(
            &accounts,
            &ns,
            &name,
            updated,
            Part::Main,
            false,
            now,
            &owner,
        ) {
            // As the real controller: the Secret goes if the reference fails.
            tracing::warn!(ns, name, error = %e, "referencing a token Secret");
            let _ = self.delete(&secrets, &ns, &secret_name, &DeleteOptions::default(), now);
        }
    }

    /// After `gone` was removed from the store: a ServiceAccount's token
    /// Secrets are deleted; a token Secret is taken off its account, which
    /// then gets a new one.
    pub(super) fn tokens_after_removal(
        &mut self,
        def: &ResourceDef,
        gone: &Value,
        now: jiff::Timestamp,
    ) {
        let ns = str_at(gone, "namespace").to_string();
        if is_service_account(def) {
            let Some(secrets) = self.registry.preferred(&core("secrets")) else {
                return;
            };
            for token in self.tokens_of(gone) {
                if let Err(e) = self.delete(&secrets, &ns, &token, &DeleteOptions::default(), now) {
                    tracing::warn!(ns, token, error = %e, "deleting a token Secret");
                }
            }
            return;
        }
        if def.group_resource() != core("secrets") || gone["type"] != TOKEN_SECRET_TYPE {
            return;
        }
        let account_name = gone["metadata"]["annotations"][SERVICE_ACCOUNT_NAME]
            .as_str()
            .unwrap_or_default();
        let Some(account) = self.store.get(&core("serviceaccounts"), &ns, account_name) else {
            return;
        };
        let Some(accounts) = self.registry.preferred(&core("serviceaccounts")) else {
            return;
        };
        if !is_token_of(gone, &account) || self.terminating(&ns) {
            return;
        }
        let secret_name = str_at(gone, "name");
        let mut updated = present(&accounts, &account);
        let Some(list) = updated.get_mut("secrets").and_then(Value::as_array_mut) else {
            return;
        };
        let before = list.len();
        list.retain(|r| r["name"].as_str() != Some(secret_name));
        if list.len() == before {
            return;
        }
        if list.is_empty()
            && let Some(o) = updated.as_object_mut()
        {
            o.remove("secrets");
        }
        // The update brings the account back to `ensure_token`.
        let owner = Ownership::Update(MANAGER);
        let name = account_name.to_string();
        if let Err(e) = self.update_as(
            &accounts,
            &ns,
            &name,
            updated,
            Part::Main,
            false,
            now,
            &owner,
        ) {
            tracing::warn!(ns, name, error = %e, "removing a token Secret's reference");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn def(c: &Cluster, p: &str) -> Arc<ResourceDef> {
        c.registry.get("", "v1", p).unwrap()
    }

    fn account(c: &mut Cluster, name: &str) -> Value {
        let sa = def(c, "serviceaccounts");
        let body =
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}});
        c.create(&sa, "default", body, false, now()).unwrap()
    }

    #[test]
    fn a_new_account_gets_a_token_secret() {
        let mut c = Cluster::new(100, 16, 7);
        let created = account(&mut c, "web");
        assert!(
            created.get("secrets").is_none(),
            "answered before the controller"
        );
        let rv: u64 = created["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let live = c
            .get(&def(&c, "serviceaccounts"), "default", "web")
            .unwrap();
        let secret_name = live["secrets"][0]["name"].as_str().unwrap().to_string();
        assert_eq!(live["secrets"].as_array().unwrap().len(), 1);
        let suffix = secret_name.strip_prefix("web-token-").unwrap();
        assert_eq!(suffix.len(), 5);
        assert!(
            suffix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
        let secret = c.get(&def(&c, "secrets"), "default", &secret_name).unwrap();
        assert_eq!(secret["type"], TOKEN_SECRET_TYPE);
        assert_eq!(
            secret["metadata"]["annotations"],
            json!({SERVICE_ACCOUNT_NAME: "web", SERVICE_ACCOUNT_UID: created["metadata"]["uid"]})
        );
        assert_eq!(secret["data"]["namespace"], "ZGVmYXVsdA==");
        assert_eq!(secret["data"]["ca.crt"], "");
        // The Secret, then the account's reference to it.
        assert_eq!(secret["metadata"]["resourceVersion"], (rv + 1).to_string());
        assert_eq!(live["metadata"]["resourceVersion"], (rv + 2).to_string());
        let token = secret["data"]["token"].as_str().unwrap();
        let other = account(&mut c, "other");
        let other_live = c
            .get(&def(&c, "serviceaccounts"), "default", "other")
            .unwrap();
        let other_secret = c
            .get(
                &def(&c, "secrets"),
                "default",
                other_live["secrets"][0]["name"].as_str().unwrap(),
            )
            .unwrap();
        assert_ne!(other_secret["data"]["token"], token, "tokens are unique");
        assert_ne!(other["metadata"]["uid"], created["metadata"]["uid"]);
        // An update that keeps the reference makes no other token.
        let revision = c.store.revision();
        let mut labelled = live.clone();
        labelled["metadata"]["labels"] = json!({"a": "b"});
        c.update(
            &def(&c, "serviceaccounts"),
            "default",
            "web",
            labelled,
            Part::Main,
            false,
            now(),
        )
        .unwrap();
        assert_eq!(c.store.revision(), revision + 1);
    }

    #[test]
    fn tokens_go_with_their_account_and_come_back_when_deleted() {
        let mut c = Cluster::new(100, 16, 7);
        account(&mut c, "web");
        let (sa, secrets) = (def(&c, "serviceaccounts"), def(&c, "secrets"));
        let first = c.get(&sa, "default", "web").unwrap()["secrets"][0]["name"]
            .as_str()
            .unwrap()
            .to_string();
        c.delete(
            &secrets,
            "default",
            &first,
            &DeleteOptions::default(),
            now(),
        )
        .unwrap();
        let live = c.get(&sa, "default", "web").unwrap();
        let refs = live["secrets"].as_array().unwrap();
        assert_eq!(refs.len(), 1);
        let second = refs[0]["name"].as_str().unwrap().to_string();
        assert_ne!(second, first, "a new token replaces the deleted one");
        assert!(c.get(&secrets, "default", &second).is_ok());
        c.delete(&sa, "default", "web", &DeleteOptions::default(), now())
            .unwrap();
        assert_eq!(
            c.get(&secrets, "default", &second).unwrap_err().reason(),
            "NotFound",
            "the account's tokens go with it"
        );
    }
}
