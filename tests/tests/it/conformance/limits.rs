//! Size limits: the 1 MiB data limit of ConfigMaps and Secrets, the 3 MiB
//! request body limit, and objects too large for etcd (1.5 MiB), with the
//! codes, reasons and messages of the real server.

use integration_tests::scene::Reply;
use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

const MIB: usize = 1024 * 1024;

/// A `Blob`: any fields, with a status subresource.
fn blob_crd() -> Value {
    json!({
        "metadata": {},
        "spec": {
            "scope": "Namespaced",
            "names": {"plural": "blobs", "singular": "blob", "kind": "Blob", "listKind": "BlobList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true
                }}
            }]
        }
    })
}

fn config_map(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

/// What to compare of an answer that carries a large object: the code and
/// the sizes of its data, not the megabytes themselves.
fn summary(reply: &Reply) -> Value {
    let sizes: Value = reply.body["data"]
        .as_object()
        .map(|d| {
            d.iter()
                .map(|(k, v)| (k.clone(), json!(v.as_str().map_or(0, str::len))))
                .collect()
        })
        .unwrap_or_default();
    json!({"code": reply.code, "kind": reply.body["kind"], "data sizes": sizes})
}

/// The code, reason and message of a refusal whose message ends in a
/// number the servers compute differently (gRPC's message size), cut
/// before it.
fn refusal_up_to(reply: &Reply, cut: &str) -> Value {
    let message = reply.body["message"].as_str().unwrap_or_default();
    let head = message
        .find(cut)
        .map_or(message, |i| &message[..i + cut.len()]);
    json!({"code": reply.code, "reason": reply.body.get("reason"), "message": head})
}

/// ConfigMaps and Secrets: data up to 1 MiB (values only: keys do not
/// count) is accepted; one byte more is `422 Invalid` (`FieldValueTooLong`),
/// on create, on a patch and on a dry run, and the object stays as it was.
pub async fn configmap_and_secret_data_limit(s: &mut Scene) -> Fallible {
    let cms = s.core("configmaps");
    let half = "a".repeat(MIB / 2);
    let at_limit = config_map(
        "at-limit",
        json!({"k".repeat(200): half, "j".repeat(200): half}),
    );
    let created = s.post(&cms, at_limit).await?.expect(201)?;
    s.record("data of exactly 1 MiB", summary(&created));

    let over = config_map("over", json!({"k": "a".repeat(MIB + 1)}));
    let refused = s.post(&cms, over.clone()).await?.expect(422)?;
    assert_eq!(refused.reason(), "Invalid");
    s.record("data of 1 MiB + 1", &refused);
    let dry = s
        .post(&format!("{cms}?dryRun=All"), over)
        .await?
        .expect(422)?;
    s.record("dry run of 1 MiB + 1", &dry);
    s.get(&format!("{cms}/over")).await?.expect(404)?;

    let binary = json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "binary"},
        "data": {"k": "a".repeat(MIB / 2)},
        "binaryData": {"b": base64(&vec![b'b'; MIB / 2 + 1])}
    });
    let refused = s.post(&cms, binary).await?.expect(422)?;
    s.record("data and binaryData over 1 MiB", &refused);

    let item = format!("{cms}/at-limit");
    let grown = s
        .merge(&item, json!({"data": {"x": "1"}}))
        .await?
        .expect(422)?;
    s.record("patch past 1 MiB", &grown);
    let kept = s.get(&item).await?.expect(200)?;
    assert!(kept.body["data"].get("x").is_none());
    s.record("after the refused patch", summary(&kept));

    let secrets = s.core("secrets");
    let secret = |name: &str, n: usize| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
               "type": "Opaque", "data": {"k": base64(&vec![0; n])}})
    };
    let ok = s
        .post(&secrets, secret("at-limit", MIB))
        .await?
        .expect(201)?;
    s.record("secret of exactly 1 MiB (decoded)", ok.code);
    let refused = s
        .post(&secrets, secret("over", MIB + 1))
        .await?
        .expect(422)?;
    s.record("secret of 1 MiB + 1", &refused);
    let string_data = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "string-data"}, "stringData": {"k": "a".repeat(MIB + 1)}});
    let refused = s.post(&secrets, string_data).await?.expect(422)?;
    s.record("secret stringData of 1 MiB + 1", &refused);
    Ok(())
}

