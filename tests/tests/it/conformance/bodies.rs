//! What a request body may be: YAML for a create, an update and an apply;
//! a built-in kind's body without `apiVersion` and `kind` (the URL says
//! them); the refusals of a body of another kind or version, and of an
//! apply configuration without them. And the deprecated watch paths
//! (`/api/v1/watch/…`), still served.

use http::Method;
use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

const YAML: &str = "application/yaml";
const APPLY: &str = "application/apply-patch+yaml";

/// A Status answer's code, reason and message.
fn refusal(reply: &integration_tests::Reply) -> Value {
    json!([reply.code, reply.body["reason"], reply.body["message"]])
}

/// YAML bodies for create, update and apply; a body that leaves out
/// `apiVersion` and `kind`; bodies of another kind or version; apply
/// configurations without a version or a kind.
pub async fn yaml_bodies_and_the_type_from_the_url(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let created = s
        .request(
            Method::POST,
            &path,
            Some(YAML),
            Some(Value::from(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-yaml}\ndata: {a: \"1\"}\n",
            )),
        )
        .await?
        .expect(201)?;
    assert_eq!(created.body["data"], json!({"a": "1"}));
    s.record("a YAML create", &created.body["data"]);
    let replaced = s
        .request(
            Method::PUT,
            &format!("{path}/from-yaml"),
            Some(YAML),
            Some(Value::from(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-yaml}\ndata: {a: \"2\"}\n",
            )),
        )
        .await?
        .expect(200)?;
    assert_eq!(replaced.body["data"], json!({"a": "2"}));
    s.record("a YAML update", &replaced.body["data"]);
    let applied = s
        .request(
            Method::PATCH,
            &format!("{path}/applied-yaml?fieldManager=alice"),
            Some(APPLY),
            Some(Value::from(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied-yaml\ndata:\n  b: \"3\"\n",
            )),
        )
        .await?
        .expect(201)?;
    assert_eq!(applied.body["data"], json!({"b": "3"}));
    s.record("a YAML apply", &applied.body["data"]);
    let broken = s
        .request(
            Method::POST,
            &path,
            Some(YAML),
            Some(Value::from("metadata: {name: broken\n")),
        )
        .await?
        .expect(400)?;
    s.record("broken YAML", json!([broken.code, broken.body["reason"]]));

    let untyped = s
        .post(
            &path,
            json!({"metadata": {"name": "untyped"}, "data": {"c": "4"}}),
        )
        .await?
        .expect(201)?;
    assert_eq!(untyped.body["kind"], "ConfigMap");
    s.record(
        "a body without apiVersion and kind",
        json!([
            untyped.body["apiVersion"],
            untyped.body["kind"],
            untyped.body["data"]
        ]),
    );
    let secret = s
        .post(
            &path,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "other"}}),
        )
        .await?
        .expect(400)?;
    s.record("a body of another kind", refusal(&secret));
    let version = s
        .post(
            &path,
            json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "other"}}),
        )
        .await?
        .expect(400)?;
    s.record("a body of another version", refusal(&version));

    let unversioned = s
        .request(
            Method::PATCH,
            &format!("{path}/applied-yaml?fieldManager=alice"),
            Some(APPLY),
            Some(Value::from("metadata: {name: applied-yaml}\n")),
        )
        .await?
        .expect(400)?;
    s.record("an apply without apiVersion", refusal(&unversioned));
    let kindless = s
        .request(
            Method::PATCH,
            &format!("{path}/applied-yaml?fieldManager=alice"),
            Some(APPLY),
            Some(Value::from(
                "apiVersion: v1\nmetadata: {name: applied-yaml}\n",
            )),
        )
        .await?
        .expect(500)?;
    s.record("an apply without kind", refusal(&kindless));
    Ok(())
}

/// The names and types of the events a watch answered with.
fn events_of(body: &Value) -> Vec<Value> {
    let text = match body {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|e| json!([e["type"], e["object"]["metadata"]["name"]]))
        .collect()
}

/// `/api/v1/watch/namespaces/NS/configmaps` watches the collection, and
/// `…/configmaps/NAME` the one object.
pub async fn legacy_watch_paths(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    for name in ["one", "two"] {
        s.post(
            &path,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}),
        )
        .await?
        .expect(201)?;
    }
    let legacy = path.replacen("/api/v1/", "/api/v1/watch/", 1);
    let all = s
        .get(&format!("{legacy}?timeoutSeconds=1"))
        .await?
        .expect(200)?;
    let mut events = events_of(&all.body);
    events.sort_by_key(Value::to_string);
    assert_eq!(
        events,
        [json!(["ADDED", "one"]), json!(["ADDED", "two"])],
        "{}",
        all.body
    );
    s.record("a legacy watch of the collection", &events);
    let one = s
        .get(&format!("{legacy}/one?timeoutSeconds=1"))
        .await?
        .expect(200)?;
    let events = events_of(&one.body);
    assert_eq!(events, [json!(["ADDED", "one"])], "{}", one.body);
    s.record("a legacy watch of one object", &events);
    Ok(())
}

