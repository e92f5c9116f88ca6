//! Validation of the built-in kinds operators create (issue 32, item 2):
//! an invalid object is refused with 422 and the real server's causes
//! (field paths, reasons, messages), a valid one is created. Each create
//! is a dry run (`dryRun=All`), so nothing is left behind; updates are
//! made on objects the scenario created.
//!
//! The objects are sent without the fields the real server defaults
//! (`replicas`, `protocol`, `restartPolicy`, …), as operators write them:
//! both servers must judge them at their defaults.

use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

use super::known;

/// A pod template labelled `labels` with `containers`.
fn template(labels: Value, containers: Value) -> Value {
    json!({"metadata": {"labels": labels}, "spec": {"containers": containers}})
}

/// One container `c` running `nginx`.
fn one_container() -> Value {
    json!([{"name": "c", "image": "nginx"}])
}

/// POSTs `body` to `path` as a dry run; records the code, and the Status
/// of a refusal. Returns the code.
async fn try_create(s: &mut Scene, label: &str, path: &str, body: Value) -> Fallible<u16> {
    let reply = s.post(&format!("{path}?dryRun=All"), body).await?;
    record_reply(s, label, &reply.code, &reply.body);
    Ok(reply.code)
}

fn record_reply(s: &mut Scene, label: &str, code: &u16, body: &Value) {
    if *code == 201 || *code == 200 {
        s.record(label, code);
    } else {
        s.record(label, (code, body));
    }
}

/// Deployments, StatefulSets, Jobs and Pods: selectors that must match
/// their templates, containers (names, images, ports, resources), restart
/// policies, counts.
pub async fn invalid_workloads_are_refused(s: &mut Scene) -> Fallible {
    let deployments = format!("/apis/apps/v1/namespaces/{}/deployments", s.ns);
    let deployment = |spec: Value| json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": spec});
    let selector = json!({"matchLabels": {"app": "web"}});
    let cases = [
        (
            "deployment: valid",
            json!({"selector": selector, "template": template(json!({"app": "web"}), one_container())}),
            201,
        ),
        (
            "deployment: selector does not match the template",
            json!({"selector": selector, "template": template(json!({"app": "other"}), one_container())}),
            422,
        ),
        (
            "deployment: no selector",
            json!({"template": template(json!({"app": "web"}), one_container())}),
            422,
        ),
        (
            "deployment: empty selector",
            json!({"selector": {}, "template": template(json!({"app": "web"}), one_container())}),
            422,
        ),
        (
            "deployment: containers",
            json!({"selector": selector, "template": template(json!({"app": "web"}), json!([
                {"name": "c"},
                {"name": "c", "image": "x", "ports": [{"containerPort": 0}, {"containerPort": 70000}]},
                {"image": "y", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}},
                {"name": "Bad_Name", "image": "z", "imagePullPolicy": "Sometimes",
                 "ports": [{"containerPort": 80, "protocol": "XTP", "hostPort": 70000, "name": "Toolongportname123"}]},
            ]))}),
            422,
        ),
        (
            "deployment: no containers, restart policy Never",
            json!({"selector": selector, "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"restartPolicy": "Never", "containers": []}}}),
            422,
        ),
        (
            "deployment: negative counts, unknown strategy",
            json!({"replicas": -1, "minReadySeconds": -1, "revisionHistoryLimit": -2,
                "strategy": {"type": "Sometimes"}, "selector": selector,
                "template": template(json!({"app": "web"}), one_container())}),
            422,
        ),
        (
            "deployment: rolling update of zero and zero",
            json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}},
                "selector": selector, "template": template(json!({"app": "web"}), one_container())}),
            422,
        ),
        (
            "deployment: rolling update of a bad percentage",
            json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "150%", "maxUnavailable": "x%"}},
                "selector": selector, "template": template(json!({"app": "web"}), one_container())}),
            422,
        ),
        (
            "deployment: Recreate with a rolling update",
            json!({"strategy": {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}},
                "selector": selector, "template": template(json!({"app": "web"}), one_container())}),
            422,
        ),
    ];
    for (label, spec, code) in cases {
        let got = try_create(s, label, &deployments, deployment(spec)).await?;
        assert_eq!(got, code, "{label}");
    }

    let sets = format!("/apis/apps/v1/namespaces/{}/statefulsets", s.ns);
    let set = |spec: Value| json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}, "spec": spec});
    let cases = [
        (
            "statefulset: valid",
            json!({"serviceName": "db", "selector": selector, "template": template(json!({"app": "web"}), one_container())}),
            201,
        ),
        (
            // 1.20 checks a StatefulSet's template labels, not its pod spec.
            "statefulset: no containers",
            json!({"serviceName": "db", "selector": selector, "template": template(json!({"app": "web"}), json!([]))}),
            201,
        ),
        (
            "statefulset: selector does not match, restart policy OnFailure",
            json!({"serviceName": "db", "selector": selector, "template": {"metadata": {"labels": {"app": "x"}},
                "spec": {"restartPolicy": "OnFailure", "containers": one_container()}}}),
            422,
        ),
        (
            "statefulset: no selector, bad pod management policy",
            json!({"serviceName": "db", "podManagementPolicy": "Random", "replicas": -1,
                "template": template(json!({"app": "web"}), one_container())}),
            422,
        ),
    ];
    for (label, spec, code) in cases {
        let got = try_create(s, label, &sets, set(spec)).await?;
        assert_eq!(got, code, "{label}");
    }

    let jobs = format!("/apis/batch/v1/namespaces/{}/jobs", s.ns);
    let job = |spec: Value| json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"}, "spec": spec});
    let with_policy = |policy: &str| json!({"metadata": {}, "spec": {"restartPolicy": policy, "containers": one_container()}});
    let cases = [
        ("job: valid", json!({"template": with_policy("Never")}), 201),
        (
            "job: no restart policy",
            json!({"template": {"spec": {"containers": one_container()}}}),
            422,
        ),
        (
            "job: restart policy Always",
            json!({"template": with_policy("Always")}),
            422,
        ),
        (
            "job: negative counts",
            json!({"parallelism": -1, "completions": -1, "backoffLimit": -1, "template": with_policy("OnFailure")}),
            422,
        ),
        (
            "job: no containers, unknown restart policy",
            json!({"template": {"spec": {"restartPolicy": "Sometimes", "containers": []}}}),
            422,
        ),
    ];
    for (label, spec, code) in cases {
        let got = try_create(s, label, &jobs, job(spec)).await?;
        assert_eq!(got, code, "{label}");
    }

    let pods = s.core("pods");
    s.default_service_account().await?;
    let pod = |spec: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec});
    let cases = [
        ("pod: valid", json!({"containers": one_container()}), 201),
        ("pod: no containers", json!({}), 422),
        (
            "pod: bad restart policy, duplicate port names",
            json!({"restartPolicy": "Sometimes", "containers": [{"name": "c", "image": "x",
                "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 81, "name": "http"}],
                "terminationMessagePolicy": "Loud"}]}),
            422,
        ),
        (
            "pod: init containers",
            json!({"initContainers": [{"name": "init"}], "containers": one_container()}),
            422,
        ),
    ];
    for (label, spec, code) in cases {
        let got = try_create(s, label, &pods, pod(spec)).await?;
        assert_eq!(got, code, "{label}");
    }
    Ok(())
}

