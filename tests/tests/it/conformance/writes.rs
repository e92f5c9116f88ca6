//! Writes: the options of create, update and patch, what a create may
//! carry (generateName, resourceVersion, names, metadata), uid
//! preconditions, managedFields written by the client, Leases, a create in
//! a terminating namespace, and CRD schema `pattern`/`format`.
//!
//! Where the real server lists causes in Go map order (annotations, schema
//! violations), the causes are compared sorted.

use http::{Method, Request};
use integration_tests::scene::{Reply, eventually};
use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}})
}

/// Code, reason, and each cause's field and reason, sorted (what is
/// compared where a message names a random name or causes come in map
/// order).
fn shape(r: &Reply) -> Value {
    let mut causes: Vec<Value> = r.body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!([c["field"], c["reason"]]))
        .collect();
    causes.sort_by_key(Value::to_string);
    json!({"code": r.code, "reason": r.reason(), "causes": causes})
}

/// The causes sorted, with their messages.
fn sorted_causes(r: &Reply) -> Value {
    let mut causes: Vec<Value> = r.body["details"]["causes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    causes.sort_by_key(Value::to_string);
    json!({"code": r.code, "reason": r.reason(), "causes": causes})
}

/// Manager and operation of each managedFields entry, and whether it has a
/// time.
fn managers(object: &Value) -> Value {
    match object["metadata"].get("managedFields") {
        None => Value::Null,
        Some(list) => list
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| json!([m["manager"], m["operation"], m.get("time").is_some()]))
            .collect(),
    }
}

/// Sends `body` with a `User-Agent` of our choosing.
async fn send_as(
    s: &Scene,
    agent: &str,
    method: Method,
    path: &str,
    content_type: &str,
    body: &Value,
) -> Fallible<Reply> {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("accept", "application/json")
        .header("content-type", content_type)
        .header("user-agent", agent)
        .body(kube::client::Body::from(serde_json::to_vec(body)?))?;
    let response = s.client().send(request).await?;
    let code = response.status().as_u16();
    let bytes = response.into_body().collect_bytes().await?;
    Ok(Reply {
        code,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    })
}

/// `dryRun` other than `All`, a `fieldManager` too long or unprintable, on
/// create, update, patch and apply: 422 with the options kind.
pub async fn write_options_are_validated(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let item = format!("{path}/opts");
    s.post(&path, configmap("opts")).await?.expect(201)?;
    let long = "m".repeat(129);
    let cases = [
        (
            "create dryRun=Foo",
            s.post(&format!("{path}?dryRun=Foo"), configmap("x"))
                .await?,
        ),
        (
            "update dryRun=Foo",
            s.put(&format!("{item}?dryRun=Foo"), configmap("opts"))
                .await?,
        ),
        (
            "patch dryRun=All&dryRun=Foo",
            s.merge(
                &format!("{item}?dryRun=All&dryRun=Foo"),
                json!({"data": {"b": "2"}}),
            )
            .await?,
        ),
        (
            "patch dryRun empty",
            s.merge(&format!("{item}?dryRun="), json!({"data": {"b": "2"}}))
                .await?,
        ),
        (
            "create fieldManager of 129 bytes",
            s.post(&format!("{path}?fieldManager={long}"), configmap("x"))
                .await?,
        ),
        (
            "update fieldManager of 129 bytes",
            s.put(&format!("{item}?fieldManager={long}"), configmap("opts"))
                .await?,
        ),
        (
            "patch fieldManager of 129 bytes",
            s.merge(
                &format!("{item}?fieldManager={long}"),
                json!({"data": {"b": "2"}}),
            )
            .await?,
        ),
        (
            "apply fieldManager of 129 bytes",
            s.patch(
                &format!("{item}?fieldManager={long}"),
                "application/apply-patch+yaml",
                configmap("opts"),
            )
            .await?,
        ),
        (
            "fieldManager with a newline",
            s.post(&format!("{path}?fieldManager=a%0Ab"), configmap("x"))
                .await?,
        ),
        (
            "dryRun=Foo and a long fieldManager",
            s.post(
                &format!("{path}?dryRun=Foo&fieldManager={long}"),
                configmap("x"),
            )
            .await?,
        ),
    ];
    for (label, reply) in cases {
        assert_eq!(reply.code, 422, "{label}: {}", reply.body);
        s.record(label, &reply);
    }
    let ok = s
        .post(
            &format!("{path}?fieldManager={}", "m".repeat(128)),
            configmap("ok"),
        )
        .await?
        .expect(201)?;
    s.record("fieldManager of 128 bytes", &ok.body["metadata"]["name"]);
    let dry = s
        .post(&format!("{path}?dryRun=All&dryRun=All"), configmap("dry"))
        .await?
        .expect(201)?;
    s.record("dryRun=All twice", &dry.body["metadata"]["name"]);
    s.get(&format!("{path}/dry")).await?.expect(404)?;
    Ok(())
}

