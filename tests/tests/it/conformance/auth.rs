//! Authentication and authorization as a web view uses them: the token
//! Secret a ServiceAccount gets (1.20's token controller), `TokenReview`
//! of its token and of garbage, and `SubjectAccessReview` evaluated from
//! the RBAC objects the scenario stores.
//!
//! The real server's token controller and RBAC caches are asynchronous:
//! the scenarios wait for the token Secret and for a binding's first
//! allowance before they observe. Their names start with `auth_` so that
//! `-- conformance::auth` runs them alone.

use fsm_testkit::internals::base64_decode;
use integration_tests::scene::eventually;
use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

/// A `TokenReview` of `token`.
async fn review_token(s: &Scene, token: &str) -> Fallible<integration_tests::Reply> {
    s.post(
        TOKEN_REVIEWS,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
               "spec": {"token": token}}),
    )
    .await
}

/// A reply without `spec.token` (a token differs between servers).
fn without_token(reply: &integration_tests::Reply) -> Value {
    let mut body = reply.body.clone();
    if let Some(spec) = body.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("token");
    }
    json!({"code": reply.code, "body": body})
}

/// The token Secret's name with its random suffix hidden, after checking
/// it is `<account>-token-` and five lowercase alphanumerics.
fn token_secret_name(account: &str, name: &str) -> Fallible<String> {
    let suffix = name
        .strip_prefix(&format!("{account}-token-"))
        .ok_or_else(|| format!("token Secret {name} is not named after {account}"))?;
    assert_eq!(suffix.len(), 5, "{name}");
    assert!(
        suffix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
        "{name}"
    );
    Ok(format!("{account}-token-<suffix>"))
}

/// Waits until the ServiceAccount at `path` references a token Secret and
/// returns the account.
async fn with_token(s: &Scene, path: &str) -> Fallible<Value> {
    eventually("the account's token Secret", 30, async || {
        let account = s.get(path).await?.expect(200)?.body;
        let referenced = account["secrets"].as_array().is_some_and(|a| !a.is_empty());
        Ok(referenced.then_some(account))
    })
    .await
}

