//! CustomResourceDefinitions validated as 1.20 validates them (issue 32,
//! item 7), and their structural defaults (item 4): applied on create, on
//! a merge patch's `null`, on read of an object stored before the default
//! existed, per version; `minProperties`/`maxProperties`.

use integration_tests::scene::eventually;
use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

use super::custom::crd;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// The `Gadget` CRD of this run, ready to POST.
fn gadget(s: &Scene) -> Value {
    let group = s.group();
    let mut c = crd("Gadget", true);
    c["apiVersion"] = json!("apiextensions.k8s.io/v1");
    c["kind"] = json!("CustomResourceDefinition");
    c["metadata"]["name"] = json!(format!("gadgets.{group}"));
    c["spec"]["group"] = json!(group);
    c
}

/// The schema of the `spec` of a `Gadget`'s first version.
fn spec_schema(c: &mut Value) -> &mut Value {
    &mut c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
}

/// Definitions the real server refuses: each is a dry run.
pub async fn invalid_crd_definitions_are_refused(s: &mut Scene) -> Fallible {
    let mut cases: Vec<(&str, Value, u16)> = vec![("valid", gadget(s), 201)];
    let mut no_schema = gadget(s);
    no_schema["spec"]["versions"][0]
        .as_object_mut()
        .ok_or("version")?
        .remove("schema");
    cases.push(("no schema", no_schema, 422));
    let mut untyped = gadget(s);
    spec_schema(&mut untyped)["properties"]["mode"] = json!({"description": "no type"});
    cases.push(("a property without a type", untyped, 422));
    let mut untyped_root = gadget(s);
    untyped_root["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        .as_object_mut()
        .ok_or("schema")?
        .remove("type");
    cases.push(("a root without a type", untyped_root, 422));
    let mut no_items = gadget(s);
    spec_schema(&mut no_items)["properties"]["tags"] = json!({"type": "array"});
    cases.push(("an array without items", no_items, 422));
    let mut wrong_default = gadget(s);
    spec_schema(&mut wrong_default)["properties"]["size"] =
        json!({"type": "integer", "default": "three"});
    cases.push(("a default of the wrong type", wrong_default, 422));
    let mut low_default = gadget(s);
    spec_schema(&mut low_default)["properties"]["size"] =
        json!({"type": "integer", "minimum": 1, "default": 0});
    cases.push(("a default below the minimum", low_default, 422));
    let mut columns = gadget(s);
    columns["spec"]["versions"][0]["additionalPrinterColumns"] = json!([
        {"name": "Size", "type": "integer", "jsonPath": "spec.size"},
        {"name": "Mode", "type": "weird", "jsonPath": ".spec.mode"},
        {"name": "Color", "type": "string", "format": "colour", "jsonPath": ".spec.color"},
    ]);
    cases.push(("bad printer columns", columns, 422));
    let mut scale = gadget(s);
    scale["spec"]["versions"][0]["subresources"]["scale"] =
        json!({"specReplicasPath": "spec.replicas", "statusReplicasPath": ".spec.replicas"});
    cases.push(("bad scale paths", scale, 422));
    let mut scale_under = gadget(s);
    scale_under["spec"]["versions"][0]["subresources"]["scale"] =
        json!({"specReplicasPath": ".status.replicas", "statusReplicasPath": ".status.replicas"});
    cases.push(("a spec replicas path under status", scale_under, 422));
    let mut two = gadget(s);
    let mut v2 = two["spec"]["versions"][0].clone();
    v2["name"] = json!("v2");
    v2["storage"] = json!(false);
    v2["additionalPrinterColumns"] =
        json!([{"name": "Size", "type": "int", "jsonPath": ".spec.size"}]);
    two["spec"]["versions"]
        .as_array_mut()
        .ok_or("versions")?
        .push(v2);
    cases.push(("a bad column in one of two versions", two, 422));
    for (label, body, code) in cases {
        let reply = s.post(&format!("{CRDS}?dryRun=All"), body).await?;
        assert_eq!(reply.code, code, "{label}: {}", reply.body);
        if code == 201 {
            s.record(label, reply.code);
        } else {
            s.record(label, &reply);
        }
    }
    Ok(())
}

/// An update may not change `group` or `scope`, nor drop a version that
/// objects are still stored in.
pub async fn crd_updates_keep_group_scope_and_stored_versions(s: &mut Scene) -> Fallible {
    let installed = s.install_crd(crd("Gadget", true)).await?;
    let name = installed["metadata"]["name"]
        .as_str()
        .ok_or("name")?
        .to_owned();
    let item = format!("{CRDS}/{name}");
    let current = s.get(&item).await?.expect(200)?.body;
    let mut scope = current.clone();
    scope["spec"]["scope"] = json!("Cluster");
    let reply = s.put(&item, scope).await?;
    assert_eq!(reply.code, 422, "{}", reply.body);
    s.record("scope changed", &reply);
    let mut group = current.clone();
    group["spec"]["group"] = json!("other.conformance.fsm.test");
    let reply = s.put(&item, group).await?;
    assert_eq!(reply.code, 422, "{}", reply.body);
    s.record("group changed", &reply);

    // A second version becomes the storage version: both are stored.
    let mut two = current.clone();
    let mut v2 = two["spec"]["versions"][0].clone();
    v2["name"] = json!("v2");
    two["spec"]["versions"][0]["storage"] = json!(false);
    two["spec"]["versions"]
        .as_array_mut()
        .ok_or("versions")?
        .push(v2);
    let reply = s.put(&item, two).await?.expect(200)?;
    s.record(
        "v2 added as storage",
        &reply.body["status"]["storedVersions"],
    );
    let mut only_v2 = reply.body.clone();
    let kept = only_v2["spec"]["versions"][1].clone();
    only_v2["spec"]["versions"] = json!([kept]);
    let reply = s.put(&item, only_v2).await?;
    assert_eq!(reply.code, 422, "{}", reply.body);
    s.record("stored version v1 dropped", &reply);
    Ok(())
}

/// Structural defaults: on create, on a merge patch's `null`, on read of
/// what was stored before a default existed; `minProperties` and
/// `maxProperties`.
pub async fn crd_structural_defaults_and_property_counts(s: &mut Scene) -> Fallible {
    let mut c = crd("Gadget", true);
    let spec = &mut c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    spec["properties"]["size"] = json!({"type": "integer", "default": 3});
    spec["properties"]["limits"] = json!({"type": "object", "default": {},
        "properties": {"cpu": {"type": "string", "default": "1"}}});
    spec["properties"]["ports"] = json!({"type": "array", "items": {"type": "object",
        "properties": {"port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}}}});
    spec["properties"]["labels"] = json!({"type": "object", "minProperties": 1,
        "maxProperties": 2, "additionalProperties": {"type": "string"}});
    let installed = s.install_crd(c).await?;
    let path = s.custom("v1", "gadgets");
    let group = s.group();
    let body = |name: &str, spec: Value| {
        json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget",
            "metadata": {"name": name}, "spec": spec})
    };
    let created = s
        .post(&path, body("g", json!({"ports": [{"port": 80}]})))
        .await?
        .expect(201)?;
    assert_eq!(created.body["spec"]["size"], 3);
    s.record("created: defaults filled", &created.body["spec"]);
    let patched = s
        .merge(
            &format!("{path}/g"),
            json!({"spec": {"size": null, "color": "red"}}),
        )
        .await?
        .expect(200)?;
    s.record("merge patch null: default again", &patched.body["spec"]);
    for (label, labels) in [
        ("no labels", json!({})),
        ("three labels", json!({"a": "1", "b": "2", "c": "3"})),
    ] {
        let reply = s
            .post(&path, body("counted", json!({"labels": labels})))
            .await?;
        assert_eq!(reply.code, 422, "{label}: {}", reply.body);
        s.record(
            format!("labels: {label}"),
            (reply.code, &reply.body["details"]["causes"]),
        );
    }

    // A default added later is read into what was stored before it.
    let crd_path = format!(
        "{CRDS}/{}",
        installed["metadata"]["name"].as_str().ok_or("name")?
    );
    let mut current = s.get(&crd_path).await?.expect(200)?.body;
    current["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["color"] = json!({"type": "string", "default": "blue"});
    current["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["mode"] = json!({"type": "string", "default": "fast"});
    s.put(&crd_path, current).await?.expect(200)?;
    let item = format!("{path}/g");
    let read = eventually("the new default to be read", 30, async || {
        let got = s.get(&item).await?.expect(200)?.body;
        Ok((got["spec"]["mode"] == "fast").then_some(got))
    })
    .await?;
    s.record("read after a default was added", &read["spec"]);
    let listed = s.get(&path).await?.expect(200)?.body;
    s.record(
        "listed after a default was added",
        &listed["items"][0]["spec"],
    );
    Ok(())
}

/// A CRD with two versions of different schemas: each version prunes and
/// defaults by its own.
pub async fn crd_versions_prune_and_default_by_their_own_schemas(s: &mut Scene) -> Fallible {
    let mut c = crd("Gadget", true);
    let mut v2 = c["spec"]["versions"][0].clone();
    {
        let spec = &mut c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        spec["properties"]["size"] = json!({"type": "integer", "default": 1});
    }
    v2["name"] = json!("v2");
    v2["storage"] = json!(false);
    {
        let spec = &mut v2["schema"]["openAPIV3Schema"]["properties"]["spec"];
        spec["properties"] = json!({"size": {"type": "integer", "default": 2},
            "mode": {"type": "string", "default": "fast"}});
    }
    c["spec"]["versions"]
        .as_array_mut()
        .ok_or("versions")?
        .push(v2);
    s.install_crd(c).await?;
    let group = s.group();
    let v1_path = s.custom("v1", "gadgets");
    let v2_path = s.custom("v2", "gadgets");
    let through = |version: &str| {
        if version == "v1" {
            v1_path.clone()
        } else {
            v2_path.clone()
        }
    };
    eventually("v2 to be served", 30, async || {
        Ok((s.get(&v2_path).await?.code == 200).then_some(()))
    })
    .await?;
    let created = s
        .post(
            &through("v1"),
            json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget",
                "metadata": {"name": "a"}, "spec": {"color": "red"}}),
        )
        .await?
        .expect(201)?;
    s.record("created through v1", &created.body["spec"]);
    let created = s
        .post(
            &through("v2"),
            json!({"apiVersion": format!("{group}/v2"), "kind": "Gadget",
                "metadata": {"name": "b"}, "spec": {"color": "red"}}),
        )
        .await?
        .expect(201)?;
    s.record("created through v2", &created.body["spec"]);
    for (version, name) in [("v1", "a"), ("v2", "a"), ("v1", "b"), ("v2", "b")] {
        let got = s
            .get(&format!("{}/{name}", through(version)))
            .await?
            .expect(200)?;
        s.record(
            format!("{name} read through {version}"),
            (&got.body["apiVersion"], &got.body["spec"]),
        );
    }
    Ok(())
}

/// A custom resource whose `metadata.labels` or `annotations` is not a map
/// of strings does not decode: 400 with json-iterator's words (issue 32,
/// item 10).
pub async fn custom_resource_metadata_must_decode(s: &mut Scene) -> Fallible {
    s.install_crd(crd("Gadget", true)).await?;
    let path = s.custom("v1", "gadgets");
    let group = s.group();
    for (label, metadata) in [
        ("labels a string", json!({"name": "g", "labels": "x"})),
        ("labels a list", json!({"name": "g", "labels": ["a"]})),
        (
            "labels a number, with generateName",
            json!({"generateName": "g-", "labels": 5}),
        ),
        (
            "a label value a number",
            json!({"name": "g", "labels": {"a": 1}}),
        ),
        (
            "a second label value a boolean",
            json!({"name": "g", "labels": {"a": "b", "c": true}}),
        ),
        (
            "annotations a string",
            json!({"name": "g", "annotations": "x"}),
        ),
        (
            "an annotation value a number",
            json!({"name": "g", "annotations": {"a": 1}}),
        ),
    ] {
        let body = json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget",
            "metadata": metadata, "spec": {}});
        let reply = s.post(&path, body).await?;
        assert_eq!(reply.code, 400, "{label}: {}", reply.body);
        s.record(label, &reply);
    }
    let body = json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget",
        "metadata": {"name": "g", "labels": null}, "spec": {}});
    let reply = s.post(&format!("{path}?dryRun=All"), body).await?;
    assert_eq!(reply.code, 201, "{}", reply.body);
    s.record("labels null", reply.code);
    Ok(())
}
