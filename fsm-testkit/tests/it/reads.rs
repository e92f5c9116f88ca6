//! Reads at versions the history no longer holds (the real server's
//! compacted revisions): a list at such a version is `410 Expired`, and a
//! continue token of such a snapshot is `410` with a token that goes on
//! with the rest of the list at the newest version (an inconsistent
//! continue), as the real server answers.

use fsm_testkit::{ApiServer, ServerConfig};
use serde_json::{Value, json};

const PATH: &str = "/api/v1/namespaces/default/configmaps";

async fn get(server: &ApiServer, path: &str) -> (u16, Value) {
    let req = http::Request::builder().uri(path).body(Vec::new()).unwrap();
    let response = server.client().send(req.map(Into::into)).await.unwrap();
    let code = response.status().as_u16();
    let bytes = response.into_body().collect_bytes().await.unwrap();
    (code, serde_json::from_slice(&bytes).unwrap())
}

async fn create(server: &ApiServer, name: &str) {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    let req = http::Request::builder()
        .method("POST")
        .uri(PATH)
        .header("content-type", "application/json")
        .body(body.to_string().into_bytes())
        .unwrap();
    let response = server.client().send(req.map(Into::into)).await.unwrap();
    assert_eq!(response.status(), 201);
}

fn names(list: &Value) -> Vec<&str> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn compacted_versions_are_expired_and_continue_goes_on_inconsistently() {
    let server = ApiServer::with_config(ServerConfig {
        history_limit: 3,
        ..ServerConfig::default()
    });
    for name in ["a", "b", "c"] {
        create(&server, name).await;
    }
    let (code, first) = get(&server, &format!("{PATH}?limit=1")).await;
    assert_eq!(code, 200);
    let snapshot = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let token = first["metadata"]["continue"].as_str().unwrap().to_owned();
    // Enough changes for the snapshot to leave the history.
    for name in ["d", "e", "f", "g"] {
        create(&server, name).await;
    }

    let (code, status) = get(
        &server,
        &format!("{PATH}?resourceVersionMatch=Exact&resourceVersion={snapshot}"),
    )
    .await;
    assert_eq!(
        (code, &status["reason"]),
        (410, &json!("Expired")),
        "{status}"
    );
    assert_eq!(
        status["message"],
        "The resourceVersion for the provided list is too old."
    );
    let (code, _) = get(
        &server,
        &format!("{PATH}?resourceVersion={snapshot}&limit=1"),
    )
    .await;
    assert_eq!(code, 410, "the legacy exact list too");

    let (code, status) = get(&server, &format!("{PATH}?limit=2&continue={token}")).await;
    assert_eq!(
        (code, &status["reason"]),
        (410, &json!("Expired")),
        "{status}"
    );
    let fresh = status["metadata"]["continue"]
        .as_str()
        .expect("an inconsistent continue token");
    let (code, rest) = get(&server, &format!("{PATH}?limit=10&continue={fresh}")).await;
    assert_eq!(code, 200, "{rest}");
    assert_eq!(
        names(&rest),
        ["b", "c", "d", "e", "f", "g"],
        "the rest, as it is now"
    );
    assert_eq!(
        rest["metadata"]["resourceVersion"],
        server.revision().to_string()
    );
}