/// A new ServiceAccount gets a token Secret (type, annotations, data), its
/// token reviews as the account, garbage reviews as nobody, and once the
/// account is deleted its Secret goes and the token no longer reviews.
pub async fn auth_service_account_token_and_token_review(s: &mut Scene) -> Fallible {
    let accounts = s.core("serviceaccounts");
    let created = s
        .post(
            &accounts,
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "web"}}),
        )
        .await?
        .expect(201)?;
    s.record("serviceaccount created", &created);
    let uid = created.body["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let path = format!("{accounts}/web");
    let mut account = with_token(s, &path).await?;
    let references = account["secrets"].as_array().cloned().unwrap_or_default();
    assert_eq!(references.len(), 1, "one token Secret: {account}");
    let secret_name = references[0]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    account["secrets"] = json!([{"name": token_secret_name("web", &secret_name)?}]);
    s.record("serviceaccount with its token Secret", &account);

    let secret = s
        .get(&format!("{}/{secret_name}", s.core("secrets")))
        .await?
        .expect(200)?
        .body;
    assert_eq!(secret["type"], "kubernetes.io/service-account-token");
    let annotations = &secret["metadata"]["annotations"];
    assert_eq!(annotations["kubernetes.io/service-account.name"], "web");
    assert_eq!(
        annotations["kubernetes.io/service-account.uid"],
        uid.as_str()
    );
    let data = secret["data"].as_object().cloned().unwrap_or_default();
    let keys: Vec<&String> = data.keys().collect();
    assert_eq!(keys, ["ca.crt", "namespace", "token"]);
    let decoded = |key: &str| {
        data.get(key)
            .and_then(Value::as_str)
            .and_then(base64_decode)
            .and_then(|b| String::from_utf8(b).ok())
            .unwrap_or_default()
    };
    assert_eq!(decoded("namespace"), s.ns);
    let token = decoded("token");
    assert!(token.len() >= 32, "an unguessable token: {token}");
    s.record(
        "token Secret",
        json!({
            "name": token_secret_name("web", &secret_name)?,
            "type": secret["type"],
            "annotations": {
                "kubernetes.io/service-account.name": annotations["kubernetes.io/service-account.name"],
                "kubernetes.io/service-account.uid is the account's": annotations["kubernetes.io/service-account.uid"] == uid.as_str(),
            },
            "data keys": keys,
            "namespace": decoded("namespace"),
        }),
    );

    let reviewed = review_token(s, &token).await?.expect(201)?;
    let status = &reviewed.body["status"];
    assert_eq!(status["authenticated"], true, "{}", reviewed.body);
    assert_eq!(
        status["user"]["username"],
        format!("system:serviceaccount:{}:web", s.ns)
    );
    assert_eq!(status["user"]["uid"], uid.as_str());
    assert_eq!(
        status["user"]["groups"],
        json!([
            "system:serviceaccounts",
            format!("system:serviceaccounts:{}", s.ns),
            "system:authenticated"
        ])
    );
    assert_eq!(reviewed.body["spec"]["token"], token.as_str(), "echoed");
    s.record("review of the account's token", without_token(&reviewed));

    let garbage = review_token(s, "garbage").await?.expect(201)?;
    assert!(garbage.body["status"].get("authenticated").is_none());
    assert_eq!(garbage.body["status"]["user"], json!({}));
    s.record("review of garbage", &garbage);
    let elsewhere = s
        .post(
            TOKEN_REVIEWS,
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                   "spec": {"token": token, "audiences": ["elsewhere"]}}),
        )
        .await?
        .expect(201)?;
    assert!(elsewhere.body["status"].get("authenticated").is_none());
    s.record("review for another audience", without_token(&elsewhere));

    // A review is no object: nothing to read back, a token is required.
    let empty = s
        .post(
            TOKEN_REVIEWS,
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}}),
        )
        .await?
        .expect(400)?;
    s.record("review without a token", &empty);
    let listed = s.get(TOKEN_REVIEWS).await?.expect(405)?;
    s.record(
        "list of tokenreviews",
        (listed.code, listed.reason(), &listed.body["message"]),
    );
    let named = s.get(&format!("{TOKEN_REVIEWS}/x")).await?.expect(404)?;
    s.record("get of a tokenreview", (named.code, named.reason()));
    let wrong_kind = s
        .post(
            TOKEN_REVIEWS,
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "ConfigMap",
                   "spec": {"token": "x"}}),
        )
        .await?
        .expect(400)?;
    s.record(
        "review of another kind",
        (wrong_kind.code, wrong_kind.reason()),
    );

    // The account goes, its Secret with it, and its token is revoked.
    s.delete(&path).await?.expect(200)?;
    let secret_path = format!("{}/{secret_name}", s.core("secrets"));
    eventually("the token Secret's deletion", 30, async || {
        Ok((s.get(&secret_path).await?.code == 404).then_some(()))
    })
    .await?;
    // The real server caches a token's success for 10 s (its token
    // authenticator cache): the revocation shows within that.
    let revoked = eventually("the token's revocation", 30, async || {
        let reply = review_token(s, &token).await?.expect(201)?;
        Ok(reply.body["status"]
            .get("authenticated")
            .is_none()
            .then_some(reply))
    })
    .await?;
    s.record(
        "review of a deleted account's token",
        without_token(&revoked),
    );
    Ok(())
}

/// A `SubjectAccessReview` of `spec`, expecting 201.
async fn access_review(s: &Scene, spec: Value) -> Fallible<Value> {
    Ok(s.post(
        ACCESS_REVIEWS,
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": spec}),
    )
    .await?
    .expect(201)?
    .body)
}

