//! Events (core `v1` and `events.k8s.io/v1`, one storage), the RBAC kinds
//! and ServiceAccounts, and the priority of printer columns.

use integration_tests::{Fallible, Scene};
use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event as NewEvent;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::conformance::builtin::names;
use crate::conformance::known;

/// A Table's columns (name, type, priority) and its rows' cells, without
/// the cells of the columns named in `times` (ages that depend on when
/// the scenario ran).
async fn table_summary(s: &Scene, path: &str, times: &[&str]) -> Fallible<Value> {
    let table = s.get_table(path).await?.expect(200)?.body;
    let columns = table["columnDefinitions"]
        .as_array()
        .ok_or("no columnDefinitions")?;
    let keep: Vec<bool> = columns
        .iter()
        .map(|c| !times.iter().any(|t| c["name"] == *t))
        .collect();
    let rows: Vec<Value> = table["rows"]
        .as_array()
        .ok_or("no rows")?
        .iter()
        .map(|r| {
            let cells = r["cells"].as_array().cloned().unwrap_or_default();
            Value::from(
                cells
                    .into_iter()
                    .zip(&keep)
                    .filter(|(_, k)| **k)
                    .map(|(c, _)| c)
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    Ok(json!({
        "columns": columns
            .iter()
            .map(|c| json!([c["name"], c["type"], c["priority"]]))
            .collect::<Vec<_>>(),
        "rows": rows,
    }))
}

/// `/apis/events.k8s.io/v1/namespaces/<ns>/events`.
fn events_api(s: &Scene) -> String {
    format!("/apis/events.k8s.io/v1/namespaces/{}/events", s.ns)
}

/// An `events.k8s.io/v1` Event about the ConfigMap `target`, as kube's
/// `Recorder` writes one.
fn new_event(s: &Scene, name: &str, target: &str) -> Value {
    json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": name},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": {"apiVersion": "v1", "kind": "ConfigMap", "name": target,
                      "namespace": s.ns, "fieldPath": "data"},
        "related": {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "namespace": s.ns},
        "note": "it happened", "reason": "Happened", "type": "Warning",
        "action": "Reconcile", "reportingController": "fsm.test/operator",
        "reportingInstance": "operator-0",
    })
}

/// An `events.k8s.io/v1` Event reads back through core `v1` with the core
/// names (and the reverse for a core Event), both lists and both watches
/// see every Event, and the core field selectors `kubectl describe` uses
/// select them.
pub async fn events_are_one_storage_with_two_apis(s: &mut Scene) -> Fallible {
    let new_path = events_api(s);
    let core_path = s.core("events");
    let core_api: Api<CoreEvent> = s.api();
    let new_api: Api<NewEvent> = s.api();
    let rv = core_api
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();

    let created = s
        .post(&new_path, new_event(s, "recorded", "target"))
        .await?
        .expect(201)?;
    assert_eq!(created.body["regarding"]["name"], "target");
    s.record("create through events.k8s.io", &created);
    let as_core = s.get(&format!("{core_path}/recorded")).await?.expect(200)?;
    assert_eq!(as_core.body["involvedObject"]["name"], "target");
    assert_eq!(as_core.body["message"], "it happened");
    assert_eq!(as_core.body["reportingComponent"], "fsm.test/operator");
    s.record("read through core v1", &as_core);

    let legacy = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "legacy"},
        "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": "target",
                           "namespace": s.ns},
        "message": "old style", "reason": "Started", "type": "Normal",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:01:00Z",
        "count": 3,
    });
    let created = s.post(&core_path, legacy).await?.expect(201)?;
    s.record("create through core v1", &created);
    let as_new = s.get(&format!("{new_path}/legacy")).await?.expect(200)?;
    assert_eq!(as_new.body["deprecatedSource"]["component"], "kubelet");
    assert_eq!(as_new.body["deprecatedCount"], 3);
    s.record("read through events.k8s.io", &as_new);

    // Series through events.k8s.io, as the Recorder patches a repeat.
    let patched = s
        .merge(
            &format!("{new_path}/recorded"),
            json!({"series": {"count": 2, "lastObservedTime": "2026-01-01T00:05:00.000000Z"}}),
        )
        .await?
        .expect(200)?;
    assert_eq!(patched.body["series"]["count"], 2);
    s.record("series patched", &patched);

    let core_list = s.get(&core_path).await?.expect(200)?;
    assert_eq!(names(&core_list.body), ["legacy", "recorded"]);
    s.record("core list", &core_list);
    let new_list = s.get(&new_path).await?.expect(200)?;
    assert_eq!(names(&new_list.body), ["legacy", "recorded"]);
    s.record("events.k8s.io list", &new_list);
    // What kubectl get events prints, through either API; not the count
    // (1.20 prints a series' count + 1, later versions the count).
    let times = ["Last Seen", "First Seen", "Count"];
    let core_table = table_summary(s, &core_path, &times).await?;
    s.record("core table", &core_table);
    let new_table = table_summary(s, &new_path, &times).await?;
    s.record("events.k8s.io table", &new_table);

    // The selectors kubectl describe sends, and the others Events index.
    let uid_free = [
        "involvedObject.name=target,involvedObject.namespace=NS,involvedObject.kind=ConfigMap",
        "involvedObject.apiVersion=v1",
        "involvedObject.fieldPath=data",
        "involvedObject.uid=",
        "involvedObject.resourceVersion=",
        "reason=Happened",
        "type=Normal",
        "source=kubelet",
        "source=fsm.test/operator",
        "reportingComponent=fsm.test/operator",
        "reportingComponent=",
        "metadata.name=legacy",
    ];
    for template in uid_free {
        let selector = template.replace("NS", &s.ns);
        let list = s
            .get(&format!("{core_path}?fieldSelector={selector}"))
            .await?
            .expect(200)?;
        s.record(format!("core selector {template}"), names(&list.body));
    }
    let new_selectors = [
        "regarding.name=target,regarding.kind=ConfigMap",
        "regarding.fieldPath=data",
        "reportingController=fsm.test/operator",
        "reason=Started",
        "type=Warning",
    ];
    for selector in new_selectors {
        let list = s
            .get(&format!("{new_path}?fieldSelector={selector}"))
            .await?
            .expect(200)?;
        s.record(
            format!("events.k8s.io selector {selector}"),
            names(&list.body),
        );
    }
    for (api, path, selector) in [
        ("core", &core_path, "message=old"),
        ("core", &core_path, "note=x"),
        ("events.k8s.io", &new_path, "note=x"),
        ("events.k8s.io", &new_path, "deprecatedSource=kubelet"),
        ("events.k8s.io", &new_path, "involvedObject.name=target"),
    ] {
        let refused = s
            .get(&format!("{path}?fieldSelector={selector}"))
            .await?
            .expect(400)?;
        s.record(format!("unsupported {api} selector {selector}"), &refused);
    }

    // Both watches saw both creates and the patch.
    let summary = |events: Vec<Value>, message: &str| -> Vec<Value> {
        events
            .iter()
            .map(|e| {
                json!([
                    e["type"],
                    e["object"]["metadata"]["name"],
                    e["object"][message]
                ])
            })
            .collect()
    };
    let core_events = summary(
        s.watch_events(&core_api, &rv, 3, 10, async { Ok(()) })
            .await?,
        "message",
    );
    let new_events = summary(
        s.watch_events(&new_api, &rv, 3, 10, async { Ok(()) })
            .await?,
        "note",
    );
    let expected = |kinds: [&str; 3]| {
        vec![
            json!([kinds[0], "recorded", "it happened"]),
            json!([kinds[1], "legacy", "old style"]),
            json!([kinds[2], "recorded", "it happened"]),
        ]
    };
    assert_eq!(core_events, expected(["ADDED", "ADDED", "MODIFIED"]));
    assert_eq!(new_events, expected(["ADDED", "ADDED", "MODIFIED"]));
    s.record("core watch", &core_events);
    s.record("events.k8s.io watch", &new_events);
    let deleted = s.delete(&format!("{new_path}/legacy")).await?.expect(200)?;
    s.record("delete through events.k8s.io", &deleted);
    s.get(&format!("{core_path}/legacy")).await?.expect(404)?;
    Ok(())
}