/// generateName longer than 58 characters is cut, an invalid one is a cause
/// on `metadata.generateName`, a resourceVersion on a create is refused by
/// storage (500, no reason) unless it is a dry run.
pub async fn create_rules(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let prefix = "g".repeat(70);
    let made = s
        .post(
            &path,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": prefix}}),
        )
        .await?
        .expect(201)?;
    let name = made.body["metadata"]["name"].as_str().unwrap_or_default();
    assert_eq!(name.len(), 63, "{name}");
    assert!(name.starts_with(&prefix[..58]), "{name}");
    s.record(
        "long generateName",
        json!({"length": name.len(), "kept": name[..58] == prefix[..58],
               "generateName": made.body["metadata"]["generateName"]}),
    );

    let bad = s
        .post(
            &path,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "Bad_"}}),
        )
        .await?
        .expect(422)?;
    s.record("invalid generateName", shape(&bad));
    s.record(
        "invalid generateName: its cause",
        &bad.body["details"]["causes"][0],
    );
    let bad_dot = s
        .post(
            &path,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "fine", "generateName": "x."}}),
        )
        .await?;
    s.record("invalid generateName beside a name", &bad_dot);

    let with_rv = json!({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "rv", "resourceVersion": "5"}});
    let refused = s.post(&path, with_rv.clone()).await?.expect(500)?;
    s.record("resourceVersion on create", &refused);
    let dry = s.post(&format!("{path}?dryRun=All"), with_rv).await?;
    s.record("resourceVersion on a dry-run create", dry.code);
    s.get(&format!("{path}/rv")).await?.expect(404)?;

    let unknown = s
        .post(
            &path,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "extra", "foo": "bar", "labels": {"a": "b"}}}),
        )
        .await?
        .expect(201)?;
    assert!(unknown.body["metadata"].get("foo").is_none());
    s.record("unknown metadata field", &unknown);
    Ok(())
}

/// Names: a 100-character name of one part, a 253-character one; label and
/// annotation keys; the annotations' total size.
pub async fn names_and_metadata_rules(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let long_part = "a".repeat(100);
    let made = s.post(&path, configmap(&long_part)).await?;
    s.record(
        "100-character single-part name",
        (made.code, &made.body["metadata"]["name"]),
    );
    let longest = format!("{}.{}", "b".repeat(200), "c".repeat(52));
    assert_eq!(longest.len(), 253);
    let made = s.post(&path, configmap(&longest)).await?;
    s.record(
        "253-character name",
        (made.code, &made.body["metadata"]["name"]),
    );
    let too_long = s
        .post(&path, configmap(&"B".repeat(254)))
        .await?
        .expect(422)?;
    s.record("254 characters, not lowercase", &too_long);

    let mut cm = configmap("keys");
    cm["metadata"]["annotations"] = json!({"Bad Key": "b", "x/y/z": "c", "/x": "d",
                                           "Example.com/Fine": "e", "ok.io/k": "f"});
    cm["metadata"]["labels"] = json!({"x/y/z": "a", "a/": "b"});
    let bad = s.post(&path, cm).await?.expect(422)?;
    s.record("label and annotation keys", sorted_causes(&bad));

    let mut big = configmap("big");
    big["metadata"]["annotations"] = json!({"k": "v".repeat(256 * 1024)});
    let over = s.post(&path, big).await?.expect(422)?;
    s.record("annotations over 256 KiB", &over);
    let mut fits = configmap("fits");
    fits["metadata"]["annotations"] = json!({"k": "v".repeat(256 * 1024 - 1)});
    let fits = s.post(&path, fits).await?;
    s.record("annotations of 256 KiB", fits.code);
    Ok(())
}

