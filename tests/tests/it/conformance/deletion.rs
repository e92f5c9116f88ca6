//! Deletion and garbage collection: `DeleteOptions` as query parameters
//! (how kubectl sends `--cascade` and `--dry-run=server`) and in a body,
//! dry-run deletes, the garbage collector's three policies, dangling owner
//! references, validation of owner references and finalizers; and the
//! decoding of built-in kinds against their types.

use integration_tests::scene::{Reply, eventually};
use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

/// A `Status` answer without its message: what a JSON decoding error says
/// is the wording of the server's JSON library (Go's json-iterator there).
fn status_without_message(reply: &Reply) -> Value {
    json!({
        "code": reply.code,
        "reason": reply.body["reason"],
        "status": reply.body["status"],
        "details": reply.body["details"],
    })
}

fn configmap(name: &str, metadata: Value) -> Value {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    if let (Some(m), Some(extra)) = (cm["metadata"].as_object_mut(), metadata.as_object()) {
        m.extend(extra.clone());
    }
    cm
}

/// `DeleteOptions` given as query parameters are honoured and validated
/// like the body's; the body, when there is one, wins.
pub async fn delete_options_as_query_parameters(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let item = format!("{path}/target");
    s.post(&path, configmap("target", json!({})))
        .await?
        .expect(201)?;
    let refused = [
        (
            "unknown policy",
            s.delete(&format!("{item}?propagationPolicy=Bogus")).await?,
            422,
        ),
        (
            "orphanDependents with a policy",
            s.delete(&format!(
                "{item}?propagationPolicy=Orphan&orphanDependents=true"
            ))
            .await?,
            422,
        ),
        (
            "orphanDependents with a policy in the body",
            s.delete_with(
                &item,
                json!({"propagationPolicy": "Background", "orphanDependents": false}),
            )
            .await?,
            422,
        ),
        (
            "unknown policy in the body",
            s.delete_with(&item, json!({"propagationPolicy": "Sideways"}))
                .await?,
            422,
        ),
        (
            "unknown dryRun",
            s.delete(&format!("{item}?dryRun=Bogus")).await?,
            422,
        ),
        (
            "gracePeriodSeconds not a number",
            s.delete(&format!("{item}?gracePeriodSeconds=soon")).await?,
            400,
        ),
    ];
    for (label, reply, code) in refused {
        if reply.code != code {
            return Err(format!(
                "{label}: expected {code}, got {}: {}",
                reply.code, reply.body
            )
            .into());
        }
        s.record(label, &reply);
    }
    s.record("still there", s.get(&item).await?.expect(200)?);

    // A dry run answers as a delete would and changes nothing.
    let dry = s
        .delete(&format!("{item}?dryRun=All&gracePeriodSeconds=0"))
        .await?
        .expect(200)?;
    s.record("dry-run delete", &dry);
    // Any orphanDependents but `0` and `false` is true.
    let dry = s
        .delete(&format!("{item}?dryRun=All&orphanDependents=maybe"))
        .await?
        .expect(200)?;
    s.record("dry-run orphanDependents=maybe", &dry);
    let dry = s
        .delete(&format!("{item}?dryRun=All&orphanDependents=FALSE"))
        .await?
        .expect(200)?;
    s.record("dry-run orphanDependents=FALSE", &dry);
    s.record("after a dry run", s.get(&item).await?.expect(200)?);

    // A body's options win over the query's (the query is not read).
    let kept = s
        .request(
            http::Method::DELETE,
            &format!("{item}?propagationPolicy=Bogus"),
            Some("application/json"),
            Some(json!({"dryRun": ["All"]})),
        )
        .await?
        .expect(200)?;
    s.record("body wins over the query", &kept);
    let deleted = s
        .delete(&format!(
            "{item}?propagationPolicy=Background&gracePeriodSeconds=0"
        ))
        .await?
        .expect(200)?;
    s.record("delete with query options", &deleted);
    s.record("gone", s.get(&item).await?.expect(404)?);

    // deletecollection reads the same options.
    s.post(&path, configmap("many", json!({"labels": {"set": "x"}})))
        .await?
        .expect(201)?;
    let collection = format!("{path}?labelSelector=set%3Dx");
    let refused = s
        .delete(&format!("{collection}&propagationPolicy=Bogus"))
        .await?
        .expect(422)?;
    s.record("deletecollection, unknown policy", &refused);
    let dry = s
        .delete(&format!("{collection}&dryRun=All"))
        .await?
        .expect(200)?;
    s.record(
        "deletecollection, dry run",
        json!([
            dry.body["kind"],
            crate::conformance::builtin::names(&dry.body)
        ]),
    );
    s.record(
        "kept by the dry run",
        s.get(&format!("{path}/many")).await?.expect(200)?,
    );
    Ok(())
}