/// What each API requires of an Event, and what an update through
/// `events.k8s.io` may change: the 422 answers.
pub async fn event_validation(s: &mut Scene) -> Fallible {
    let new_path = events_api(s);
    let core_path = s.core("events");

    let empty =
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "empty"}});
    let refused = s.post(&new_path, empty).await?.expect(422)?;
    s.record("events.k8s.io without fields", &refused);

    let mut legacy_fields = new_event(s, "legacy-fields", "target");
    legacy_fields["deprecatedCount"] = json!(2);
    legacy_fields["deprecatedSource"] = json!({"component": "kubelet"});
    legacy_fields["deprecatedFirstTimestamp"] = json!("2026-01-01T00:00:00Z");
    legacy_fields["type"] = json!("Odd");
    legacy_fields["series"] = json!({"count": 1});
    let refused = s.post(&new_path, legacy_fields).await?.expect(422)?;
    s.record("events.k8s.io with deprecated fields", &refused);

    let mut no_reporter = new_event(s, "no-reporter", "target");
    no_reporter["reportingController"] = json!("not a name!");
    no_reporter["reportingInstance"] = json!("");
    no_reporter["reason"] = json!("r".repeat(129));
    let refused = s.post(&new_path, no_reporter).await?.expect(422)?;
    s.record("events.k8s.io with a bad reporter", &refused);

    // Core v1: only the legacy rules; the involved object's namespace must
    // be the Event's.
    let elsewhere = json!({
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "elsewhere"},
        "involvedObject": {"kind": "ConfigMap", "name": "x", "namespace": "other"},
    });
    let refused = s.post(&core_path, elsewhere).await?.expect(422)?;
    s.record("core v1 elsewhere", &refused);
    // Without an eventTime and an involved object's namespace, only the
    // default namespace takes it.
    let bare = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "bare"}});
    let refused = s.post(&core_path, bare).await?.expect(422)?;
    s.record("core v1 without fields", &refused);
    let minimal = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "minimal"},
                         "involvedObject": {"namespace": s.ns}});
    let accepted = s.post(&core_path, minimal).await?.expect(201)?;
    s.record("core v1 with only the namespace", &accepted);

    // Through events.k8s.io only series and metadata may change.
    s.post(&new_path, new_event(s, "fixed", "target"))
        .await?
        .expect(201)?;
    // The updates 1.20 lets through change "frozen" there, not "fixed".
    s.post(&new_path, new_event(s, "frozen", "target"))
        .await?
        .expect(201)?;
    let changed = s
        .merge(
            &format!("{new_path}/frozen"),
            json!({"note": "changed", "reason": "Other"}),
        )
        .await?;
    s.record_known(
        "events.k8s.io update of note and reason",
        &changed,
        known::VERSION_EVENT_UPDATE_UNCHECKED,
    );
    let bad_series = s
        .merge(
            &format!("{new_path}/frozen"),
            json!({"series": {"count": 1}}),
        )
        .await?;
    s.record_known(
        "events.k8s.io update with a bad series",
        &bad_series,
        known::VERSION_EVENT_UPDATE_UNCHECKED,
    );
    let no_instance = s
        .merge(
            &format!("{new_path}/frozen"),
            json!({"reportingInstance": null}),
        )
        .await?;
    s.record_known(
        "events.k8s.io update without reportingInstance",
        &no_instance,
        known::VERSION_EVENT_UPDATE_UNCHECKED,
    );
    let series = s
        .merge(
            &format!("{new_path}/fixed"),
            json!({"series": {"count": 2, "lastObservedTime": "2026-01-01T00:05:00.000000Z"},
                   "metadata": {"labels": {"seen": "twice"}}}),
        )
        .await?
        .expect(200)?;
    s.record("events.k8s.io update of series and labels", &series);
    let relabelled = s
        .merge(
            &format!("{new_path}/fixed"),
            json!({"metadata": {"labels": {"a": "b"}}}),
        )
        .await?
        .expect(200)?;
    s.record("events.k8s.io update of labels", &relabelled);
    // Through core v1 anything may change.
    let rewritten = s
        .merge(
            &format!("{core_path}/fixed"),
            json!({"message": "changed through v1"}),
        )
        .await?
        .expect(200)?;
    assert_eq!(rewritten.body["message"], "changed through v1");
    s.record("core v1 update of message", &rewritten);
    // A PUT of an absent Event creates it, through either API (and not
    // an absent ConfigMap).
    let put = s
        .put(
            &format!("{new_path}/put-created"),
            new_event(s, "put-created", "target"),
        )
        .await?
        .expect(201)?;
    s.record("PUT of an absent Event", &put);
    let cm = s
        .put(
            &format!("{}/absent", s.core("configmaps")),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "absent"}}),
        )
        .await?
        .expect(404)?;
    s.record("PUT of an absent ConfigMap", &cm);
    Ok(())
}

