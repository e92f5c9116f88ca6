//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`): bodies of
//! built-in kinds in protobuf, as `kubectl create <generator>` sends them,
//! answers in protobuf when that is all a client accepts, and what the
//! real server does with protobuf for custom resources.

use fsm_testkit::protobuf;
use http::Method;
use integration_tests::scene::Reply;
use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

use super::custom::crd;

const PB: &str = protobuf::MEDIA_TYPE;

/// The answer as JSON, whichever of JSON or protobuf it came in.
fn reply((code, content_type, bytes): (u16, String, Vec<u8>)) -> Fallible<Reply> {
    let body = if content_type.starts_with(PB) {
        protobuf::decode(&bytes)?
    } else {
        serde_json::from_slice(&bytes)?
    };
    Ok(Reply { code, body })
}

/// Writes built-in objects in protobuf and reads them back in protobuf;
/// a malformed body; protobuf for a custom resource.
pub async fn protobuf_bodies(s: &mut Scene) -> Fallible {
    // A ConfigMap with binary data, a Secret, a Role: written in protobuf,
    // answered in JSON (what kubectl's generators do).
    let objects = [
        (
            s.core("configmaps"),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "pb-config", "labels": {"app": "pb"},
                                "annotations": {"note": "from protobuf"}},
                   "data": {"greeting": "hello", "empty": ""},
                   "binaryData": {"blob": "AAEC/w=="}}),
        ),
        (
            s.core("secrets"),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "pb-secret"}, "type": "Opaque",
                   "data": {"password": "c2VjcmV0"}}),
        ),
        (
            s.core("roles")
                .replace("/api/v1/", "/apis/rbac.authorization.k8s.io/v1/"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "pb-role"},
                   "rules": [{"apiGroups": [""], "resources": ["pods", "configmaps"],
                              "verbs": ["get", "list"], "resourceNames": ["a"]}]}),
        ),
    ];
    for (path, object) in objects {
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        let created = reply(
            s.send_bytes(
                Method::POST,
                &path,
                "application/json",
                PB,
                protobuf::encode(&object)?,
            )
            .await?,
        )?
        .expect(201)?;
        s.record(format!("{kind} created from protobuf"), &created);
    }

    // A replace in protobuf (what a Go client's Update sends).
    let item = format!("{}/pb-config", s.core("configmaps"));
    let current = s.get(&item).await?.expect(200)?;
    let mut changed = current.body.clone();
    changed["data"] = json!({"greeting": "bonjour"});
    let replaced = reply(
        s.send_bytes(
            Method::PUT,
            &item,
            "application/json",
            PB,
            protobuf::encode(&changed)?,
        )
        .await?,
    )?
    .expect(200)?;
    assert_ne!(replaced.rv(), current.rv());
    s.record("configmap replaced in protobuf", &replaced);

    // Int-or-string and quantities (a Deployment's defaults vary by
    // version: only what was sent is compared).
    let deployments = s.core("deployments").replace("/api/v1/", "/apis/apps/v1/");
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "pb-web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "pb-web"}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": "30%", "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": "pb-web"}},
                "spec": {"containers": [{
                    "name": "web", "image": "nginx:1",
                    "ports": [{"containerPort": 80, "name": "http"}],
                    "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}},
                    "readinessProbe": {"httpGet": {"path": "/", "port": "http"}}
                }]}
            }
        }
    });
    let created = reply(
        s.send_bytes(
            Method::POST,
            &deployments,
            "application/json",
            PB,
            protobuf::encode(&deployment)?,
        )
        .await?,
    )?
    .expect(201)?;
    let container = &created.body["spec"]["template"]["spec"]["containers"][0];
    s.record(
        "deployment from protobuf",
        json!({
            "replicas": created.body["spec"]["replicas"],
            "strategy": created.body["spec"]["strategy"],
            "resources": container["resources"],
            "port name": container["ports"][0]["name"],
            "probe port": container["readinessProbe"]["httpGet"]["port"],
        }),
    );

    // Read back in protobuf when only protobuf is accepted.
    let item = format!("{}/pb-config", s.core("configmaps"));
    let (code, content_type, bytes) = s
        .send_bytes(Method::GET, &item, PB, "application/json", Vec::new())
        .await?;
    assert_eq!(code, 200);
    assert!(content_type.starts_with(PB), "answered in {content_type}");
    assert!(bytes.starts_with(protobuf::MAGIC));
    let read = reply((code, content_type.clone(), bytes))?;
    assert_eq!(read.body["binaryData"]["blob"], "AAEC/w==");
    s.record(
        "configmap read in protobuf",
        json!({"contentType": content_type, "reply": read}),
    );
    let (code, content_type, bytes) = s
        .send_bytes(
            Method::GET,
            &s.core("configmaps"),
            PB,
            "application/json",
            Vec::new(),
        )
        .await?;
    assert!(content_type.starts_with(PB), "answered in {content_type}");
    let envelope = protobuf::envelope(&bytes)?;
    s.record(
        "list read in protobuf",
        json!([code, envelope.api_version, envelope.kind]),
    );
    // An error, in protobuf too.
    let missing = reply(
        s.send_bytes(
            Method::GET,
            &format!("{}/absent", s.core("configmaps")),
            PB,
            "application/json",
            Vec::new(),
        )
        .await?,
    )?
    .expect(404)?;
    s.record("missing, in protobuf", &missing);

    // A malformed protobuf body: 400 BadRequest (the message quotes Go's
    // decoder, compared by code and reason).
    let mut truncated = protobuf::encode(&json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "pb-bad"}, "data": {"k": "v"}}))?;
    truncated.truncate(truncated.len() - 6);
    for (label, body) in [
        ("truncated", truncated),
        ("no magic", b"{not protobuf".to_vec()),
    ] {
        let bad = reply(
            s.send_bytes(
                Method::POST,
                &s.core("configmaps"),
                "application/json",
                PB,
                body,
            )
            .await?,
        )?
        .expect(400)?;
        s.record(
            format!("{label} protobuf body"),
            [bad.code.to_string(), bad.reason().to_owned()],
        );
    }

    // Custom resources have no protobuf: a body is refused (400, as the
    // real server's protobuf decoder cannot fill an unstructured object),
    // and so is a client that accepts protobuf alone (406).
    s.install_crd(crd("Gadget", false)).await?;
    let gadgets = s.custom("v1", "gadgets");
    let mut body = protobuf::MAGIC.to_vec();
    body.extend_from_slice(&[0x0a, 0x00]);
    let refused = reply(
        s.send_bytes(Method::POST, &gadgets, "application/json", PB, body)
            .await?,
    )?
    .expect(400)?;
    s.record(
        "custom resource in protobuf",
        [refused.code.to_string(), refused.reason().to_owned()],
    );
    let not_acceptable = reply(
        s.send_bytes(Method::GET, &gadgets, PB, "application/json", Vec::new())
            .await?,
    )?
    .expect(406)?;
    s.record("custom resources read in protobuf", &not_acceptable);
    Ok(())
}

/// Nothing above is about a value kept as JSON: a JSON body of the same
/// object stores the same thing.
pub async fn protobuf_and_json_bodies_agree(s: &mut Scene) -> Fallible {
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "twin", "labels": {"x": "y"}},
                        "data": {"a": "1"}, "binaryData": {"b": "AQI="}});
    let from_pb = reply(
        s.send_bytes(
            Method::POST,
            &s.core("configmaps"),
            "application/json",
            PB,
            protobuf::encode(&object)?,
        )
        .await?,
    )?
    .expect(201)?;
    let mut json_object = object.clone();
    json_object["metadata"]["name"] = Value::from("twin-json");
    let from_json = s
        .post(&s.core("configmaps"), json_object)
        .await?
        .expect(201)?;
    let strip = |v: &Value| {
        let mut v = v.clone();
        for k in [
            "name",
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
        ] {
            v["metadata"].as_object_mut().map(|m| m.remove(k));
        }
        v
    };
    assert_eq!(strip(&from_pb.body), strip(&from_json.body));
    s.record("protobuf body stores", &from_pb);
    Ok(())
}
