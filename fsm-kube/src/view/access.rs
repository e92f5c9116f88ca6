//! Who may look at the web view when it is reached from beyond the pod:
//! [`KubernetesAccess`] lets in a request whose bearer token the API server
//! authenticates (a `TokenReview`) as someone it allows to `list` every
//! resource the view shows, in the view's namespace or, for a view of all
//! namespaces, cluster-wide (a `SubjectAccessReview` per resource): what
//! `kubectl get` of those objects would need.
//!
//! The answers: no bearer token, or one the API server does not
//! authenticate, 401 with `WWW-Authenticate: Bearer`; an identity not
//! allowed, 403 naming it and what it lacks; an API server that cannot
//! answer, 503 (never let in on a failure). A verdict is kept per token for
//! [`ALLOWED_TTL`] (let in) or [`REFUSED_TTL`] (refused), for at most
//! [`MAX_VERDICTS`] tokens, so a page's requests cost one review, not one
//! each.
//!
//! The operator's ServiceAccount needs `create` on
//! `authentication.k8s.io` `tokenreviews` and `authorization.k8s.io`
//! `subjectaccessreviews` (cluster-scoped: a ClusterRole,
//! [`crate::cli::rbac::view_access_rules`]).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};

use crate::records::Watched;

/// How long a token that was let in is let in without asking again.
pub const ALLOWED_TTL: Duration = Duration::from_secs(60);

/// How long a refused token is refused without asking again.
pub const REFUSED_TTL: Duration = Duration::from_secs(10);

/// How many tokens' verdicts are kept at most; past that, a new token is
/// reviewed for each request until old verdicts expire.
pub const MAX_VERDICTS: usize = 1024;

/// What a caller must be allowed: `list` on a resource.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Needed {
    group: String,
    plural: String,
    namespaced: bool,
}

/// The verdict on one token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Let in: the identity the API server named.
    Allowed {
        /// The authenticated user name.
        user: String,
    },
    /// Not a token the API server authenticates (401).
    Unauthenticated {
        /// The API server's reason, when it gave one.
        reason: String,
    },
    /// Authenticated, but not allowed to see what the view shows (403).
    Denied {
        /// The authenticated user name.
        user: String,
        /// What the identity may not do, e.g. `list databases.example.io
        /// in namespace shop`.
        lacks: String,
    },
}

