//! Built-in kinds: CRUD, Status errors, selectors, paging, conflicts,
//! collections, namespaces, generation of a Deployment.

use integration_tests::scene::eventually;
use integration_tests::{Fallible, Scene};

use serde_json::{Value, json};

/// A ConfigMap; empty maps are left out (see `known::EMPTY_MAP_OMITTED`).
fn configmap(name: &str, labels: Value, data: Value) -> Value {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    if labels.as_object().is_some_and(|m| !m.is_empty()) {
        cm["metadata"]["labels"] = labels;
    }
    if data.as_object().is_some_and(|m| !m.is_empty()) {
        cm["data"] = data;
    }
    cm
}

/// The names of a list's items, in the order the server gave them.
pub fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// Create, read, replace, merge-patch and delete a ConfigMap; the answers,
/// codes and the shape of the delete answer (a `Status` for a kind without
/// graceful deletion).
pub async fn configmap_lifecycle(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let item = format!("{path}/settings");
    let created = s
        .post(
            &path,
            configmap("settings", json!({"app": "web"}), json!({"k": "v"})),
        )
        .await?
        .expect(201)?;
    s.record("create", &created);

    let got = s.get(&item).await?.expect(200)?;
    assert_eq!(got.body, created.body, "GET returns what POST returned");
    s.record("get", &got);

    let mut replaced = got.body.clone();
    replaced["data"] = json!({"k": "v2", "other": "x"});
    let replaced = s.put(&item, replaced).await?.expect(200)?;
    assert_ne!(
        replaced.rv(),
        created.rv(),
        "an update moves resourceVersion"
    );
    s.record("replace", &replaced);

    let patched = s
        .merge(&item, json!({"data": {"extra": "1", "k": null}}))
        .await?
        .expect(200)?;
    assert_eq!(patched.body["data"], json!({"extra": "1", "other": "x"}));
    s.record("merge patch", &patched);

    // A no-op patch changes nothing, not even resourceVersion.
    let noop = s
        .merge(&item, json!({"data": {"extra": "1"}}))
        .await?
        .expect(200)?;
    assert_eq!(
        noop.rv(),
        patched.rv(),
        "a no-op write keeps resourceVersion"
    );

    let deleted = s.delete(&item).await?.expect(200)?;
    // Deleted at once: a Status, not the object.
    assert_eq!(deleted.body["kind"], "Status");
    assert_eq!(deleted.body["status"], "Success");
    s.record("delete", &deleted);
    s.record("get after delete", s.get(&item).await?.expect(404)?);
    Ok(())
}

/// The `Status` of each common client mistake: code, reason, message and
/// details.
pub async fn error_statuses(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    s.post(&path, configmap("taken", json!({}), json!({})))
        .await?
        .expect(201)?;

    let cases = [
        ("get missing", s.get(&format!("{path}/nope")).await?, 404),
        (
            "too long a name",
            s.post(&path, configmap(&"n".repeat(254), json!({}), json!({})))
                .await?,
            422,
        ),
        (
            "create existing",
            s.post(&path, configmap("taken", json!({}), json!({})))
                .await?,
            409,
        ),
        (
            "create in a missing namespace",
            s.post(
                &format!("/api/v1/namespaces/missing-{}/configmaps", s.token),
                configmap("x", json!({}), json!({})),
            )
            .await?,
            404,
        ),
        (
            "invalid name",
            s.post(&path, configmap("Bad_Name", json!({}), json!({})))
                .await?,
            422,
        ),
        (
            "namespace of the body differs",
            s.post(
                &path,
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "x", "namespace": "elsewhere"}}),
            )
            .await?,
            400,
        ),
        (
            "name of the body differs on PUT",
            s.put(
                &format!("{path}/taken"),
                configmap("other", json!({}), json!({})),
            )
            .await?,
            400,
        ),
        (
            "PUT of a missing ConfigMap",
            s.put(
                &format!("{path}/absent"),
                configmap("absent", json!({}), json!({})),
            )
            .await?,
            404,
        ),
        (
            "merge patch of a missing ConfigMap",
            s.merge(&format!("{path}/absent"), json!({"data": {"a": "b"}}))
                .await?,
            404,
        ),
        (
            "delete missing",
            s.delete(&format!("{path}/absent")).await?,
            404,
        ),
    ];
    for (label, reply, code) in cases {
        if reply.code != code {
            return Err(format!(
                "{label}: expected {code}, got {}: {}",
                reply.code, reply.body
            )
            .into());
        }
        s.record(label, &reply);
    }
    let unknown = s.get(&s.core("widgets")).await?.expect(404)?;
    s.record(
        "unknown resource",
        (unknown.code, unknown.reason(), &unknown.body["message"]),
    );
    s.record("unknown resource: Status", &unknown);
    let bad_label = s
        .post(&path, configmap("x", json!({"a": "not valid!"}), json!({})))
        .await?;
    s.record("invalid label value", &bad_label);

    // Malformed JSON: the decoder's message differs between versions, the
    // code and reason do not.
    let bad = s
        .request(
            http::Method::POST,
            &path,
            Some("application/json"),
            Some(Value::from("{")),
        )
        .await?
        .expect(400)?;
    s.record("malformed JSON", (bad.code, bad.reason()));
    Ok(())
}