/// Services: ports required unless headless or `ExternalName`, types,
/// port numbers, names and duplicates.
pub async fn invalid_services_are_refused(s: &mut Scene) -> Fallible {
    let services = s.core("services");
    let service = |spec: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": spec});
    let cases = [
        ("valid", json!({"ports": [{"port": 80}]}), 201),
        ("no ports", json!({}), 422),
        ("headless without ports", json!({"clusterIP": "None"}), 201),
        (
            "ExternalName without a name",
            json!({"type": "ExternalName"}),
            422,
        ),
        (
            "ExternalName",
            json!({"type": "ExternalName", "externalName": "db.example.com"}),
            201,
        ),
        (
            "ExternalName not a DNS name",
            json!({"type": "ExternalName", "externalName": "Not A Name"}),
            422,
        ),
        (
            "unknown type",
            json!({"type": "Magic", "ports": [{"port": 80}]}),
            422,
        ),
        (
            "port numbers, protocols, duplicates",
            json!({"ports": [{"port": 0}, {"port": 70000}, {"port": 80, "name": "a"},
                {"port": 80, "name": "b"}, {"port": 81, "targetPort": 0}, {"port": 82, "protocol": "XTP"}]}),
            422,
        ),
        (
            "two ports without names",
            json!({"ports": [{"port": 80}, {"port": 81}]}),
            422,
        ),
        (
            "duplicate and invalid port names, a bad target port",
            json!({"ports": [{"port": 80, "name": "a"}, {"port": 81, "name": "a"},
                {"port": 82, "name": "Bad_Name"}, {"port": 83, "name": "d", "targetPort": "Not_A_Port"}]}),
            422,
        ),
        (
            "a UDP and a TCP port 53",
            json!({"ports": [{"port": 53, "name": "dns", "protocol": "UDP"},
                {"port": 53, "name": "dns-tcp", "protocol": "TCP"}]}),
            201,
        ),
        (
            "a node port on a ClusterIP Service, a bad affinity",
            json!({"type": "ClusterIP", "sessionAffinity": "Sticky", "ports": [{"port": 80, "nodePort": 30080}]}),
            422,
        ),
        (
            "headless NodePort",
            json!({"type": "NodePort", "clusterIP": "None", "ports": [{"port": 80}]}),
            422,
        ),
    ];
    for (label, spec, code) in cases {
        let got = try_create(s, label, &services, service(spec)).await?;
        assert_eq!(got, code, "{label}");
    }
    Ok(())
}

