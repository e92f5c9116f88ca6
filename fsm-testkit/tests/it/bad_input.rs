//! Bad requests are answered with the real server's `Status`, and nothing
//! is stored.

use crate::common;

use common::status;
use fsm_testkit::ApiServer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::core::Status;
use serde_json::{Value, json};

/// Sends a raw request and returns the API error's Status.
async fn send(server: &ApiServer, method: &str, path: &str, ct: &str, body: &str) -> Box<Status> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", ct)
        .body(body.as_bytes().to_vec())
        .unwrap();
    status(server.client().request::<Value>(req).await.unwrap_err())
}

async fn configmaps(server: &ApiServer) -> usize {
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.list(&ListParams::default()).await.unwrap().items.len()
}

const CM_PATH: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn malformed_json_is_bad_request() {
    let server = ApiServer::new();
    let before = server.revision();
    let s = send(
        &server,
        "POST",
        CM_PATH,
        "application/json",
        r#"{"kind": "ConfigMap", "#,
    )
    .await;
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
    assert!(s.message.contains("json parse error"), "{}", s.message);
    assert_eq!(server.revision(), before, "nothing was written");
    assert_eq!(configmaps(&server).await, 0);
}

#[tokio::test]
async fn wrong_kind_or_version_for_the_path_is_bad_request() {
    let server = ApiServer::new();
    let before = server.revision();
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
    let s = send(
        &server,
        "POST",
        CM_PATH,
        "application/json",
        &secret.to_string(),
    )
    .await;
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
    assert!(
        s.message.contains("Secret") && s.message.contains("ConfigMap"),
        "{}",
        s.message
    );

    let wrong_group =
        json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "s"}});
    let s = send(
        &server,
        "POST",
        CM_PATH,
        "application/json",
        &wrong_group.to_string(),
    )
    .await;
    assert_eq!(s.code, 400);
    assert!(s.message.contains("apps/v1"), "{}", s.message);

    assert_eq!(server.revision(), before);
    assert_eq!(configmaps(&server).await, 0);

    // A built-in kind's body may leave out apiVersion and kind: the URL
    // says them, as on the real server.
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let req = http::Request::builder()
        .method("POST")
        .uri(CM_PATH)
        .header("content-type", "application/json")
        .body(json!({"metadata": {"name": "s"}}).to_string().into_bytes())
        .unwrap();
    let created: Value = server.client().request(req).await.unwrap();
    assert_eq!(created["kind"], "ConfigMap");
    assert_eq!(created["apiVersion"], "v1");
    assert_eq!(
        cms.get("s").await.unwrap().metadata.name.as_deref(),
        Some("s")
    );
}

#[tokio::test]
async fn unknown_resources_are_not_found() {
    let server = ApiServer::new();
    for path in [
        "/api/v1/namespaces/default/gizmos",
        "/apis/apps/v2/deployments",
        "/api/v1/namespaces/default/configmaps/a/scale",
    ] {
        let s = send(&server, "GET", path, "application/json", "").await;
        assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"), "{path}");
        assert_eq!(
            s.message,
            "the server could not find the requested resource"
        );
    }
    // Below a group nothing serves there is no API at all: the plain text
    // of the real server's mux, whatever the method.
    for (method, path) in [
        ("GET", "/apis/nope.example.com/v1/things"),
        ("GET", "/apis/nope.example.com/v1"),
        (
            "POST",
            "/apis/nope.example.com/v1/namespaces/default/things",
        ),
    ] {
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(kube::client::Body::from(b"{}".to_vec()))
            .unwrap();
        let response = server.client().send(request).await.unwrap();
        assert_eq!(response.status(), 404, "{method} {path}");
        let text = response.into_body().collect_bytes().await.unwrap();
        assert_eq!(&text[..], b"404 page not found\n", "{method} {path}");
    }
    let body = json!({"apiVersion": "v1", "kind": "Gizmo", "metadata": {"name": "g"}});
    let s = send(
        &server,
        "POST",
        "/api/v1/namespaces/default/gizmos",
        "application/json",
        &body.to_string(),
    )
    .await;
    assert_eq!(s.code, 404);
}