/// `resourceAttributes` of a request.
fn on(namespace: &str, verb: &str, group: &str, resource: &str, name: &str) -> Value {
    let mut attributes = json!({"verb": verb, "resource": resource});
    for (key, value) in [("namespace", namespace), ("group", group), ("name", name)] {
        if !value.is_empty() {
            attributes[key] = json!(value);
        }
    }
    attributes
}

/// The status of a review, once `allowed` is what is expected (the real
/// server's RBAC reads caches that follow writes a moment later; a denial
/// is asked once).
async fn decided(s: &Scene, spec: Value, allowed: bool) -> Fallible<Value> {
    if !allowed {
        return Ok(access_review(s, spec).await?["status"].clone());
    }
    eventually("the binding to take effect", 20, async || {
        let status = access_review(s, spec.clone()).await?["status"].clone();
        Ok((status["allowed"] == true).then_some(status))
    })
    .await
}

/// SubjectAccessReviews of a ServiceAccount bound by a RoleBinding to a
/// Role (its namespace only, its verbs, its resourceNames) and to a
/// ClusterRole, of a user bound by a ClusterRoleBinding (everywhere, and
/// non-resource URLs), of system:masters (everything); the answers'
/// reasons; and what the real server refuses.
pub async fn auth_subject_access_review_evaluates_rbac(s: &mut Scene) -> Fallible {
    let ns = s.ns.clone();
    let cluster_role = format!("conf:{}:deployments", s.token);
    let alice = format!("alice-{}", s.token);
    let objects = [
        (
            format!("{RBAC}/namespaces/{ns}/roles"),
            json!({"kind": "Role", "metadata": {"name": "cm-reader"},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
                             {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
                              "resourceNames": ["web-config"]}]}),
        ),
        (
            format!("{RBAC}/clusterroles"),
            json!({"kind": "ClusterRole", "metadata": {"name": cluster_role},
                   "rules": [{"apiGroups": ["apps"], "resources": ["deployments", "*/scale"],
                              "verbs": ["list", "watch"]},
                             {"nonResourceURLs": [format!("/conf-{}/*", s.token)], "verbs": ["get"]}]}),
        ),
        (
            format!("{RBAC}/namespaces/{ns}/rolebindings"),
            json!({"kind": "RoleBinding", "metadata": {"name": "web-reads"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
                   "subjects": [{"kind": "ServiceAccount", "name": "web"}]}),
        ),
        (
            format!("{RBAC}/namespaces/{ns}/rolebindings"),
            json!({"kind": "RoleBinding", "metadata": {"name": "web-deploys"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": cluster_role},
                   "subjects": [{"kind": "ServiceAccount", "name": "web", "namespace": ns}]}),
        ),
        (
            format!("{RBAC}/clusterrolebindings"),
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": cluster_role},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": cluster_role},
                   "subjects": [{"kind": "User", "name": alice}]}),
        ),
    ];
    for (path, mut object) in objects {
        object["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
        s.post(&path, object).await?.expect(201)?;
    }
    let web = json!({
        "user": format!("system:serviceaccount:{ns}:web"),
        "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}"),
                   "system:authenticated"],
    });
    let as_web = |attributes: Value| {
        let mut spec = web.clone();
        spec["resourceAttributes"] = attributes;
        spec
    };
    let cases = [
        (
            "web gets configmaps in its namespace",
            as_web(on(&ns, "get", "", "configmaps", "")),
            true,
        ),
        (
            "web gets configmaps in another namespace",
            as_web(on("default", "get", "", "configmaps", "")),
            false,
        ),
        (
            "web deletes configmaps",
            as_web(on(&ns, "delete", "", "configmaps", "x")),
            false,
        ),
        (
            "web gets the named secret",
            as_web(on(&ns, "get", "", "secrets", "web-config")),
            true,
        ),
        (
            "web gets another secret",
            as_web(on(&ns, "get", "", "secrets", "other")),
            false,
        ),
        (
            "web gets secrets without a name",
            as_web(on(&ns, "get", "", "secrets", "")),
            false,
        ),
        (
            "web lists deployments (RoleBinding to a ClusterRole)",
            as_web(on(&ns, "list", "apps", "deployments", "")),
            true,
        ),
        (
            "web lists deployments in another namespace",
            as_web(on("default", "list", "apps", "deployments", "")),
            false,
        ),
        (
            "web lists deployments in the core group",
            as_web(on(&ns, "list", "", "deployments", "")),
            false,
        ),
        (
            "alice lists deployments anywhere (ClusterRoleBinding)",
            json!({"user": alice, "resourceAttributes": on("default", "list", "apps", "deployments", "")}),
            true,
        ),
        (
            "alice lists deployments across namespaces",
            json!({"user": alice, "resourceAttributes": on("", "list", "apps", "deployments", "")}),
            true,
        ),
        (
            "alice watches a */scale subresource",
            json!({"user": alice, "resourceAttributes": {"namespace": ns, "verb": "watch",
                   "group": "apps", "resource": "statefulsets", "subresource": "scale"}}),
            true,
        ),
        (
            "alice gets a non-resource URL under the prefix",
            json!({"user": alice, "nonResourceAttributes": {"path": format!("/conf-{}/a/b", s.token), "verb": "get"}}),
            true,
        ),
        (
            "web gets the non-resource URL (RoleBindings grant none)",
            {
                let mut spec = web.clone();
                spec["nonResourceAttributes"] =
                    json!({"path": format!("/conf-{}/a", s.token), "verb": "get"});
                spec
            },
            false,
        ),
        (
            "a user in system:masters deletes nodes",
            json!({"user": "root", "groups": ["system:masters"],
                   "resourceAttributes": on("", "delete", "", "nodes", "n1")}),
            true,
        ),
        (
            "nobody in particular",
            json!({"user": format!("nobody-{}", s.token),
                   "resourceAttributes": on(&ns, "get", "", "configmaps", "")}),
            false,
        ),
    ];
    for (label, spec, allowed) in cases {
        let status = decided(s, spec, allowed).await?;
        assert_eq!(status["allowed"], allowed, "{label}: {status}");
        if !allowed {
            assert!(status.get("reason").is_none(), "{label}: {status}");
        }
        s.record(label, &status);
    }
    let whole = access_review(s, as_web(on(&ns, "get", "", "configmaps", "cm"))).await?;
    s.record("a whole answer", &whole);

    // What the real server refuses.
    for (label, spec) in [
        ("neither attributes", json!({"user": "x"})),
        (
            "both attributes",
            json!({"user": "x", "resourceAttributes": {"verb": "get"},
                   "nonResourceAttributes": {"path": "/x", "verb": "get"}}),
        ),
        (
            "no user and no group",
            json!({"resourceAttributes": {"verb": "get"}}),
        ),
    ] {
        let refused = s
            .post(
                ACCESS_REVIEWS,
                json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                       "spec": spec}),
            )
            .await?
            .expect(422)?;
        s.record(label, &refused);
    }
    let listed = s.get(ACCESS_REVIEWS).await?.expect(405)?;
    s.record(
        "list of subjectaccessreviews",
        (listed.code, listed.reason(), &listed.body["message"]),
    );
    Ok(())
}