/// A request body over 3 MiB is `413 RequestEntityTooLarge` before it is
/// read as an object; exactly 3 MiB is read (and here refused for its
/// data, `422`).
pub async fn request_body_limit(s: &mut Scene) -> Fallible {
    let cms = s.core("configmaps");
    let body = |name: &str, total: usize| {
        let mut object = config_map(name, json!({"k": ""}));
        let base = serde_json::to_string(&object).map_or(0, |t| t.len());
        object["data"]["k"] = json!("a".repeat(total - base));
        let text = serde_json::to_string(&object).unwrap_or_default();
        assert_eq!(text.len(), total);
        Value::String(text)
    };
    let exact = s.post(&cms, body("exact", 3 * MIB)).await?.expect(422)?;
    s.record("body of exactly 3 MiB", &exact);
    let over = s.post(&cms, body("over", 3 * MIB + 1)).await?.expect(413)?;
    assert_eq!(over.reason(), "RequestEntityTooLarge");
    s.record("body of 3 MiB + 1", &over);
    s.get(&format!("{cms}/over")).await?.expect(404)?;
    // A patch body too.
    s.post(&cms, config_map("small", json!({"a": "1"})))
        .await?
        .expect(201)?;
    let patch = json!({"data": {"a": "b".repeat(3 * MIB)}});
    let over = s.merge(&format!("{cms}/small"), patch).await?.expect(413)?;
    s.record("patch body over 3 MiB", &over);
    Ok(())
}

/// A custom resource too large for etcd: 1.4 MB is stored, 1.6 MB is a
/// `500` with etcd's message and no reason, and a status write that would
/// make the object larger than gRPC's 2 MiB message is a `500` too; the
/// stored object is unchanged after each.
pub async fn objects_too_large_for_etcd(s: &mut Scene) -> Fallible {
    s.install_crd(blob_crd()).await?;
    let blobs = s.custom("v1", "blobs");
    let group = s.group();
    let blob = |name: &str, n: usize| {
        json!({"apiVersion": format!("{group}/v1"), "kind": "Blob",
               "metadata": {"name": name}, "spec": {"d": "a".repeat(n)}})
    };
    let stored = s.post(&blobs, blob("fits", 1_400_000)).await?.expect(201)?;
    s.record("1.4 MB custom resource", stored.code);
    let refused = s
        .post(&blobs, blob("too-large", 1_600_000))
        .await?
        .expect(500)?;
    assert_eq!(refused.body["message"], "etcdserver: request is too large");
    s.record("1.6 MB custom resource", &refused);
    s.get(&format!("{blobs}/too-large")).await?.expect(404)?;

    let item = format!("{blobs}/fits");
    let grown = s
        .merge(&item, json!({"spec": {"e": "b".repeat(200_000)}}))
        .await?
        .expect(500)?;
    s.record("patch past 1.5 MiB", &grown);
    let status = s
        .merge(
            &format!("{item}/status"),
            json!({"status": {"e": "c".repeat(1_600_000)}}),
        )
        .await?
        .expect(500)?;
    s.record(
        "status patch past 2 MiB",
        refusal_up_to(&status, "larger than max"),
    );
    let kept = s.get(&item).await?.expect(200)?;
    assert!(kept.body["spec"].get("e").is_none());
    assert!(
        kept.body
            .get("status")
            .is_none_or(|st| st.get("e").is_none())
    );
    s.record(
        "after the refused writes",
        json!({"spec": kept.body["spec"]["d"].as_str().map_or(0, str::len),
               "status": kept.body.get("status")}),
    );
    Ok(())
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    fsm_testkit::internals::base64(bytes)
}