/// Ingress paths (a `pathType`, an absolute path, a backend with a
/// port), ConfigMap and Secret data keys.
pub async fn invalid_ingresses_and_data_keys_are_refused(s: &mut Scene) -> Fallible {
    let ingresses = format!("/apis/networking.k8s.io/v1/namespaces/{}/ingresses", s.ns);
    let backend = json!({"service": {"name": "web", "port": {"number": 80}}});
    let ingress = |paths: Value| {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"},
            "spec": {"rules": [{"host": "web.example.com", "http": {"paths": paths}}]}})
    };
    let cases = [
        (
            "ingress: valid",
            json!([{"path": "/", "pathType": "Prefix", "backend": backend}]),
            201,
        ),
        (
            "ingress: no pathType",
            json!([{"path": "/", "backend": backend}]),
            422,
        ),
        (
            "ingress: unknown pathType, relative and unclean paths",
            json!([{"path": "/", "pathType": "Weird", "backend": backend},
                {"path": "x", "pathType": "Prefix", "backend": backend},
                {"path": "/a//b/..", "pathType": "Exact", "backend": backend}]),
            422,
        ),
        (
            "ingress: backend without a port",
            json!([{"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {}}}}]),
            422,
        ),
    ];
    for (label, paths, code) in cases {
        let reply = s
            .post(&format!("{ingresses}?dryRun=All"), ingress(paths))
            .await?;
        assert_eq!(reply.code, code, "{label}: {}", reply.body);
        if code == 201 {
            s.record(label, reply.code);
        } else {
            s.record(
                label,
                (reply.code, reply.reason(), &reply.body["details"]["causes"]),
            );
            s.record_known(
                format!("{label}: Status"),
                (&reply.body["message"], &reply.body["details"]["group"]),
                known::VERSION_INGRESS_INVALID_GROUP,
            );
        }
    }

    // One bad key a request: the real server reports the keys of a map in
    // Go's random map order.
    let config_maps = s.core("configmaps");
    let cases = [
        (
            "configmap: valid keys",
            json!({"data": {"a.txt": "1", "B_2-c": "2"}}),
            201,
        ),
        (
            "configmap: a key with a space",
            json!({"data": {"bad key": "x"}}),
            422,
        ),
        (
            "configmap: a key with a slash",
            json!({"data": {"a/b": "x"}}),
            422,
        ),
        ("configmap: the key ..", json!({"data": {"..": "x"}}), 422),
        (
            "configmap: a key starting ..",
            json!({"data": {"..dot": "x"}}),
            422,
        ),
        (
            "configmap: a key in data and binaryData",
            json!({"data": {"ok.txt": "1"}, "binaryData": {"ok.txt": "AA=="}}),
            422,
        ),
        (
            "configmap: a bad binaryData key",
            json!({"binaryData": {"bin key": "AA=="}}),
            422,
        ),
    ];
    for (label, data, code) in cases {
        let mut body =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}});
        for (k, v) in data.as_object().into_iter().flatten() {
            body[k] = v.clone();
        }
        let got = try_create(s, label, &config_maps, body).await?;
        assert_eq!(got, code, "{label}");
    }
    let secrets = s.core("secrets");
    let bad = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
        "data": {"bad key": "eA=="}});
    assert_eq!(
        try_create(s, "secret: a bad data key", &secrets, bad).await?,
        422
    );
    let bad = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
        "stringData": {"bad/key": "x"}});
    assert_eq!(
        try_create(s, "secret: a bad stringData key", &secrets, bad).await?,
        422
    );
    Ok(())
}

/// An update is validated as a create is: a patch that breaks a stored
/// Deployment's selector match, a Service's type, a ConfigMap's keys.
pub async fn updates_are_validated(s: &mut Scene) -> Fallible {
    let deployments = format!("/apis/apps/v1/namespaces/{}/deployments", s.ns);
    let body = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": template(json!({"app": "web"}), one_container())}});
    s.post(&deployments, body).await?.expect(201)?;
    let item = format!("{deployments}/web");
    let patch = json!({"spec": {"template": {"metadata": {"labels": {"app": "other"}}}}});
    let reply = s.merge(&item, patch).await?;
    assert_eq!(reply.code, 422, "{}", reply.body);
    s.record("deployment: template labels no longer matching", &reply);
    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": ""}]}}}});
    let reply = s.merge(&item, patch).await?;
    assert_eq!(reply.code, 422, "{}", reply.body);
    s.record("deployment: image removed", &reply);

    let services = s.core("services");
    let body = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"ports": [{"port": 80}]}});
    s.post(&services, body).await?.expect(201)?;
    let reply = s
        .merge(
            &format!("{services}/web"),
            json!({"spec": {"type": "Magic"}}),
        )
        .await?;
    assert_eq!(reply.code, 422, "{}", reply.body);
    s.record("service: unknown type", &reply);

    let config_maps = s.core("configmaps");
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
        "data": {"a": "1"}});
    s.post(&config_maps, body).await?.expect(201)?;
    let reply = s
        .merge(
            &format!("{config_maps}/cfg"),
            json!({"data": {"not a key": "x"}}),
        )
        .await?;
    assert_eq!(reply.code, 422, "{}", reply.body);
    s.record("configmap: bad key added", &reply);
    Ok(())
}