/// A PUT whose uid differs is a failed precondition (409); a patch changing
/// the uid is 422 `field is immutable` (listed twice: the common checks of
/// every update, then the kind's).
pub async fn uid_is_a_precondition_and_immutable(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let item = format!("{path}/held");
    let created = s.post(&path, configmap("held")).await?.expect(201)?;
    let uid = created.body["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let other = "6b7a3b2e-0000-0000-0000-000000000000";
    let hide = |r: &Reply| {
        let mut r = r.clone();
        if let Some(m) = r.body["message"].as_str() {
            r.body["message"] = json!(m.replace(&uid, "<live uid>"));
        }
        r
    };
    let mut body = created.body.clone();
    body["metadata"]["uid"] = json!(other);
    let put = s.put(&item, body.clone()).await?.expect(409)?;
    s.record("PUT with another uid", hide(&put));
    body["metadata"]["resourceVersion"] = json!("1");
    let put_stale = s.put(&item, body).await?.expect(409)?;
    s.record(
        "PUT with another uid and a stale resourceVersion",
        hide(&put_stale),
    );
    let mut no_rv = configmap("held");
    no_rv["metadata"]["uid"] = json!(other);
    let put_no_rv = s.put(&item, no_rv).await?.expect(409)?;
    s.record("PUT with another uid, no resourceVersion", hide(&put_no_rv));
    let same = created.body.clone();
    s.record("PUT with the same uid", s.put(&item, same).await?.code);

    let merge = s
        .merge(&item, json!({"metadata": {"uid": other}}))
        .await?
        .expect(422)?;
    s.record("merge patch of the uid", &merge);
    let json_patch = s
        .patch(
            &item,
            "application/json-patch+json",
            json!([{"op": "replace", "path": "/metadata/uid", "value": "x"}]),
        )
        .await?
        .expect(422)?;
    s.record("JSON patch of the uid", &json_patch);
    let after = s.get(&item).await?.expect(200)?;
    assert_eq!(after.body["metadata"]["uid"], json!(uid));
    Ok(())
}

/// managedFields written by the client: `[{}]` drops them, a list replaces
/// them (as kubectl's client-side to server-side apply migration does with
/// a JSON patch), a write without `fieldManager` is named after the
/// User-Agent up to its first `/`.
pub async fn client_written_managed_fields(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let item = format!("{path}/owned");
    let created = s
        .post(&format!("{path}?fieldManager=alice"), configmap("owned"))
        .await?
        .expect(201)?;
    s.record("created by alice", managers(&created.body));

    let reset = s
        .merge(
            &format!("{item}?fieldManager=bob"),
            json!({"metadata": {"managedFields": [{}]}, "data": {"b": "2"}}),
        )
        .await?
        .expect(200)?;
    s.record("reset with a change", managers(&reset.body));

    let carol = json!([{"manager": "carol", "operation": "Apply", "apiVersion": "v1",
                        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}]);
    let replaced = s
        .merge(
            &format!("{item}?fieldManager=bob"),
            json!({"metadata": {"managedFields": carol}}),
        )
        .await?
        .expect(200)?;
    s.record("replaced by a merge patch", managers(&replaced.body));

    let agent = send_as(
        s,
        "my-tool/1.0 (linux/amd64) kubernetes/abc",
        Method::PATCH,
        &item,
        "application/merge-patch+json",
        &json!({"data": {"c": "3"}}),
    )
    .await?
    .expect(200)?;
    s.record("a patch named after the User-Agent", managers(&agent.body));

    let mut put = agent.body.clone();
    put["data"]["d"] = json!("4");
    if let Some(m) = put["metadata"].as_object_mut() {
        m.remove("managedFields");
    }
    let updated = send_as(
        s,
        "other agent/2",
        Method::PUT,
        &item,
        "application/json",
        &put,
    )
    .await?
    .expect(200)?;
    s.record("an update without managedFields", managers(&updated.body));

    // kubectl's migration: a JSON patch replacing managedFields, guarded by
    // the resourceVersion.
    let migrated = json!([{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                           "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                           "fieldsV1": {"f:data": {"f:a": {}, "f:b": {}}}}]);
    let patched = s
        .patch(
            &item,
            "application/json-patch+json",
            json!([
                {"op": "replace", "path": "/metadata/managedFields", "value": migrated},
                {"op": "replace", "path": "/metadata/resourceVersion", "value": updated.rv()},
            ]),
        )
        .await?
        .expect(200)?;
    s.record("migrated by a JSON patch", managers(&patched.body));
    let invalid = s
        .merge(
            &item,
            json!({"metadata": {"managedFields": [{"manager": "x", "fieldsType": "Other"}]}}),
        )
        .await?
        .expect(200)?;
    s.record("an undecodable list is ignored", managers(&invalid.body));
    Ok(())
}

/// Leases: a PUT without resourceVersion (422, naming the resource), the
/// spec's durations and transitions, and `MicroTime`s.
pub async fn lease_writes(s: &mut Scene) -> Fallible {
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/{}/leases", s.ns);
    let lease = |name: &str, spec: Value| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": name}, "spec": spec})
    };
    let created = s
        .post(
            &path,
            lease(
                "l1",
                json!({"holderIdentity": "a", "leaseDurationSeconds": 10,
                       "acquireTime": "2020-01-01T00:00:00.000000Z",
                       "renewTime": "2020-01-01T00:00:01.123456+02:00"}),
            ),
        )
        .await?
        .expect(201)?;
    s.record("created", &created);
    let no_rv = s
        .put(
            &format!("{path}/l1"),
            lease(
                "l1",
                json!({"holderIdentity": "b", "leaseDurationSeconds": 10}),
            ),
        )
        .await?
        .expect(422)?;
    s.record("PUT without resourceVersion", &no_rv);
    let bad = s
        .post(
            &path,
            lease(
                "l2",
                json!({"leaseDurationSeconds": 0, "leaseTransitions": -1}),
            ),
        )
        .await?
        .expect(422)?;
    s.record("duration 0, transitions -1", &bad);
    let mut update = created.body.clone();
    update["spec"]["leaseDurationSeconds"] = json!(-5);
    let bad_update = s.put(&format!("{path}/l1"), update).await?.expect(422)?;
    s.record("an update with a negative duration", &bad_update);
    for (label, time) in [
        ("MicroTime without fraction", "2020-01-01T00:00:00Z"),
        ("MicroTime with three digits", "2020-01-01T00:00:00.123Z"),
        ("not a time", "yesterday"),
    ] {
        let r = s
            .post(&path, lease("l3", json!({"renewTime": time})))
            .await?
            .expect(400)?;
        // The message is the Go decoder's.
        s.record(label, (r.code, r.reason()));
    }
    Ok(())
}

/// A create in a namespace being deleted: 403 with the
/// `NamespaceTerminating` cause client-go looks for, naming the object (or
/// its generateName).
pub async fn create_in_terminating_namespace(s: &mut Scene) -> Fallible {
    let ns = format!("t-{}", s.token);
    s.post(
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )
    .await?
    .expect(201)?;
    let configmaps = format!("/api/v1/namespaces/{ns}/configmaps");
    let mut held = configmap("held");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    s.post(&configmaps, held).await?.expect(201)?;
    s.delete(&format!("/api/v1/namespaces/{ns}"))
        .await?
        .expect(200)?;
    let refused = eventually("the namespace to refuse new content", 30, async || {
        let r = s.post(&configmaps, configmap("new")).await?;
        Ok((r.code == 403).then_some(r))
    })
    .await?;
    s.record("create", &refused);
    let generated = s
        .post(
            &configmaps,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "new-"}}),
        )
        .await?
        .expect(403)?;
    s.record("create with generateName", &generated);
    let invalid = s.post(&configmaps, configmap("Bad_Name")).await?;
    s.record(
        "create with an invalid name",
        (invalid.code, invalid.reason()),
    );
    s.merge(
        &format!("{configmaps}/held"),
        json!({"metadata": {"finalizers": null}}),
    )
    .await?
    .expect(200)?;
    Ok(())
}

