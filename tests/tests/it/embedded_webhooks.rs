//! What only the embedded server can show of webhooks: a `clientConfig`
//! naming a Service is resolved through that Service's Endpoints (the
//! embedded server has no Service network; a real one reaches the
//! Service's cluster IP, which a test on this machine cannot serve).

use fsm_testkit::ApiServer;
use integration_tests::webhook::WebhookServer;
use serde_json::{Value, json};

async fn send(client: &kube::Client, method: &str, path: &str, body: Option<Value>) -> Value {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body.map_or_else(Vec::new, |b| b.to_string().into_bytes()))
        .expect("a request");
    match client.request::<Value>(request).await {
        Ok(v) => v,
        Err(kube::Error::Api(status)) => json!({"code": status.code, "message": status.message}),
        Err(e) => panic!("{path}: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversion_webhook_behind_a_service_is_called_through_its_endpoints() {
    let hooks = WebhookServer::start_for(&["conv.hooks.svc"])
        .await
        .expect("the webhook server");
    let server = ApiServer::new();
    let client = server.client();
    send(
        &client,
        "POST",
        "/api/v1/namespaces",
        Some(json!({"apiVersion": "v1",
        "kind": "Namespace", "metadata": {"name": "hooks"}})),
    )
    .await;
    send(
        &client,
        "POST",
        "/api/v1/namespaces/hooks/endpoints",
        Some(json!({
        "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "conv"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": hooks.port()}]}]})),
    )
    .await;
    let schema = |field: &str| {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {field: {"type": "integer"}}}}}})
    };
    let crd = |plural: &str, kind: &str, service: &str| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.hooks.example.com")},
        "spec": {"group": "hooks.example.com", "scope": "Namespaced",
            "names": {"plural": plural, "kind": kind},
            "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                "clientConfig": {"caBundle": hooks.ca_bundle(), "service":
                    {"namespace": "hooks", "name": service, "path": "/convert"}}}},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema("size")},
                {"name": "v2", "served": true, "storage": false, "schema": schema("sizeGi")}]}})
    };
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    send(&client, "POST", crds, Some(crd("disks", "Disk", "conv"))).await;
    send(&client, "POST", crds, Some(crd("tapes", "Tape", "missing"))).await;
    for plural in ["disks", "tapes"] {
        let created = send(
            &client,
            "POST",
            &format!("/apis/hooks.example.com/v1/namespaces/hooks/{plural}"),
            Some(
                json!({"apiVersion": "hooks.example.com/v1", "metadata": {"name": "a"},
                "kind": if plural == "disks" { "Disk" } else { "Tape" }, "spec": {"size": 3}}),
            ),
        )
        .await;
        assert_eq!(created["spec"]["size"], 3, "{created}");
    }
    let read = send(
        &client,
        "GET",
        "/apis/hooks.example.com/v2/namespaces/hooks/disks/a",
        None,
    )
    .await;
    assert_eq!(read["spec"], json!({"sizeGi": 3}), "{read}");
    assert_eq!(read["apiVersion"], "hooks.example.com/v2");
    let (path, _) = hooks.received().into_iter().next().expect("a review");
    assert_eq!(path, "/convert?timeout=30s");
    // A Service without Endpoints cannot be called.
    let failed = send(
        &client,
        "GET",
        "/apis/hooks.example.com/v2/namespaces/hooks/tapes/a",
        None,
    )
    .await;
    assert_eq!(failed["code"], 500, "{failed}");
    assert_eq!(
        failed["message"],
        "conversion webhook for hooks.example.com/v1, Kind=Tape failed: Post \"https://missing.hooks.svc:443/convert?timeout=30s\": service \"hooks/missing\" has no endpoints"
    );
}