/// The paths `GET /` lists on every server (the real one lists more of
/// its own: health checks, metrics, logs).
const ROOT_LISTS: [&str; 7] = [
    "/api",
    "/api/v1",
    "/apis",
    "/apis/apps",
    "/apis/apps/v1",
    "/healthz",
    "/version",
];

/// The paths a 404 outside the APIs lists on every server: those of the
/// CRD API's server, the last in the real server's chain, and not the
/// core APIs.
const NOT_FOUND_LISTS: [&str; 5] = [
    "/apis",
    "/apis/apiextensions.k8s.io",
    "/apis/apiextensions.k8s.io/v1",
    "/healthz",
    "/version",
];

/// What one GET of `path` shows of the server's answer: the code, the
/// media type, and of the body a `Status`'s reason and message, the plain
/// text, or, of a path listing, which of `listed` it lacks and whether it
/// names the core API (the listings themselves differ: the real server
/// lists its own health checks and endpoints).
async fn answer_to(s: &Scene, path: &str, listed: &[&str]) -> Fallible<Value> {
    let (code, content_type, body) = s
        .send_bytes(
            Method::GET,
            path,
            "application/json",
            "application/json",
            Vec::new(),
        )
        .await?;
    let shown = match serde_json::from_slice::<Value>(&body) {
        Ok(status) if status["kind"] == "Status" => {
            json!({"Status": [status["reason"], status["message"]]})
        }
        Ok(listing) if listing["paths"].is_array() => {
            let paths = listing["paths"].as_array().cloned().unwrap_or_default();
            let missing: Vec<&str> = listed
                .iter()
                .filter(|p| !paths.iter().any(|q| q == **p))
                .copied()
                .collect();
            let core = paths.iter().any(|p| p == "/api/v1");
            json!({"paths, missing of the common ones": missing, "lists /api/v1": core})
        }
        Ok(other) => json!({"json": other["kind"]}),
        Err(_) => json!({"text": String::from_utf8_lossy(&body)}),
    };
    Ok(json!({"code": code, "type": content_type, "body": shown}))
}

/// Paths nothing serves: below a served API (an unknown resource, an
/// unknown version of a served group, `/version/x`) a `Status` 404; below
/// `/apis/` of a group nothing serves, the plain "404 page not found" of
/// the server's mux (no API handler is there at all); anywhere else a 404
/// whose JSON lists paths (those of the CRD API's server, not the core
/// APIs), as `GET /` lists every served path with a 200.
pub async fn unknown_paths_and_the_root(s: &mut Scene) -> Fallible {
    let root = answer_to(s, "/", &ROOT_LISTS).await?;
    assert_eq!(root["code"], 200, "{root}");
    assert_eq!(root["body"]["paths, missing of the common ones"], json!([]));
    s.record("GET /", root);
    for path in ["/healthz", "/healthz/ping"] {
        let ok = answer_to(s, path, &[]).await?;
        assert_eq!(ok["code"], 200, "{path}: {ok}");
        s.record(path, ok["code"].clone());
    }
    for path in [
        "/api/v1/nothings",
        "/apis/apps/v1/nothings",
        "/apis/apps/v9",
        "/version/x",
    ] {
        let answer = answer_to(s, path, &[]).await?;
        assert_eq!(answer["code"], 404, "{path}: {answer}");
        assert_eq!(answer["body"]["Status"][0], "NotFound", "{path}: {answer}");
        s.record(path, answer);
    }
    for path in [
        "/apis/nothing.example.com",
        "/apis/nothing.example.com/v1",
        "/apis/nothing.example.com/v1/namespaces/default/things/x",
    ] {
        let answer = answer_to(s, path, &[]).await?;
        assert_eq!(answer["code"], 404, "{path}: {answer}");
        assert_eq!(
            answer["body"]["text"], "404 page not found\n",
            "{path}: {answer}"
        );
        s.record(path, answer);
    }
    for path in ["/nothing", "/healthz/nothing", "/apisx"] {
        let answer = answer_to(s, path, &NOT_FOUND_LISTS).await?;
        assert_eq!(answer["code"], 404, "{path}: {answer}");
        assert_eq!(
            answer["body"]["paths, missing of the common ones"],
            json!([]),
            "{path}: {answer}"
        );
        s.record(path, answer);
    }
    Ok(())
}