/// The RBAC kinds and ServiceAccounts are stored and served: create,
/// read, list, patch and delete, names with colons, and the name rules.
pub async fn rbac_objects_and_service_accounts(s: &mut Scene) -> Fallible {
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let cluster_role = format!("conf:{}", s.token);
    let rule =
        json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]});
    let created = s
        .post(
            &format!("{rbac}/clusterroles"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": cluster_role, "labels": {"app": "conf"}}, "rules": [rule]}),
        )
        .await?
        .expect(201)?;
    s.record("clusterrole", &created);
    let role = s
        .post(
            &format!("{rbac}/namespaces/{}/roles", s.ns),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "leases"},
                   "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                              "verbs": ["get", "create", "update"]}]}),
        )
        .await?
        .expect(201)?;
    s.record("role", &role);
    let sa = s
        .post(
            &s.core("serviceaccounts"),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "operator"}}),
        )
        .await?
        .expect(201)?;
    s.record("serviceaccount", &sa);
    let subject = json!([{"kind": "ServiceAccount", "name": "operator", "namespace": s.ns}]);
    let binding = s
        .post(
            &format!("{rbac}/namespaces/{}/rolebindings", s.ns),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "operator"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "leases"},
                   "subjects": subject}),
        )
        .await?
        .expect(201)?;
    s.record("rolebinding", &binding);
    let cluster_binding = s
        .post(
            &format!("{rbac}/clusterrolebindings"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": cluster_role},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": cluster_role},
                   "subjects": subject}),
        )
        .await?
        .expect(201)?;
    s.record("clusterrolebinding", &cluster_binding);

    let patched = s
        .merge(
            &format!("{rbac}/clusterroles/{cluster_role}"),
            json!({"rules": [rule, {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
        )
        .await?
        .expect(200)?;
    s.record("clusterrole patched", &patched);
    let listed = s
        .get(&format!("{rbac}/clusterroles?labelSelector=app=conf"))
        .await?
        .expect(200)?;
    assert_eq!(names(&listed.body), std::slice::from_ref(&cluster_role));
    s.record("clusterroles by label", names(&listed.body));
    let roles = s
        .get(&format!("{rbac}/namespaces/{}/roles", s.ns))
        .await?
        .expect(200)?;
    s.record("roles", &roles);
    // What kubectl get prints.
    for (what, path) in [
        ("roles", format!("{rbac}/namespaces/{}/roles", s.ns)),
        (
            "rolebindings",
            format!("{rbac}/namespaces/{}/rolebindings", s.ns),
        ),
        (
            "clusterrole",
            format!("{rbac}/clusterroles?fieldSelector=metadata.name={cluster_role}"),
        ),
        (
            "clusterrolebinding",
            format!("{rbac}/clusterrolebindings?fieldSelector=metadata.name={cluster_role}"),
        ),
    ] {
        let table = table_summary(s, &path, &["Age", "Created At"]).await?;
        s.record(format!("{what} table"), &table);
    }

    let put = s
        .put(
            &format!("{rbac}/namespaces/{}/roles/put-created", s.ns),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "put-created"}}),
        )
        .await?
        .expect(201)?;
    s.record("PUT of an absent Role", &put);
    let bad = s
        .post(
            &format!("{rbac}/namespaces/{}/roles", s.ns),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "50%"}}),
        )
        .await?
        .expect(422)?;
    s.record("role named 50%", &bad);
    // What the real server requires of rules, role refs and subjects.
    let bad_rules = s
        .post(
            &format!("{rbac}/namespaces/{}/roles", s.ns),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "bad-rules"},
                   "rules": [{}, {"nonResourceURLs": ["/healthz"], "verbs": ["get"]},
                             {"apiGroups": [""], "resources": ["pods"]}]}),
        )
        .await?
        .expect(422)?;
    s.record("role with bad rules", &bad_rules);
    let bad_binding = s
        .post(
            &format!("{rbac}/clusterrolebindings"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": format!("bad-{}", s.token)},
                   "roleRef": {"apiGroup": "example.com", "kind": "Role", "name": ""},
                   "subjects": [{"kind": "ServiceAccount", "name": "op"},
                                {"kind": "User", "name": "alice", "apiGroup": "x"},
                                {"kind": "Robot", "name": "r2"}]}),
        )
        .await?
        .expect(422)?;
    s.record("clusterrolebinding with bad refs", &bad_binding);
    let user = s
        .post(
            &format!("{rbac}/namespaces/{}/rolebindings", s.ns),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "user"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                   "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"}]}),
        )
        .await?
        .expect(201)?;
    s.record("rolebinding of a user and a group", &user);
    let moved = s
        .merge(
            &format!("{rbac}/namespaces/{}/rolebindings/user", s.ns),
            json!({"roleRef": {"name": "edit"}}),
        )
        .await?
        .expect(422)?;
    s.record("rolebinding roleRef changed", &moved);
    for (what, path) in [
        (
            "clusterrolebinding",
            format!("{rbac}/clusterrolebindings/{cluster_role}"),
        ),
        ("clusterrole", format!("{rbac}/clusterroles/{cluster_role}")),
        (
            "rolebinding",
            format!("{rbac}/namespaces/{}/rolebindings/operator", s.ns),
        ),
    ] {
        let deleted = s.delete(&path).await?.expect(200)?;
        s.record(format!("delete {what}"), &deleted);
        s.get(&path).await?.expect(404)?;
    }
    Ok(())
}