/// LocalSubjectAccessReviews: a review posted in a namespace, about that
/// namespace only (a Role there grants, another namespace is refused),
/// its validation, and that it is served in namespaces only.
pub async fn auth_local_subject_access_review(s: &mut Scene) -> Fallible {
    let ns = s.ns.clone();
    let path = format!("/apis/authorization.k8s.io/v1/namespaces/{ns}/localsubjectaccessreviews");
    let reader = format!("reader-{}", s.token);
    s.post(
        &format!("{RBAC}/namespaces/{ns}/roles"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "cm-reader"},
               "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
    )
    .await?
    .expect(201)?;
    s.post(
        &format!("{RBAC}/namespaces/{ns}/rolebindings"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "reader"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
               "subjects": [{"kind": "User", "name": reader}]}),
    )
    .await?
    .expect(201)?;
    let review = |metadata: Value, spec: Value| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
               "metadata": metadata, "spec": spec})
    };
    let asks = |verb: &str| json!({"user": reader, "resourceAttributes": on(&ns, verb, "", "configmaps", "")});
    // The binding takes effect a moment later on the real server.
    let allowed = eventually("the binding to take effect", 20, async || {
        let answer = s
            .post(&path, review(json!({"namespace": ns}), asks("get")))
            .await?
            .expect(201)?;
        Ok((answer.body["status"]["allowed"] == true).then_some(answer))
    })
    .await?;
    s.record("get configmaps where the Role is", &allowed);
    let denied = s
        .post(&path, review(json!({"namespace": ns}), asks("delete")))
        .await?
        .expect(201)?;
    assert_eq!(denied.body["status"]["allowed"], false);
    s.record("delete configmaps", &denied.body["status"]);

    let refusals = [
        (
            "no namespace anywhere",
            json!({}),
            json!({"user": reader, "resourceAttributes": on("", "get", "", "configmaps", "")}),
            400,
        ),
        (
            "a namespace in the attributes only",
            json!({}),
            asks("get"),
            422,
        ),
        (
            "attributes without a namespace",
            json!({"namespace": ns}),
            json!({"user": reader, "resourceAttributes": on("", "get", "", "configmaps", "")}),
            422,
        ),
        (
            "attributes of another namespace",
            json!({"namespace": ns}),
            json!({"user": reader, "resourceAttributes": on("default", "get", "", "configmaps", "")}),
            422,
        ),
        (
            "another namespace throughout",
            json!({"namespace": "default"}),
            json!({"user": reader, "resourceAttributes": on("default", "get", "", "configmaps", "")}),
            400,
        ),
        (
            "a non-resource URL",
            json!({"namespace": ns}),
            json!({"user": reader, "nonResourceAttributes": {"path": "/x", "verb": "get"}}),
            422,
        ),
        (
            "no user and no group",
            json!({"namespace": ns}),
            json!({"resourceAttributes": on(&ns, "get", "", "configmaps", "")}),
            422,
        ),
    ];
    for (label, metadata, spec, code) in refusals {
        let refused = s.post(&path, review(metadata, spec)).await?.expect(code)?;
        s.record(label, &refused);
    }
    let cluster_wide = s
        .post(
            "/apis/authorization.k8s.io/v1/localsubjectaccessreviews",
            review(json!({}), asks("get")),
        )
        .await?
        .expect(404)?;
    s.record("posted outside a namespace", &cluster_wide);
    let list = s.get("/apis/authorization.k8s.io/v1").await?.expect(200)?;
    let entry = list.body["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == "localsubjectaccessreviews")
        .cloned()
        .ok_or("localsubjectaccessreviews is not in discovery")?;
    assert_eq!(entry["namespaced"], true);
    s.record("discovery", &entry);
    Ok(())
}

/// Discovery lists the two review resources, create-only and
/// cluster-scoped.
pub async fn auth_review_resources_in_discovery(s: &mut Scene) -> Fallible {
    for (group, resource) in [
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
    ] {
        let list = s.get(&format!("/apis/{group}/v1")).await?.expect(200)?;
        let entry = list.body["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["name"] == resource)
            .cloned()
            .ok_or_else(|| format!("{resource} is not in /apis/{group}/v1"))?;
        assert_eq!(entry["verbs"], json!(["create"]));
        assert_eq!(entry["namespaced"], false);
        s.record(format!("{group}/v1 {resource}"), &entry);
        let doc = s.get(&format!("/apis/{group}")).await?.expect(200)?;
        s.record(
            format!("/apis/{group} preferred version"),
            &doc.body["preferredVersion"],
        );
    }
    Ok(())
}