/// A dry-run delete of an object a finalizer holds answers it marked for
/// deletion (with the finalizer a policy would add) and changes nothing.
pub async fn dry_run_delete_of_a_held_object(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let item = format!("{path}/held");
    s.post(
        &path,
        configmap("held", json!({"finalizers": ["example.com/hold"]})),
    )
    .await?
    .expect(201)?;
    for query in [
        "dryRun=All",
        "dryRun=All&propagationPolicy=Orphan",
        "dryRun=All&propagationPolicy=Foreground",
    ] {
        let dry = s.delete(&format!("{item}?{query}")).await?.expect(200)?;
        assert!(dry.body["metadata"]["deletionTimestamp"].is_string());
        s.record(query, &dry);
    }
    let unchanged = s.get(&item).await?.expect(200)?;
    assert!(
        unchanged.body["metadata"]
            .get("deletionTimestamp")
            .is_none()
    );
    s.record("unchanged", &unchanged);

    // Foreground adds its finalizer even to an object nothing else holds.
    let free = format!("{path}/free");
    s.post(&path, configmap("free", json!({})))
        .await?
        .expect(201)?;
    let dry = s
        .delete(&format!("{free}?dryRun=All&propagationPolicy=Foreground"))
        .await?
        .expect(200)?;
    s.record("dry-run foreground of a free object", &dry);
    s.record("free, unchanged", s.get(&free).await?.expect(200)?);

    // Let go of the held one, so that the namespace can go.
    s.merge(&item, json!({"metadata": {"finalizers": null}}))
        .await?
        .expect(200)?;
    Ok(())
}

/// A deletecollection answers the list as it read it before deleting: a
/// held object without the `deletionTimestamp` it now has, a deleted one
/// at the version it was listed at (not at its deletion's).
pub async fn delete_collection_answers_the_list_it_read(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let held = s
        .post(
            &path,
            configmap(
                "held",
                json!({"labels": {"set": "y"}, "finalizers": ["example.com/hold"]}),
            ),
        )
        .await?
        .expect(201)?;
    let free = s
        .post(&path, configmap("free", json!({"labels": {"set": "y"}})))
        .await?
        .expect(201)?;
    let answer = s
        .delete(&format!("{path}?labelSelector=set%3Dy"))
        .await?
        .expect(200)?;
    let items = answer.body["items"].as_array().cloned().unwrap_or_default();
    let listed: Vec<(Value, Value, bool)> = items
        .iter()
        .map(|i| {
            let meta = &i["metadata"];
            (
                meta["name"].clone(),
                meta["resourceVersion"].clone(),
                meta.get("deletionTimestamp").is_some(),
            )
        })
        .collect();
    let version = |reply: &Reply| reply.body["metadata"]["resourceVersion"].clone();
    assert_eq!(
        listed,
        [
            (json!("free"), version(&free), false),
            (json!("held"), version(&held), false),
        ],
        "the items as listed"
    );
    s.record(
        "answer: names and whether marked",
        json!(
            listed
                .iter()
                .map(|(name, _, marked)| json!([name, marked]))
                .collect::<Vec<_>>()
        ),
    );
    let now = s.get(&format!("{path}/held")).await?.expect(200)?;
    assert!(now.body["metadata"]["deletionTimestamp"].is_string());
    s.record(
        "held, now marked",
        now.body["metadata"]["finalizers"].clone(),
    );
    s.get(&format!("{path}/free")).await?.expect(404)?;
    s.merge(
        &format!("{path}/held"),
        json!({"metadata": {"finalizers": null}}),
    )
    .await?
    .expect(200)?;
    Ok(())
}

async fn owner_and_child(s: &Scene, owner: &str, child_meta: Value) -> Fallible<(String, String)> {
    let path = s.core("configmaps");
    let created = s
        .post(&path, configmap(owner, json!({})))
        .await?
        .expect(201)?;
    let uid = created.body["metadata"]["uid"].clone();
    let child = format!("{owner}-child");
    let mut meta = json!({"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
        "name": owner, "uid": uid, "blockOwnerDeletion": true}]});
    if let (Some(m), Some(extra)) = (meta.as_object_mut(), child_meta.as_object()) {
        m.extend(extra.clone());
    }
    s.post(&path, configmap(&child, meta)).await?.expect(201)?;
    Ok((format!("{path}/{owner}"), format!("{path}/{child}")))
}

