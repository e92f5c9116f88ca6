//! Custom resources: CRD registration and discovery, CRUD, generation with
//! and without the status subresource, finalizers.

use integration_tests::scene::{Reply, eventually};
use integration_tests::{Fallible, Scene};

use crate::conformance::known;
use serde_json::{Value, json};

/// A namespaced `Widget` with a status subresource, or a `Gadget` without.
pub fn crd(kind: &str, status_subresource: bool) -> Value {
    let plural = format!("{}s", kind.to_lowercase());
    let mut version = json!({
        "name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "size": {"type": "integer"},
                    "color": {"type": "string"}
                }},
                "status": {"type": "object", "properties": {
                    "ready": {"type": "boolean"},
                    "observedGeneration": {"type": "integer"}
                }}
            }
        }},
        "additionalPrinterColumns": [
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}
        ]
    });
    if status_subresource {
        version["subresources"] = json!({"status": {}});
    }
    json!({
        "metadata": {},
        "spec": {
            "scope": "Namespaced",
            "names": {
                "plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                "listKind": format!("{kind}List"),
                "shortNames": [format!("{}x", &plural[..2])],
                "categories": ["fsmtest"]
            },
            "versions": [version]
        }
    })
}

fn widget(s: &Scene, kind: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": format!("{}/v1", s.group()),
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    })
}

fn generation(r: &Reply) -> Value {
    r.body["metadata"]["generation"].clone()
}