/// A printer column with `priority: 1` is marked so in the Table, which
/// `kubectl get` hides without `-o wide`.
pub async fn printer_column_priority(s: &mut Scene) -> Fallible {
    s.install_crd(json!({
        "metadata": {},
        "spec": {
            "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Owner", "type": "string", "jsonPath": ".spec.owner",
                     "priority": 1, "description": "who owns it"},
                    {"name": "Ratio", "type": "number", "format": "float",
                     "jsonPath": ".spec.ratio", "priority": 2},
                ],
            }],
        },
    }))
    .await?;
    let path = s.custom("v1", "gizmos");
    let group = s.group();
    s.post(
        &path,
        json!({"apiVersion": format!("{group}/v1"), "kind": "Gizmo", "metadata": {"name": "g1"},
               "spec": {"size": 3, "owner": "ops", "ratio": 0.5}}),
    )
    .await?
    .expect(201)?;
    let table = s.get_table(&path).await?.expect(200)?.body;
    let columns: Vec<Value> = table["columnDefinitions"]
        .as_array()
        .ok_or("no columnDefinitions")?
        .iter()
        .skip(1)
        .cloned()
        .collect();
    let priorities: Vec<&Value> = columns.iter().map(|c| &c["priority"]).collect();
    assert_eq!(priorities, [&json!(0), &json!(1), &json!(2)]);
    s.record("columns after Name", &columns);
    s.record("cells", &table["rows"][0]["cells"]);
    Ok(())
}