/// `propagationPolicy` as a query parameter (kubectl's `--cascade`):
/// `Orphan` keeps the dependent without its owner reference; `Foreground`
/// keeps the owner (finalizer `foregroundDeletion`) while a blocking
/// dependent is left, then deletes it.
pub async fn cascade_as_query_parameter(s: &mut Scene) -> Fallible {
    let (owner, child) = owner_and_child(s, "orphaner", json!({})).await?;
    let orphaning = s
        .delete(&format!("{owner}?propagationPolicy=Orphan"))
        .await?
        .expect(200)?;
    s.record("orphan delete", &orphaning);
    let orphan = eventually("the owner gone, the dependent orphaned", 20, async || {
        let c = s.get(&child).await?.expect(200)?;
        let o = s.get(&owner).await?;
        Ok((o.code == 404 && c.body["metadata"].get("ownerReferences").is_none()).then_some(c))
    })
    .await?;
    s.record("orphan", &orphan);

    let (owner, child) =
        owner_and_child(s, "foreground", json!({"finalizers": ["example.com/hold"]})).await?;
    let deleting = s
        .delete(&format!("{owner}?propagationPolicy=Foreground"))
        .await?
        .expect(200)?;
    assert_eq!(
        deleting.body["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    s.record("foreground delete", &deleting);
    let terminating = eventually("the dependent to be deleted", 20, async || {
        let c = s.get(&child).await?.expect(200)?;
        Ok(c.body["metadata"]["deletionTimestamp"]
            .is_string()
            .then_some(c))
    })
    .await?;
    s.record("dependent, held by its finalizer", &terminating);
    let waiting = s.get(&owner).await?.expect(200)?;
    s.record("owner waits for it", &waiting);
    s.merge(&child, json!({"metadata": {"finalizers": null}}))
        .await?
        .expect(200)?;
    eventually("the dependent, then the owner, to go", 20, async || {
        let (c, o) = (s.get(&child).await?, s.get(&owner).await?);
        Ok((c.code == 404 && o.code == 404).then_some(()))
    })
    .await?;
    s.record("owner after its dependent went", s.get(&owner).await?);
    Ok(())
}

/// An object whose only owner does not exist is collected.
pub async fn dangling_owner_reference_is_collected(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let created = s
        .post(
            &path,
            configmap(
                "dangling",
                json!({"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                    "name": "nobody", "uid": "00000000-0000-0000-0000-00000000dead"}]}),
            ),
        )
        .await?
        .expect(201)?;
    s.record("created", &created);
    let gone = eventually(
        "the dependent of no owner to be collected",
        30,
        async || {
            let r = s.get(&format!("{path}/dangling")).await?;
            Ok((r.code == 404).then_some(r))
        },
    )
    .await?;
    s.record("collected", &gone);

    // An owner is looked up by name: the uid of an existing object under
    // another name is no owner.
    let real = s
        .post(&path, configmap("real-owner", json!({})))
        .await?
        .expect(201)?;
    s.post(
        &path,
        configmap(
            "misled",
            json!({"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                "name": "impostor", "uid": real.body["metadata"]["uid"]}]}),
        ),
    )
    .await?
    .expect(201)?;
    let gone = eventually(
        "the dependent of a misnamed owner to be collected",
        30,
        async || {
            let r = s.get(&format!("{path}/misled")).await?;
            Ok((r.code == 404).then_some(r))
        },
    )
    .await?;
    s.record("misnamed owner: collected", &gone);
    s.record(
        "the real owner stays",
        s.get(&format!("{path}/real-owner")).await?.expect(200)?,
    );
    Ok(())
}

/// Owner references and finalizers are validated on write.
pub async fn owner_references_and_finalizers_are_validated(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let oref = |name: &str, uid: &str, controller: bool| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid,
               "controller": controller})
    };
    let cases = [
        (
            "owner reference without uid",
            configmap(
                "a",
                json!({"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}]}),
            ),
        ),
        (
            "owner reference without apiVersion, kind and name",
            configmap("b", json!({"ownerReferences": [{"uid": "u-1"}]})),
        ),
        (
            "two controllers",
            configmap(
                "c",
                json!({"ownerReferences": [oref("x", "u-1", true), oref("y", "u-2", true)]}),
            ),
        ),
        (
            "a finalizer that is not a qualified name",
            configmap("d", json!({"finalizers": ["bad name!"]})),
        ),
        (
            "an unqualified finalizer",
            configmap("e", json!({"finalizers": ["unqualified"]})),
        ),
    ];
    for (label, body) in cases {
        let reply = s.post(&path, body).await?.expect(422)?;
        if label == "two controllers" {
            // 1.20 prints the references as a Go struct dump (pointers
            // included): the cause's message is not compared.
            let mut status = status_without_message(&reply);
            for cause in status["details"]["causes"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                cause.as_object_mut().map(|c| c.remove("message"));
            }
            s.record(label, status);
        } else {
            s.record(label, &reply);
        }
    }
    // Valid ones pass: a standard finalizer, a qualified one, one controller.
    let ok = s
        .post(
            &format!("{path}?dryRun=All"),
            configmap(
                "f",
                json!({"finalizers": ["kubernetes", "example.com/x", "orphan"],
                       "ownerReferences": [oref("x", "u-1", true), oref("y", "u-2", false)]}),
            ),
        )
        .await?
        .expect(201)?;
    s.record("valid", &ok);
    // An update is checked too.
    s.post(&path, configmap("g", json!({})))
        .await?
        .expect(201)?;
    let update = s
        .merge(
            &format!("{path}/g"),
            json!({"metadata": {"finalizers": ["no good"]}}),
        )
        .await?
        .expect(422)?;
    s.record("update", &update);
    Ok(())
}

/// Built-in kinds are decoded against their types: a value of the wrong
/// JSON type is 400 BadRequest, not stored as sent; unknown fields are
/// dropped.
pub async fn builtin_kinds_are_decoded_against_their_types(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let deployments = format!("/apis/apps/v1/namespaces/{}/deployments", s.ns);
    let deployment = |replicas: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "unknownMeta": 1},
               "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "web", "image": "nginx",
                                                              "unknownField": "x"}]}}},
               "unknownTop": {"a": 1}})
    };
    let cases = [
        (
            "data a string",
            s.post(
                &path,
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "a"}, "data": "x"}),
            )
            .await?,
        ),
        (
            "labels a list",
            s.post(
                &path,
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "a", "labels": ["x"]}}),
            )
            .await?,
        ),
        (
            "a data value a number",
            s.post(
                &path,
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "a"}, "data": {"k": 1}}),
            )
            .await?,
        ),
        (
            "binaryData not base64",
            s.post(
                &path,
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "a"}, "binaryData": {"k": "!!"}}),
            )
            .await?,
        ),
        (
            "replicas a float",
            s.post(&deployments, deployment(json!(2.0))).await?,
        ),
        (
            "replicas a string",
            s.post(&deployments, deployment(json!("2"))).await?,
        ),
    ];
    for (label, reply) in cases {
        if reply.code != 400 {
            return Err(
                format!("{label}: expected 400, got {}: {}", reply.code, reply.body).into(),
            );
        }
        s.record(label, status_without_message(&reply));
    }
    let created = s
        .post(&deployments, deployment(json!(2)))
        .await?
        .expect(201)?;
    assert!(created.body.get("unknownTop").is_none(), "{}", created.body);
    assert!(created.body["metadata"].get("unknownMeta").is_none());
    s.record(
        "unknown fields dropped",
        json!([
            created.body["metadata"].get("unknownMeta"),
            created.body.get("unknownTop"),
            // (the container's defaults are another matter)
            created.body["spec"]["template"]["spec"]["containers"][0].get("unknownField"),
            created.body["spec"]["template"]["spec"]["containers"][0]["image"],
            created.body["spec"]["replicas"],
        ]),
    );
    // An update is decoded too.
    s.post(
        &path,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "b"}, "data": {"k": "v"}}),
    )
    .await?
    .expect(201)?;
    let mut body = s.get(&format!("{path}/b")).await?.expect(200)?.body;
    body["data"] = json!(["k"]);
    let update = s.put(&format!("{path}/b"), body).await?;
    if update.code != 400 {
        return Err(format!("update: expected 400, got {}: {}", update.code, update.body).into());
    }
    s.record("update with data a list", status_without_message(&update));
    // A patch whose result does not decode is 422, its cause the patch
    // (the message holds the patched object and the decoder's words).
    let patches = [
        (
            "merge patch",
            s.merge(&format!("{path}/b"), json!({"data": "x"})).await?,
        ),
        (
            "JSON patch",
            s.patch(
                &format!("{path}/b"),
                "application/json-patch+json",
                json!([{"op": "add", "path": "/data", "value": "x"}]),
            )
            .await?,
        ),
    ];
    for (label, reply) in patches {
        let mut status = status_without_message(&reply.clone().expect(422)?);
        for cause in status["details"]["causes"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            cause.as_object_mut().map(|c| c.remove("message"));
        }
        s.record(label, status);
    }
    s.record("unchanged", s.get(&format!("{path}/b")).await?.expect(200)?);
    Ok(())
}