/// CRD schemas: `pattern` and the `format`s the real server checks, a
/// format it does not know, integral numbers written as integers, and
/// custom resource names of 253 characters.
pub async fn crd_pattern_and_format(s: &mut Scene) -> Fallible {
    let string = |extra: Value| {
        let mut v = json!({"type": "string"});
        if let (Some(m), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            m.extend(e.clone());
        }
        v
    };
    let formats = [
        "date-time",
        "date",
        "uuid",
        "ipv4",
        "ipv6",
        "cidr",
        "byte",
        "hostname",
        "email",
        "duration",
        "mac",
        "foo",
    ];
    let mut properties = serde_json::Map::new();
    properties.insert("p".into(), string(json!({"pattern": "^[a-z]+$"})));
    properties.insert("n".into(), json!({"type": "integer"}));
    properties.insert("x".into(), json!({"type": "number"}));
    for f in formats {
        properties.insert(f.replace('-', ""), string(json!({"format": f})));
    }
    s.install_crd(json!({
        "spec": {
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": properties}}}}}]
        }
    }))
    .await?;
    let path = s.custom("v1", "gadgets");
    let api_version = format!("{}/v1", s.group());
    let gadget = |name: &str, spec: Value| {
        json!({"apiVersion": api_version, "kind": "Gadget",
               "metadata": {"name": name}, "spec": spec})
    };
    let bad = s
        .post(
            &path,
            gadget(
                "bad",
                json!({"p": "ABC", "datetime": "yesterday", "date": "2020-13-01",
                       "uuid": "nope", "ipv4": "1.2.3", "ipv6": "zz", "cidr": "1.2.3.4",
                       "byte": "!!", "hostname": "-bad-", "email": "nope",
                       "duration": "forever", "mac": "zz", "foo": "whatever"}),
            ),
        )
        .await?
        .expect(422)?;
    s.record("every format broken", sorted_causes(&bad));
    let good = s
        .post(
            &path,
            gadget(
                "good",
                json!({"p": "abc", "datetime": "2020-01-01T00:00:00Z", "date": "2020-12-01",
                       "uuid": "6B7A3B2E-0000-0000-0000-000000000000", "ipv4": "1.2.3.4",
                       "ipv6": "::1", "cidr": "1.2.3.0/24", "byte": "aGVsbG8=",
                       "hostname": "good.host", "email": "a@b.c", "duration": "3 days",
                       "mac": "00:11:22:33:44:55", "foo": "whatever", "n": 2.0, "x": 3.0}),
            ),
        )
        .await?
        .expect(201)?;
    s.record(
        "every format kept, integral numbers as integers",
        &good.body["spec"],
    );
    let name = format!("{}.{}", "a".repeat(100), "b".repeat(152));
    assert_eq!(name.len(), 253);
    let long = s.post(&path, gadget(&name, json!({}))).await?;
    s.record(
        "253-character name",
        (long.code, &long.body["metadata"]["name"]),
    );
    let mut no_rv = gadget("good", json!({"p": "x"}));
    no_rv["metadata"]["uid"] = json!(null);
    let put = s.put(&format!("{path}/good"), no_rv).await?.expect(422)?;
    s.record("PUT without resourceVersion", &put);
    Ok(())
}