/// Empty maps in a built-in object: what the server stores and answers.
pub async fn empty_maps_are_dropped(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let created = s
        .post(
            &path,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "empty", "labels": {}, "annotations": {}}, "data": {}}),
        )
        .await?
        .expect(201)?;
    s.record("create", &created);
    let got = s.get(&format!("{path}/empty")).await?.expect(200)?;
    s.record("get", &got);
    Ok(())
}

/// `generateName`: a name made of the prefix and five characters.
pub async fn generate_name(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let made = s
        .post(
            &path,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "web-"}}),
        )
        .await?
        .expect(201)?;
    let name = made.body["metadata"]["name"].as_str().unwrap_or_default();
    assert!(
        name.starts_with("web-") && name.len() == "web-".len() + 5,
        "{name}"
    );
    assert!(
        name[4..]
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
        "{name}"
    );
    s.record("created", &made);
    Ok(())
}

/// Label selectors (every operator) and field selectors (the supported
/// fields, and the error for the others), in list order.
pub async fn label_and_field_selectors(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    for (name, labels) in [
        ("a", json!({"app": "web", "tier": "front"})),
        ("b", json!({"app": "web", "tier": "back"})),
        ("c", json!({"app": "db"})),
        ("d", json!({})),
    ] {
        s.post(&path, configmap(name, labels, json!({})))
            .await?
            .expect(201)?;
    }
    let secrets = s.core("secrets");
    for (name, ty) in [("s1", "Opaque"), ("s2", "example.com/custom")] {
        s.post(
            &secrets,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": ty}),
        )
        .await?
        .expect(201)?;
    }

    let queries = [
        ("configmaps", "labelSelector=app%3Dweb", vec!["a", "b"]),
        ("configmaps", "labelSelector=app%3D%3Dweb", vec!["a", "b"]),
        ("configmaps", "labelSelector=app!%3Dweb", vec!["c", "d"]),
        (
            "configmaps",
            "labelSelector=tier%20in%20(front,mid)",
            vec!["a"],
        ),
        (
            "configmaps",
            "labelSelector=tier%20notin%20(front)",
            vec!["b", "c", "d"],
        ),
        ("configmaps", "labelSelector=tier", vec!["a", "b"]),
        ("configmaps", "labelSelector=!tier", vec!["c", "d"]),
        (
            "configmaps",
            "labelSelector=app%3Dweb,tier!%3Dfront",
            vec!["b"],
        ),
        ("configmaps", "fieldSelector=metadata.name%3Db", vec!["b"]),
        (
            "configmaps",
            "fieldSelector=metadata.name!%3Db",
            vec!["a", "c", "d"],
        ),
        (
            "configmaps",
            "fieldSelector=metadata.namespace%3Dnope",
            vec![],
        ),
        ("secrets", "fieldSelector=type%3DOpaque", vec!["s1"]),
        (
            "secrets",
            "fieldSelector=type!%3DOpaque,metadata.name%3Ds2",
            vec!["s2"],
        ),
    ];
    for (resource, query, want) in queries {
        let list = s
            .get(&format!("{}?{query}", s.core(resource)))
            .await?
            .expect(200)?;
        let got = names(&list.body);
        // Secrets of the namespace's service account may exist on the real
        // server (the token controller): only ours count.
        let got: Vec<String> = if resource == "secrets" {
            got.into_iter()
                .filter(|n| n.starts_with('s') && n.len() == 2)
                .collect()
        } else {
            got
        };
        assert_eq!(got, want, "{resource}?{query}");
        s.record(format!("{resource}?{query}"), &got);
    }

    let bad_field = s
        .get(&format!("{path}?fieldSelector=data.k%3Dv"))
        .await?
        .expect(400)?;
    s.record(
        "unsupported field selector",
        (bad_field.code, bad_field.reason()),
    );
    s.record(
        "unsupported field selector: message",
        &bad_field.body["message"],
    );
    let bad_label = s
        .get(&format!("{path}?labelSelector=app%20in%20(web"))
        .await?
        .expect(400)?;
    s.record(
        "malformed label selector",
        (bad_label.code, bad_label.reason()),
    );
    Ok(())
}