/// Registering a CRD: its conditions and accepted names, then discovery
/// (`/apis`, the group, the group-version's resources).
pub async fn crd_registration_and_discovery(s: &mut Scene) -> Fallible {
    let established = s.install_crd(crd("Widget", true)).await?;
    let conditions: Vec<Value> = established["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!({"type": c["type"], "status": c["status"], "reason": c["reason"]}))
        .collect();
    assert!(conditions.contains(
        &json!({"type": "Established", "status": "True", "reason": "InitialNamesAccepted"})
    ));
    s.record("conditions", &conditions);
    s.record("accepted names", &established["status"]["acceptedNames"]);
    s.record("stored versions", &established["status"]["storedVersions"]);

    let group = s.group();
    let apis = s.get("/apis").await?.expect(200)?;
    let listed: Vec<&Value> = apis.body["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| g["name"] == group.as_str())
        .collect();
    assert_eq!(listed.len(), 1, "the group is in /apis");
    s.record("/apis entry", listed[0]);
    s.record(
        "/apis/<group>",
        s.get(&format!("/apis/{group}")).await?.expect(200)?,
    );

    let mut resources = s.get(&format!("/apis/{group}/v1")).await?.expect(200)?;
    let mut details = Vec::new();
    // storageVersionHash is a hash of the group (unique per run) on the
    // real server, and the order of verbs is not a contract: both are
    // compared apart, as a known difference.
    for r in resources.body["resources"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        let hash = r
            .as_object_mut()
            .and_then(|r| r.remove("storageVersionHash"));
        details.push(json!([r["name"], r["verbs"], hash.is_some()]));
        if let Some(verbs) = r["verbs"].as_array_mut() {
            verbs.sort_by_key(|v| v.as_str().unwrap_or_default().to_owned());
        }
    }
    s.record("verbs in order, storageVersionHash", &details);
    let names: Vec<&Value> = resources.body["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| &r["name"])
        .collect();
    assert_eq!(names, [&json!("widgets"), &json!("widgets/status")]);
    s.record("/apis/<group>/v1", &resources);
    Ok(())
}

/// Create, get, list, merge patch, replace and delete a custom resource.
pub async fn custom_resource_crud(s: &mut Scene) -> Fallible {
    s.install_crd(crd("Widget", true)).await?;
    let path = s.custom("v1", "widgets");
    let item = format!("{path}/w1");
    let created = s
        .post(&path, widget(s, "Widget", "w1", json!({"size": 1})))
        .await?
        .expect(201)?;
    s.record("create", &created);
    s.record("get", s.get(&item).await?.expect(200)?);
    let list = s.get(&path).await?.expect(200)?;
    assert_eq!(list.body["kind"], "WidgetList");
    s.record(
        "list",
        (
            &list.body["kind"],
            &list.body["apiVersion"],
            &list.body["items"],
        ),
    );
    s.record("list metadata", &list.body["metadata"]);
    let patched = s
        .merge(&item, json!({"spec": {"color": "blue"}}))
        .await?
        .expect(200)?;
    assert_eq!(patched.body["spec"], json!({"size": 1, "color": "blue"}));
    s.record("merge patch", &patched);
    let mut body = patched.body.clone();
    body["spec"] = json!({"size": 7});
    let replaced = s.put(&item, body).await?.expect(200)?;
    s.record("replace", &replaced);
    s.record(
        "create existing",
        s.post(&path, widget(s, "Widget", "w1", json!({})))
            .await?
            .expect(409)?,
    );
    s.record(
        "get missing",
        s.get(&format!("{path}/nope")).await?.expect(404)?,
    );
    let deleted = s.delete(&item).await?.expect(200)?;
    s.record("delete", &deleted);
    s.record("get after delete", s.get(&item).await?.expect(404)?);
    Ok(())
}

/// With a status subresource: status is dropped on create and ignored on
/// the main resource, `/status` writes only status, and `generation` moves
/// with the spec only.
pub async fn generation_and_status_subresource(s: &mut Scene) -> Fallible {
    s.install_crd(crd("Widget", true)).await?;
    let path = s.custom("v1", "widgets");
    let item = format!("{path}/w");
    let mut body = widget(s, "Widget", "w", json!({"size": 1}));
    body["status"] = json!({"ready": true});
    let created = s.post(&path, body).await?.expect(201)?;
    assert_eq!(generation(&created), 1);
    assert!(
        created.body.get("status").is_none(),
        "status is dropped on create"
    );
    s.record("create", &created);

    let spec = s
        .merge(&item, json!({"spec": {"size": 2}}))
        .await?
        .expect(200)?;
    assert_eq!(generation(&spec), 2);
    s.record("spec change", &spec);
    let labels = s
        .merge(&item, json!({"metadata": {"labels": {"a": "b"}}}))
        .await?
        .expect(200)?;
    assert_eq!(generation(&labels), 2);
    s.record("metadata change", &labels);
    let ignored = s
        .merge(&item, json!({"status": {"ready": true}}))
        .await?
        .expect(200)?;
    assert!(
        ignored.body.get("status").is_none(),
        "the main resource ignores status"
    );
    assert_eq!(
        ignored.rv(),
        labels.rv(),
        "an ignored change writes nothing"
    );
    s.record("status through the main resource", &ignored);

    let status = s
        .merge(
            &format!("{item}/status"),
            json!({"spec": {"size": 99}, "status": {"ready": true, "observedGeneration": 2}}),
        )
        .await?
        .expect(200)?;
    assert_eq!(status.body["spec"]["size"], 2, "/status ignores the spec");
    assert_eq!(generation(&status), 2);
    s.record("status write", &status);

    let mut put = status.body.clone();
    put["status"]["ready"] = Value::Bool(false);
    let put = s.put(&format!("{item}/status"), put).await?.expect(200)?;
    s.record("status PUT", &put);
    Ok(())
}

/// Without a status subresource, status is an ordinary field: kept on
/// create, and any change outside metadata moves `generation`.
pub async fn generation_without_status_subresource(s: &mut Scene) -> Fallible {
    s.install_crd(crd("Gadget", false)).await?;
    let path = s.custom("v1", "gadgets");
    let item = format!("{path}/g");
    let mut body = widget(s, "Gadget", "g", json!({"size": 1}));
    body["status"] = json!({"ready": true});
    let created = s.post(&path, body).await?.expect(201)?;
    assert_eq!(created.body["status"], json!({"ready": true}));
    s.record("create", &created);
    let status = s
        .merge(&item, json!({"status": {"ready": false}}))
        .await?
        .expect(200)?;
    assert_eq!(status.body["status"], json!({"ready": false}));
    s.record(
        "status change",
        (&status.body["spec"], &status.body["status"]),
    );
    assert_eq!(generation(&status), 2, "a status change is a change");
    s.record("generation after a status change", generation(&status));
    let spec = s
        .merge(&item, json!({"spec": {"size": 2}}))
        .await?
        .expect(200)?;
    s.record("generation after a spec change", generation(&spec));
    let no_status = s
        .merge(&format!("{item}/status"), json!({"status": {}}))
        .await?
        .expect(404)?;
    s.record("no /status", (no_status.code, no_status.reason()));
    s.record("no /status: Status", &no_status);
    Ok(())
}

/// Finalizers: DELETE marks the object (deletionTimestamp) and answers
/// with it; it stays readable; no finalizer may be added; removing the last
/// one deletes it.
pub async fn finalizers_hold_deletion(s: &mut Scene) -> Fallible {
    s.install_crd(crd("Widget", true)).await?;
    let path = s.custom("v1", "widgets");
    let item = format!("{path}/held");
    let mut body = widget(s, "Widget", "held", json!({"size": 1}));
    body["metadata"]["finalizers"] = json!(["example.com/hold"]);
    s.post(&path, body).await?.expect(201)?;

    // Held by a finalizer: 200 with the object (202 is only for
    // orphanDependents=false).
    let deleting = s.delete(&item).await?.expect(200)?;
    assert!(deleting.body["metadata"]["deletionTimestamp"].is_string());
    s.record("delete answer", &deleting.body);
    s.record("delete code", deleting.code);
    let still = s.get(&item).await?.expect(200)?;
    s.record("get while deleting", &still);
    let again = s.delete(&item).await?;
    s.record("delete again", &again.body);
    s.record("delete again: code", again.code);
    let more = s
        .merge(
            &item,
            json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}),
        )
        .await?
        .expect(422)?;
    s.record("add a finalizer while deleting", (more.code, more.reason()));
    s.record_known(
        "add a finalizer while deleting: Status",
        &more,
        known::VERSION_FINALIZER_CAUSE_TWICE,
    );
    let spec = s
        .merge(&item, json!({"spec": {"size": 5}}))
        .await?
        .expect(200)?;
    s.record("spec change while deleting", &spec);

    let released = s
        .merge(&item, json!({"metadata": {"finalizers": null}}))
        .await?
        .expect(200)?;
    s.record("finalizers removed", &released);
    let gone = eventually("the object to be gone", 10, async || {
        let r = s.get(&item).await?;
        Ok((r.code == 404).then_some(r))
    })
    .await?;
    s.record("get after release", &gone);
    Ok(())
}

/// CRDs that must be refused: a name that is not `<plural>.<group>`, no
/// storage version, two storage versions.
pub async fn invalid_crds_are_refused(s: &mut Scene) -> Fallible {
    let group = s.group();
    let base = |name: &str| {
        let mut c = crd("Widget", true);
        c["apiVersion"] = json!("apiextensions.k8s.io/v1");
        c["kind"] = json!("CustomResourceDefinition");
        c["metadata"]["name"] = json!(name);
        c["spec"]["group"] = json!(group);
        c
    };
    let mut wrong_name = base(&format!("gizmos.{group}"));
    wrong_name["spec"]["names"]["plural"] = json!("widgets");
    let mut no_storage = base(&format!("widgets.{group}"));
    no_storage["spec"]["versions"][0]["storage"] = json!(false);
    let mut two_storage = base(&format!("widgets.{group}"));
    let mut v2 = two_storage["spec"]["versions"][0].clone();
    v2["name"] = json!("v2");
    two_storage["spec"]["versions"]
        .as_array_mut()
        .ok_or("versions")?
        .push(v2);
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    for (label, body) in [
        ("name is not plural.group", wrong_name),
        ("no storage version", no_storage),
        ("two storage versions", two_storage),
    ] {
        let name = body["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let reply = s.post(path, body).await?;
        if reply.code != 422 {
            // Do not leave it behind on a shared real server.
            let _ = s.delete(&format!("{path}/{name}")).await;
            return Err(
                format!("{label}: expected 422, got {}: {}", reply.code, reply.body).into(),
            );
        }
        s.record(
            label,
            (reply.code, reply.reason(), &reply.body["details"]["name"]),
        );
        s.record(format!("{label}: Status"), &reply);
    }
    Ok(())
}

/// What an operator's discovery sees (`kube::Discovery::run`, the
/// non-aggregated path that 1.20 serves): the group's resources, their
/// kinds, scope and subresources.
pub async fn discovery_through_kube(s: &mut Scene) -> Fallible {
    s.install_crd(crd("Widget", true)).await?;
    s.install_crd(crd("Gadget", false)).await?;
    let group = s.group();
    let discovery = kube::Discovery::new(s.client())
        .filter(&[group.as_str()])
        .run()
        .await?;
    let mut seen = Vec::new();
    for g in discovery.groups() {
        for (resource, caps) in g.recommended_resources() {
            let mut subresources: Vec<String> = caps
                .subresources
                .iter()
                .map(|(r, _)| r.plural.clone())
                .collect();
            subresources.sort();
            let mut verbs = caps.operations.clone();
            verbs.sort();
            seen.push(json!({
                "group": g.name(), "version": resource.version, "kind": resource.kind,
                "plural": resource.plural, "namespaced": caps.scope == kube::discovery::Scope::Namespaced,
                "subresources": subresources, "verbs": verbs,
            }));
        }
    }
    seen.sort_by_key(|v| v["kind"].to_string());
    assert_eq!(seen.len(), 2, "{seen:?}");
    s.record("resources", &seen);
    Ok(())
}

/// Defaults in a CRD's schema: a valid one is kept; `default: null` (for
/// a string that is not nullable) and `default: ""` are where the servers
/// part.
///
/// Version difference: 1.20 refuses `default: ""` for a string (422, "in
/// body must be of type string: \"null\"": it reads the empty string as
/// null), which later versions accept. kube-derive emits exactly that for a
/// `String` field with `#[serde(default)]`, so the examples' Database CRD
/// does not install on 1.20.
pub async fn crd_schema_defaults(s: &mut Scene) -> Fallible {
    let group = s.group();
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let name = format!("widgets.{group}");
    let with_seed = |seed: Value| {
        let mut c = crd("Widget", true);
        c["apiVersion"] = json!("apiextensions.k8s.io/v1");
        c["kind"] = json!("CustomResourceDefinition");
        c["metadata"]["name"] = json!(name);
        c["spec"]["group"] = json!(group);
        c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["seed"] = seed;
        c
    };
    // Each try is removed before the next, which reuses the name.
    let try_seed = async |seed: Value| -> Fallible<(u16, Value)> {
        let reply = s.post(path, with_seed(seed)).await?;
        let stored = reply.body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
            ["spec"]["properties"]["seed"]
            .clone();
        if reply.code == 201 {
            s.delete(&format!("{path}/{name}")).await?.expect(200)?;
            eventually("the CRD to be gone", 30, async || {
                let r = s.get(&format!("{path}/{name}")).await?;
                Ok((r.code == 404).then_some(()))
            })
            .await?;
            Ok((reply.code, stored))
        } else {
            Ok((reply.code, reply.body))
        }
    };
    let valid = try_seed(json!({"type": "string", "default": "x"})).await?;
    let null = try_seed(json!({"type": "string", "default": null})).await?;
    let empty = try_seed(json!({"type": "string", "default": ""})).await?;
    assert_eq!(valid, (201, json!({"type": "string", "default": "x"})));
    assert_eq!(null.0, 201);
    s.record("default: \"x\"", &valid);
    s.record("default: null", &null);
    s.record_known("default: \"\"", &empty, known::VERSION_CRD_EMPTY_DEFAULT);
    Ok(())
}