/// The message of an apply's conflicts: one conflict on one line; several
/// grouped by manager (sorted), each group headed `conflicts with
/// MANAGER:`; a manager that updated named with the API version it used.
pub async fn apply_conflict_messages(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let item = format!("{path}/shared");
    let apply = "application/apply-patch+yaml";
    let config = |data: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"},
               "data": data})
    };
    s.patch(
        &format!("{item}?fieldManager=one"),
        apply,
        config(json!({"a": "1", "b": "2"})),
    )
    .await?
    .expect(201)?;
    s.merge(
        &format!("{item}?fieldManager=editor"),
        json!({"data": {"c": "3"}}),
    )
    .await?
    .expect(200)?;
    for (label, data) in [
        ("one conflict", json!({"a": "9"})),
        (
            "two conflicts with one manager",
            json!({"a": "9", "b": "8"}),
        ),
        (
            "conflicts with two managers",
            json!({"a": "9", "b": "8", "c": "7"}),
        ),
    ] {
        let refused = s
            .patch(&format!("{item}?fieldManager=two"), apply, config(data))
            .await?
            .expect(409)?;
        s.record(label, &refused.body["message"]);
    }
    Ok(())
}

/// The first server-side apply by `kubectl` of an object it applied
/// client-side: conflicts on fields the last-applied annotation still
/// matches are forced; another manager, or a field changed since, still
/// conflicts.
pub async fn kubectl_server_side_apply_after_client_side(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let item = format!("{path}/migrated");
    let last = json!({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "migrated", "namespace": s.ns},
                      "data": {"mode": "a", "other": "x"}});
    let mut body = configmap("migrated");
    body["data"] = json!({"mode": "a", "other": "x"});
    body["metadata"]["annotations"] =
        json!({"kubectl.kubernetes.io/last-applied-configuration": last.to_string()});
    s.post(
        &format!("{path}?fieldManager=kubectl-client-side-apply"),
        body,
    )
    .await?
    .expect(201)?;
    // Changed since by someone else: not covered by last-applied.
    s.merge(
        &format!("{item}?fieldManager=editor"),
        json!({"data": {"other": "y"}}),
    )
    .await?
    .expect(200)?;
    let config = |mode: &str, other: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "migrated"},
               "data": {"mode": mode, "other": other}})
    };
    let apply = "application/apply-patch+yaml";
    let someone = s
        .patch(
            &format!("{item}?fieldManager=someone"),
            apply,
            config("b", "y"),
        )
        .await?
        .expect(409)?;
    s.record("another manager conflicts", sorted_causes(&someone));
    let changed = s
        .patch(
            &format!("{item}?fieldManager=kubectl"),
            apply,
            config("b", "z"),
        )
        .await?
        .expect(409)?;
    s.record("kubectl, a field changed since", sorted_causes(&changed));
    let ok = s
        .patch(
            &format!("{item}?fieldManager=kubectl"),
            apply,
            config("b", "y"),
        )
        .await?
        .expect(200)?;
    s.record("kubectl, last-applied fields", &ok.body["data"]);
    Ok(())
}