/// `limit` and `continue`: pages in name order, `remainingItemCount`
/// (only without selectors), the last page without a token.
pub async fn pagination(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    for name in ["e", "c", "a", "d", "b"] {
        s.post(&path, configmap(name, json!({"paged": "yes"}), json!({})))
            .await?
            .expect(201)?;
    }
    let plain = pages(s, &format!("{path}?limit=2")).await?;
    assert_eq!(plain[0]["remainingItemCount"], 3);
    s.record("pages", &plain);
    let selected = pages(s, &format!("{path}?limit=2&labelSelector=paged%3Dyes")).await?;
    s.record("pages with a selector", &selected);

    let bad = s
        .get(&format!("{path}?limit=2&continue=not-a-token"))
        .await?
        .expect(400)?;
    s.record("bad continue token", (bad.code, bad.reason()));
    Ok(())
}

/// Follows `continue` from `first` to the end: each page's names, token
/// and remainingItemCount.
async fn pages(s: &Scene, first: &str) -> Fallible<Vec<Value>> {
    let mut pages = Vec::new();
    let mut token = String::new();
    loop {
        let mut url = first.to_owned();
        if !token.is_empty() {
            url.push_str(&format!("&continue={token}"));
        }
        let page = s.get(&url).await?.expect(200)?;
        let meta = &page.body["metadata"];
        pages.push(json!({
            "names": names(&page.body),
            "continue": meta["continue"],
            "remainingItemCount": meta["remainingItemCount"],
        }));
        token = meta["continue"].as_str().unwrap_or_default().to_owned();
        if token.is_empty() || pages.len() > 5 {
            break;
        }
    }
    let all: Vec<Value> = pages
        .iter()
        .flat_map(|p| p["names"].as_array().cloned().unwrap_or_default())
        .collect();
    assert_eq!(
        all,
        json!(["a", "b", "c", "d", "e"])
            .as_array()
            .cloned()
            .unwrap_or_default()
    );
    assert_eq!(pages.len(), 3);
    Ok(pages)
}