/// The API server could not review a token.
#[derive(Debug, thiserror::Error)]
#[error("the API server could not review the token: {0}")]
pub struct ReviewFailed(#[from] kube::Error);

/// The access check of a view of `watched` in `namespace`, through the
/// operator's own client ([module docs](self)).
pub struct KubernetesAccess {
    client: Client,
    needed: Vec<Needed>,
    namespace: Option<String>,
    verdicts: Mutex<HashMap<String, (Instant, Verdict)>>,
}

impl std::fmt::Debug for KubernetesAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesAccess")
            .field("needed", &self.needed)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl KubernetesAccess {
    /// A check that a caller may `list` every resource of `watched` in
    /// `namespace` (`None`: in every namespace).
    #[must_use]
    pub fn new(client: Client, watched: &[Watched], namespace: Option<String>) -> Self {
        KubernetesAccess {
            client,
            needed: watched
                .iter()
                .map(|w| Needed {
                    group: w.resource.group.clone(),
                    plural: w.resource.plural.clone(),
                    namespaced: w.resource.namespaced,
                })
                .collect(),
            namespace,
            verdicts: Mutex::new(HashMap::new()),
        }
    }

    /// The verdict on `token`: kept from an earlier review while fresh,
    /// else asked of the API server.
    ///
    /// # Errors
    /// [`ReviewFailed`] when the API server does not answer a review.
    pub async fn check(&self, token: &str) -> Result<Verdict, ReviewFailed> {
        if let Some(verdict) = self.kept(token) {
            return Ok(verdict);
        }
        let verdict = self.review(token).await?;
        self.keep(token, &verdict);
        Ok(verdict)
    }

    fn kept(&self, token: &str) -> Option<Verdict> {
        let verdicts = self.verdicts.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, verdict) = verdicts.get(token)?;
        (at.elapsed() < ttl(verdict)).then(|| verdict.clone())
    }

    fn keep(&self, token: &str, verdict: &Verdict) {
        let mut verdicts = self.verdicts.lock().unwrap_or_else(PoisonError::into_inner);
        if verdicts.len() >= MAX_VERDICTS {
            verdicts.retain(|_, (at, verdict)| at.elapsed() < ttl(verdict));
        }
        if verdicts.len() < MAX_VERDICTS || verdicts.contains_key(token) {
            verdicts.insert(token.to_owned(), (Instant::now(), verdict.clone()));
        }
    }

    async fn review(&self, token: &str) -> Result<Verdict, ReviewFailed> {
        let reviews: Api<TokenReview> = Api::all(self.client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let reviewed = reviews.create(&PostParams::default(), &review).await?;
        let status = reviewed.status.unwrap_or_default();
        let user = status.user.unwrap_or_default();
        let Some(name) = user
            .username
            .clone()
            .filter(|_| status.authenticated == Some(true))
        else {
            return Ok(Verdict::Unauthenticated {
                reason: status.error.unwrap_or_default(),
            });
        };
        for needed in &self.needed {
            if !self.allowed(&user, needed).await? {
                let scope = match (&self.namespace, needed.namespaced) {
                    (Some(ns), true) => format!("in namespace {ns}"),
                    (None, true) => "in every namespace".to_owned(),
                    (_, false) => "(cluster-scoped)".to_owned(),
                };
                let resource = if needed.group.is_empty() {
                    needed.plural.clone()
                } else {
                    format!("{}.{}", needed.plural, needed.group)
                };
                return Ok(Verdict::Denied {
                    user: name,
                    lacks: format!("list {resource} {scope}"),
                });
            }
        }
        Ok(Verdict::Allowed { user: name })
    }

    /// Whether `user` may `list` `needed` where the view looks.
    async fn allowed(&self, user: &UserInfo, needed: &Needed) -> Result<bool, ReviewFailed> {
        let reviews: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username.clone(),
                groups: user.groups.clone(),
                uid: user.uid.clone(),
                extra: user.extra.clone(),
                resource_attributes: Some(ResourceAttributes {
                    namespace: self.namespace.clone().filter(|_| needed.namespaced),
                    verb: Some("list".to_owned()),
                    group: Some(needed.group.clone()),
                    resource: Some(needed.plural.clone()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let reviewed = reviews.create(&PostParams::default(), &review).await?;
        Ok(reviewed.status.is_some_and(|s| s.allowed))
    }
}

fn ttl(verdict: &Verdict) -> Duration {
    match verdict {
        Verdict::Allowed { .. } => ALLOWED_TTL,
        Verdict::Unauthenticated { .. } | Verdict::Denied { .. } => REFUSED_TTL,
    }
}

/// The token of an `Authorization: Bearer TOKEN` header (the scheme is
/// case-insensitive); `None` without one, or with an empty token.
///
/// ```
/// use axum::http::{HeaderMap, HeaderValue, header};
/// use fsm_kube::view::access::bearer_token;
///
/// let mut headers = HeaderMap::new();
/// headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer abc.def"));
/// assert_eq!(bearer_token(&headers), Some("abc.def"));
/// headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic YTpi"));
/// assert_eq!(bearer_token(&headers), None);
/// ```
#[must_use]
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_token_is_read_from_its_header_only() {
        let with = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            headers
        };
        assert_eq!(bearer_token(&with("bearer t0k")), Some("t0k"));
        assert_eq!(bearer_token(&with("Bearer  padded ")), Some("padded"));
        assert_eq!(bearer_token(&with("Bearer ")), None);
        assert_eq!(bearer_token(&with("Bearertoken")), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn refusals_are_kept_for_less_time_than_admissions() {
        let allowed = Verdict::Allowed { user: "a".into() };
        let denied = Verdict::Denied {
            user: "a".into(),
            lacks: "list x".into(),
        };
        assert_eq!(ttl(&allowed), ALLOWED_TTL);
        assert_eq!(ttl(&denied), REFUSED_TTL);
        assert!(REFUSED_TTL < ALLOWED_TTL);
    }
}