#[tokio::test]
async fn names_must_be_dns_subdomains() {
    let server = ApiServer::new();
    let before = server.revision();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    for bad in ["Upper", "under_score", "-dash", "dot.", &"a".repeat(254)] {
        let mut c = ConfigMap::default();
        c.metadata.name = Some(bad.to_string());
        let s = status(cms.create(&PostParams::default(), &c).await.unwrap_err());
        assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{bad}");
        let details = s.details.unwrap();
        assert_eq!(details.kind, "ConfigMap");
        assert_eq!(details.causes[0].field, "metadata.name");
        assert!(
            s.message
                .starts_with(&format!("ConfigMap \"{bad}\" is invalid: metadata.name"))
        );
    }
    // A missing name is Invalid too.
    let s = status(
        cms.create(&PostParams::default(), &ConfigMap::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 422);
    assert_eq!(server.revision(), before);
    assert_eq!(configmaps(&server).await, 0);
}

#[tokio::test]
async fn mismatched_names_methods_and_patch_types() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut c = ConfigMap::default();
    c.metadata.name = Some("a".into());
    cms.create(&PostParams::default(), &c).await.unwrap();

    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}});
    let s = send(
        &server,
        "PUT",
        &format!("{CM_PATH}/a"),
        "application/json",
        &other.to_string(),
    )
    .await;
    assert_eq!(s.code, 400);
    assert!(
        s.message.contains("does not match the name on the URL"),
        "{}",
        s.message
    );

    let in_ns = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "kube-system"}});
    let s = send(
        &server,
        "POST",
        CM_PATH,
        "application/json",
        &in_ns.to_string(),
    )
    .await;
    assert_eq!(s.code, 400);

    let s = send(
        &server,
        "POST",
        &format!("{CM_PATH}/a"),
        "application/json",
        "{}",
    )
    .await;
    assert_eq!((s.code, s.reason.as_str()), (405, "MethodNotAllowed"));
    let s = send(&server, "PUT", CM_PATH, "application/json", "{}").await;
    assert_eq!(s.code, 405);

    // Each patch type refuses a body of the wrong shape; an unknown
    // content type is refused naming the patch types accepted.
    for (ct, body, want) in [
        ("application/json-patch+json", "{}", (400, "BadRequest")),
        (
            "application/strategic-merge-patch+json",
            "[]",
            (400, "BadRequest"),
        ),
        ("application/apply-patch+yaml", "{}", (422, "Invalid")),
        ("application/x-patch", "{}", (415, "UnsupportedMediaType")),
    ] {
        let s = send(&server, "PATCH", &format!("{CM_PATH}/a"), ct, body).await;
        assert_eq!((s.code, s.reason.as_str()), want, "{ct}: {}", s.message);
    }
    // `force` belongs to server-side apply only.
    let s = send(
        &server,
        "PATCH",
        &format!("{CM_PATH}/a?force=true"),
        "application/merge-patch+json",
        "{}",
    )
    .await;
    assert_eq!(
        (s.code, s.reason.as_str()),
        (422, "Invalid"),
        "{}",
        s.message
    );
    assert_eq!(s.details.unwrap().causes[0].field, "force");
    let s = send(
        &server,
        "PATCH",
        &format!("{CM_PATH}/a"),
        "text/plain",
        "{}",
    )
    .await;
    assert!(
        s.message.contains("application/merge-patch+json"),
        "{}",
        s.message
    );
    // Merge patches through kube work, with the same path.
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .unwrap();
    let before = server.revision();
    let s = send(
        &server,
        "PATCH",
        &format!("{CM_PATH}/a"),
        "application/merge-patch+json",
        "{not json",
    )
    .await;
    assert_eq!(s.code, 400);
    let s = send(
        &server,
        "PATCH",
        &format!("{CM_PATH}/missing"),
        "application/merge-patch+json",
        "{}",
    )
    .await;
    assert_eq!(s.code, 404);
    // A YAML body is understood; one of another format is refused.
    let s = send(&server, "POST", CM_PATH, "text/plain", "kind: ConfigMap").await;
    assert_eq!(s.code, 415);
    // A CRD that does not validate is Invalid and registers nothing.
    let bad_crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "wrong.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "things", "kind": "Thing"},
                 "versions": [{"name": "v1", "served": true, "storage": true}]}
    });
    let s = send(
        &server,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "application/json",
        &bad_crd.to_string(),
    )
    .await;
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(s.details.unwrap().causes[0].field, "metadata.name");
    assert_eq!(server.revision(), before, "nothing was written");
}