/// Optimistic concurrency: a stale `resourceVersion` on PUT and on a merge
/// patch, delete preconditions, and an unconditional PUT.
pub async fn conflicts_and_preconditions(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let item = format!("{path}/shared");
    let v1 = s
        .post(&path, configmap("shared", json!({}), json!({"n": "1"})))
        .await?
        .expect(201)?;
    let uid = v1.body["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let stale_rv = v1.rv();
    let v2 = s
        .merge(&item, json!({"data": {"n": "2"}}))
        .await?
        .expect(200)?;
    let fresh_rv = v2.rv();

    let mut stale = v1.body.clone();
    stale["data"] = json!({"n": "stale"});
    s.record(
        "PUT with a stale resourceVersion",
        s.put(&item, stale).await?.expect(409)?,
    );
    s.record(
        "merge patch with a stale resourceVersion",
        s.merge(
            &item,
            json!({"metadata": {"resourceVersion": stale_rv}, "data": {"n": "x"}}),
        )
        .await?
        .expect(409)?,
    );
    // The messages carry the uid and versions: hide them before comparing.
    let hide = |mut r: integration_tests::scene::Reply| {
        if let Some(m) = r.body["message"].as_str() {
            let m = m
                .replace(&uid, "<uid>")
                .replace(&format!("({fresh_rv})"), "(<fresh-rv>)")
                .replace(&format!("({stale_rv})"), "(<stale-rv>)");
            r.body["message"] = Value::from(m);
        }
        r
    };
    let wrong_uid = s
        .delete_with(
            &item,
            json!({"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}),
        )
        .await?
        .expect(409)?;
    s.record(
        "delete with a wrong uid precondition",
        (wrong_uid.code, wrong_uid.reason()),
    );
    s.record(
        "delete with a wrong uid precondition: Status",
        hide(wrong_uid),
    );
    let stale_delete = s
        .delete_with(
            &item,
            json!({"preconditions": {"resourceVersion": stale_rv}}),
        )
        .await?
        .expect(409)?;
    s.record(
        "delete with a stale resourceVersion precondition",
        (stale_delete.code, stale_delete.reason()),
    );
    s.record(
        "delete with a stale resourceVersion precondition: Status",
        hide(stale_delete),
    );

    // Without resourceVersion a PUT is unconditional for ConfigMaps.
    let mut blind = v1.body.clone();
    blind["metadata"]
        .as_object_mut()
        .ok_or("metadata")?
        .remove("resourceVersion");
    blind["data"] = json!({"n": "blind"});
    let blind = s.put(&item, blind).await?.expect(200)?;
    assert_eq!(blind.body["data"]["n"], "blind");
    s.record("unconditional PUT", &blind);

    let ok = s
        .delete_with(
            &item,
            json!({"preconditions": {"uid": uid, "resourceVersion": blind.rv()}}),
        )
        .await?
        .expect(200)?;
    s.record("delete with matching preconditions", &ok);
    Ok(())
}

/// DELETE on a collection with a label selector: what it answers and what
/// is left.
pub async fn delete_collection(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    for (name, doomed) in [("a", "yes"), ("b", "no"), ("c", "yes")] {
        s.post(
            &path,
            configmap(name, json!({"doomed": doomed}), json!({"k": "v"})),
        )
        .await?
        .expect(201)?;
    }
    let answer = s
        .delete(&format!("{path}?labelSelector=doomed%3Dyes"))
        .await?
        .expect(200)?;
    assert_eq!(names(&answer.body), ["a", "c"]);
    s.record(
        "deleted",
        (answer.code, &answer.body["kind"], names(&answer.body)),
    );
    s.record("delete collection answer", &answer);
    let left = s
        .get(&format!("{path}?labelSelector=doomed"))
        .await?
        .expect(200)?;
    assert_eq!(names(&left.body), ["b"]);
    s.record("left", names(&left.body));
    Ok(())
}

/// Deleting a namespace: `Terminating`, new content refused, its objects
/// and then the namespace itself gone.
pub async fn namespace_lifecycle(s: &mut Scene) -> Fallible {
    let ns = format!("{}-x", s.ns);
    let ns_path = format!("/api/v1/namespaces/{ns}");
    let created = s
        .post(
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )
        .await?
        .expect(201)?;
    s.record("create", &created);
    let cms = format!("{ns_path}/configmaps");
    s.post(&cms, configmap("inside", json!({}), json!({})))
        .await?
        .expect(201)?;

    let deleting = s.delete(&ns_path).await?.expect(200)?;
    s.record("delete", &deleting);
    let refused = s
        .post(&cms, configmap("late", json!({}), json!({})))
        .await?;
    // 403 with the NamespaceTerminating cause, naming the object.
    s.record("create while terminating", &refused);

    let gone = eventually("the namespace to be gone", 60, async || {
        let r = s.get(&ns_path).await?;
        Ok((r.code == 404).then_some(r))
    })
    .await?;
    s.record("get after deletion", &gone);
    Ok(())
}

/// A Deployment: `generation` moves with the spec only, `/status` writes
/// status only.
pub async fn deployment_generation_and_status(s: &mut Scene) -> Fallible {
    let path = s.core("deployments").replace("/api/v1/", "/apis/apps/v1/");
    let item = format!("{path}/web");
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1"}]}
            }
        }
    });
    let created = s.post(&path, deployment).await?.expect(201)?;
    let generation = |r: &integration_tests::scene::Reply| r.body["metadata"]["generation"].clone();
    assert_eq!(generation(&created), 1);
    // Defaults differ across versions (1.34 adds fields): compare the spec
    // we sent and the generation, not the whole object.
    s.record("created generation", generation(&created));

    let scaled = s
        .merge(&item, json!({"spec": {"replicas": 3}}))
        .await?
        .expect(200)?;
    assert_eq!(generation(&scaled), 2);
    s.record("after a spec change", generation(&scaled));

    let labelled = s
        .merge(&item, json!({"metadata": {"labels": {"x": "y"}}}))
        .await?
        .expect(200)?;
    assert_eq!(generation(&labelled), 2);
    s.record("after a label change", generation(&labelled));

    let status = s
        .merge(
            &format!("{item}/status"),
            json!({"spec": {"replicas": 9}, "status": {"replicas": 3, "readyReplicas": 3}}),
        )
        .await?
        .expect(200)?;
    assert_eq!(
        status.body["spec"]["replicas"], 3,
        "/status ignores the spec"
    );
    assert_eq!(status.body["status"]["readyReplicas"], 3);
    s.record(
        "after a status write",
        json!([
            generation(&status),
            status.body["spec"]["replicas"],
            status.body["status"]
        ]),
    );

    let ignored = s
        .merge(&item, json!({"status": {"readyReplicas": 0}}))
        .await?
        .expect(200)?;
    assert_eq!(
        ignored.body["status"]["readyReplicas"], 3,
        "the main resource ignores status"
    );
    s.record(
        "status through the main resource",
        ignored.body["status"].clone(),
    );
    Ok(())
}

/// Quantities of a built-in kind are stored in canonical form (`1000m` as
/// `1`, `1024Mi` as `1Gi`, `0.5` as `500m`); a dry-run apply of the same
/// configuration answers the object unchanged and stores nothing; a Job's
/// pod template is immutable.
pub async fn quantities_dry_run_apply_and_immutable_job_template(s: &mut Scene) -> Fallible {
    let path = s.core("deployments").replace("/api/v1/", "/apis/apps/v1/");
    let item = format!("{path}/sized");
    let limits = json!({"cpu": "1000m", "memory": "1024Mi", "ephemeral-storage": "1.5Gi"});
    let requests = json!({"cpu": "0.5", "memory": "1000Ki", "ephemeral-storage": "2048"});
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "sized"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "sized"}},
            "template": {
                "metadata": {"labels": {"app": "sized"}},
                "spec": {"containers": [
                    {"name": "app", "image": "nginx:1",
                        "resources": {"limits": limits, "requests": requests}},
                    // Kept as written (the parser's canonical-looking
                    // forms), and rounded up to milli.
                    {"name": "odd", "image": "nginx:1", "resources": {"limits":
                        {"cpu": "0.0000000001", "memory": "+5", "ephemeral-storage": "1E3"}}}
                ]}
            }
        }
    });
    let applied = s
        .patch(
            &format!("{item}?fieldManager=sizer"),
            "application/apply-patch+yaml",
            deployment.clone(),
        )
        .await?
        .expect(201)?;
    let resources = |r: &integration_tests::scene::Reply| {
        let containers = &r.body["spec"]["template"]["spec"]["containers"];
        json!([containers[0]["resources"], containers[1]["resources"]])
    };
    assert_eq!(resources(&applied)[0]["limits"]["cpu"], "1");
    assert_eq!(resources(&applied)[0]["limits"]["memory"], "1Gi");
    assert_eq!(resources(&applied)[0]["requests"]["cpu"], "500m");
    assert_eq!(resources(&applied)[1]["limits"]["cpu"], "1m");
    s.record("stored quantities", resources(&applied));

    let dry = s
        .patch(
            &format!("{item}?fieldManager=sizer&dryRun=All"),
            "application/apply-patch+yaml",
            deployment,
        )
        .await?
        .expect(200)?;
    assert_eq!(
        dry.rv(),
        applied.rv(),
        "a no-op dry run answers the object as stored"
    );
    s.record("dry-run quantities", resources(&dry));
    let got = s.get(&item).await?.expect(200)?;
    assert_eq!(got.rv(), applied.rv(), "a dry run stores nothing");

    let jobs = s.core("jobs").replace("/api/v1/", "/apis/batch/v1/");
    let job = |image: &str| {
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "m", "image": image}]}}}})
    };
    s.patch(
        &format!("{jobs}/once?fieldManager=sizer"),
        "application/apply-patch+yaml",
        job("busybox:1"),
    )
    .await?
    .expect(201)?;
    let changed = s
        .patch(
            &format!("{jobs}/once?fieldManager=sizer"),
            "application/apply-patch+yaml",
            job("busybox:2"),
        )
        .await?
        .expect(422)?;
    assert!(
        changed.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("field is immutable")),
        "{}",
        changed.body
    );
    s.record("a changed Job template", (changed.code, changed.reason()));
    Ok(())
}
