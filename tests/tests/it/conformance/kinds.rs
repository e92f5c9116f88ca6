//! The kinds issue 32 added to the embedded server, as a real 1.20 server
//! serves them: claims, volumes and StorageClasses (defaults, the in-use
//! protection finalizers, tables), DaemonSets, ReplicaSets and
//! ControllerRevisions (defaults, status, validation, tables), CronJobs
//! through `batch/v1beta1` (the only version 1.20 serves), each
//! namespace's `default` ServiceAccount, and the self reviews behind
//! `kubectl auth can-i`.
//!
//! The real server runs no workload controllers (only the garbage
//! collector, namespace, service-account, volume binder and CronJob
//! controllers): nothing is created for the workloads, on both servers;
//! its claim is bound, on the embedded server by the simulation (see
//! volumes.rs); the CronJob here is not due while the scenario runs (its
//! Jobs are compared in cron_jobs.rs). The pod
//! templates inside the workloads are not compared (their defaults are
//! the pod template's, compared where that is served).

use integration_tests::scene::eventually;
use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

use super::lists::{mask_ages, table_summary};
use super::volumes::BINDER_HINT;

/// `v` without the keys `drop` (at any depth).
fn without(v: &Value, drop: &[&str]) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !drop.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), without(v, drop)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|i| without(i, drop)).collect()),
        other => other.clone(),
    }
}

/// What a created object shows beyond its identity: finalizers, spec
/// (pod templates left out) and status.
fn shape(object: &Value) -> Value {
    let mut shown = without(object, &["template", "managedFields"]);
    if let Some(meta) = shown.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|k, _| matches!(k.as_str(), "name" | "finalizers" | "generation"));
    }
    shown
}

/// The Table of `path`, AGE left out and other ages masked.
async fn table(s: &Scene, path: &str) -> Fallible<Value> {
    let reply = s.get_table(path).await?.expect(200)?;
    let summary = table_summary(&reply.body);
    Ok(json!({"columns": summary["columns"], "rows": mask_ages(&summary["rows"])}))
}

/// Takes the finalizers off the object at `path` and deletes it: the real
/// server here runs no protection controllers to do it.
pub async fn remove(s: &Scene, path: &str) -> Fallible {
    let reply = s
        .merge(path, json!({"metadata": {"finalizers": null}}))
        .await?;
    if reply.code == 200 {
        let deleted = s.delete(path).await?;
        assert!(matches!(deleted.code, 200 | 404), "{deleted:?}");
    }
    Ok(())
}

/// Waits (at most 30 s) until the object at `path` is in `phase`: the
/// volume binder made it so.
async fn settled(s: &Scene, path: &str, phase: &str) -> Fallible {
    let what = format!("{path} to be {phase} (on a real server, {BINDER_HINT})");
    eventually(&what, 30, async || {
        let reply = s.get(path).await?.expect(200)?;
        Ok((reply.body["status"]["phase"] == phase).then_some(()))
    })
    .await
}

/// A claim, a volume and a class: their defaults, the protection
/// finalizers, their tables, and a deleted claim held by its finalizer.
pub async fn kinds_claims_volumes_and_classes(s: &mut Scene) -> Fallible {
    s.simulate_claim_binding();
    let class_name = format!("{}-fast", s.ns);
    let classes = "/apis/storage.k8s.io/v1/storageclasses";
    let class = s
        .post(
            classes,
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": class_name,
                    "annotations": {"storageclass.kubernetes.io/is-default-class": "false"}},
                "provisioner": "example.com/fast", "allowVolumeExpansion": true}),
        )
        .await?
        .expect(201)?;
    assert_eq!(class.body["volumeBindingMode"], "Immediate");
    s.record("storage class", shape(&class.body));
    let class_path = format!("{classes}/{class_name}");
    s.delete_at_close(class_path.clone());
    let class_table = table(s, &class_path).await?;
    s.record("storage class table", class_table);

    let volume_name = format!("{}-pv", s.ns);
    let volumes = "/api/v1/persistentvolumes";
    let volume = s
        .post(
            volumes,
            json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume_name},
                "spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                    "storageClassName": class_name, "hostPath": {"path": "/data"},
                    "claimRef": {"namespace": s.ns, "name": "data"}}}),
        )
        .await?
        .expect(201)?;
    assert_eq!(volume.body["status"]["phase"], "Pending");
    s.record("volume", shape(&volume.body));
    let volume_path = format!("{volumes}/{volume_name}");
    s.delete_at_close(volume_path.clone());
    settled(s, &volume_path, "Available").await?;
    let volume_table = table(s, &volume_path).await?;
    s.record("volume table", volume_table);

    let claims = s.core("persistentvolumeclaims");
    let claim = s
        .post(
            &claims,
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class_name,
                    "resources": {"requests": {"storage": "1Gi"}}}}),
        )
        .await?
        .expect(201)?;
    assert_eq!(
        claim.body["metadata"]["finalizers"],
        json!(["kubernetes.io/pvc-protection"])
    );
    s.record("claim", shape(&claim.body));
    settled(s, &format!("{claims}/data"), "Bound").await?;
    let claim_table = table(s, &claims).await?;
    s.record("claim table", claim_table);
    let unknown = s
        .request(
            http::Method::GET,
            &format!("{claims}?fieldSelector=name%3Ddata"),
            None,
            None,
        )
        .await?;
    s.record("claims have no field selectors of their own", unknown);

    // A Pod mounting the claim holds it when it is deleted (on the real
    // server, no controller would release it anyway). The real server
    // admits a Pod once its namespace's default account has its token.
    s.default_service_account().await?;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}],
            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}});
    s.post(&s.core("pods"), pod).await?.expect(201)?;
    let claim_path = format!("{claims}/data");
    let deleted = s.delete(&claim_path).await?.expect(200)?;
    assert!(deleted.body["metadata"]["deletionTimestamp"].is_string());
    s.record("deleted claim, held", shape(&deleted.body));
    let held = s.get_table(&claim_path).await?.expect(200)?;
    s.record(
        "a held claim is Terminating",
        &table_summary(&held.body)["rows"][0][1],
    );
    remove(s, &claim_path).await?;
    remove(s, &volume_path).await?;
    s.delete(&class_path).await?.expect(200)?;
    Ok(())
}

/// A pod template of the workloads below.
fn template() -> Value {
    json!({"metadata": {"labels": {"app": "w"}},
        "spec": {"nodeSelector": {"disk": "ssd", "arch": "amd64"},
            "containers": [{"name": "c", "image": "nginx:1"}]}})
}

/// DaemonSets, ReplicaSets and ControllerRevisions: defaults, the status
/// the real encoding writes, generations, tables, and a revision's
/// validation (data mandatory and immutable).
pub async fn kinds_daemon_sets_replica_sets_and_revisions(s: &mut Scene) -> Fallible {
    let apps = s.core("").replace("/api/v1/", "/apis/apps/v1/");
    let daemon_sets = format!("{apps}daemonsets");
    let ds = s
        .post(
            &daemon_sets,
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
                "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": template()}}),
        )
        .await?
        .expect(201)?;
    assert_eq!(ds.body["metadata"]["generation"], 1);
    s.record("daemon set", shape(&ds.body));
    let ds_table = table(s, &daemon_sets).await?;
    s.record("daemon set table", ds_table);
    let on_delete = s
        .merge(
            &format!("{daemon_sets}/agent"),
            json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}}),
        )
        .await?
        .expect(200)?;
    s.record("daemon set on delete", shape(&on_delete.body));

    let replica_sets = format!("{apps}replicasets");
    let rs = s
        .post(
            &replica_sets,
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"},
                "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": template()}}),
        )
        .await?
        .expect(201)?;
    assert_eq!(rs.body["spec"]["replicas"], 1);
    s.record("replica set", shape(&rs.body));
    let rs_table = table(s, &replica_sets).await?;
    s.record("replica set table", rs_table);

    let revisions = format!("{apps}controllerrevisions");
    let owner = json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
        "uid": ds.body["metadata"]["uid"], "controller": true}]);
    let revision = s
        .post(
            &revisions,
            json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": {"name": "agent-1", "ownerReferences": owner},
                "data": {"spec": {"template": {"metadata": {"labels": {"app": "w"}}}}}, "revision": 1}),
        )
        .await?
        .expect(201)?;
    s.record("controller revision", shape(&revision.body));
    let revision_table = table(s, &revisions).await?;
    s.record("controller revision table", revision_table);
    let without_data = s
        .post(
            &revisions,
            json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": {"name": "bad"}, "revision": -1}),
        )
        .await?
        .expect(422)?;
    s.record("a revision without data", without_data);
    let changed = s
        .merge(
            &format!("{revisions}/agent-1"),
            json!({"data": {"other": 1}}),
        )
        .await?
        .expect(422)?;
    let causes: Vec<Value> = changed.body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!([c["reason"], c["field"]]))
        .collect();
    // The value in the message is printed as a Go struct by 1.20.
    s.record("a revision's data is immutable", causes);
    Ok(())
}

/// CronJobs through `batch/v1beta1`: defaults, status, table, and their
/// one field selector.
pub async fn kinds_cron_jobs(s: &mut Scene) -> Fallible {
    let cron_jobs = s
        .core("cronjobs")
        .replace("/api/v1/", "/apis/batch/v1beta1/");
    let created = s
        .post(
            &cron_jobs,
            json!({"apiVersion": "batch/v1beta1", "kind": "CronJob", "metadata": {"name": "nightly"},
                "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": {
                    "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}}}),
        )
        .await?
        .expect(201)?;
    assert_eq!(created.body["apiVersion"], "batch/v1beta1");
    assert_eq!(created.body["spec"]["concurrencyPolicy"], "Allow");
    s.record("cron job", without(&shape(&created.body), &["jobTemplate"]));
    let listed = table(s, &cron_jobs).await?;
    s.record("cron job table", listed);
    let suspended = s
        .merge(
            &format!("{cron_jobs}/nightly"),
            json!({"spec": {"suspend": true}}),
        )
        .await?
        .expect(200)?;
    s.record(
        "suspended",
        json!([
            suspended.body["metadata"]["generation"],
            suspended.body["spec"]["suspend"]
        ]),
    );
    let selected = s
        .get(&format!("{cron_jobs}?fieldSelector=status.successful%3D1"))
        .await?
        .expect(200)?;
    s.record("status.successful selects nothing", &selected.body["items"]);
    let refused = s
        .get(&format!("{cron_jobs}?fieldSelector=spec.schedule%3Dx"))
        .await?;
    s.record(
        "another field selector",
        json!([refused.code, refused.reason()]),
    );
    Ok(())
}

/// A new namespace gets a `default` ServiceAccount (with its token
/// Secret); deleted, it is made again.
pub async fn kinds_default_service_account(s: &mut Scene) -> Fallible {
    let path = format!("{}/default", s.core("serviceaccounts"));
    let account = s.default_service_account().await?;
    let secret = account["secrets"][0]["name"].as_str().unwrap_or_default();
    assert!(secret.starts_with("default-token-"), "{account}");
    s.record("default account", without(&shape(&account), &["secrets"]));
    let uid = account["metadata"]["uid"].clone();
    s.delete(&path).await?.expect(200)?;
    let again = eventually("the default ServiceAccount again", 30, async || {
        let reply = s.get(&path).await?;
        Ok((reply.code == 200 && reply.body["metadata"]["uid"] != uid).then_some(reply.body))
    })
    .await?;
    s.record("made again", json!(again["metadata"]["name"]));
    Ok(())
}

/// `kubectl auth can-i`: a SelfSubjectAccessReview of the admin, its
/// validation, and the rules review of `kubectl auth can-i --list`.
pub async fn kinds_self_subject_reviews(s: &mut Scene) -> Fallible {
    let access = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let rules = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
    let allowed = s
        .post(
            access,
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {"namespace": s.ns, "verb": "create",
                    "group": "apps", "resource": "deployments", "subresource": "scale"}}}),
        )
        .await?
        .expect(201)?;
    assert_eq!(allowed.body["status"]["allowed"], true);
    s.record("the admin may", &allowed);
    let non_resource = s
        .post(
            access,
            json!({"spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}}),
        )
        .await?
        .expect(201)?;
    s.record("a non-resource review", &non_resource);
    for (label, body) in [
        ("neither attributes", json!({"spec": {}})),
        (
            "both attributes",
            json!({"spec": {"resourceAttributes": {"verb": "get"},
                "nonResourceAttributes": {"path": "/x", "verb": "get"}}}),
        ),
    ] {
        let refused = s.post(access, body).await?.expect(422)?;
        s.record(label, &refused);
    }
    let listed = s
        .post(
            rules,
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                "spec": {"namespace": s.ns}}),
        )
        .await?
        .expect(201)?;
    // The real server lists rules in its cache's order: compared sorted.
    let sorted = |field: &str| {
        let mut list: Vec<String> = listed.body["status"][field]
            .as_array()
            .into_iter()
            .flatten()
            .map(Value::to_string)
            .collect();
        list.sort();
        list
    };
    s.record(
        "the admin's rules",
        json!([
            sorted("resourceRules"),
            sorted("nonResourceRules"),
            listed.body["status"]["incomplete"],
            listed.body["spec"]
        ]),
    );
    let no_namespace = s.post(rules, json!({"spec": {}})).await?.expect(400)?;
    s.record("a rules review without namespace", &no_namespace);
    let listing = s.get(access).await?;
    s.record(
        "reviews are create-only",
        json!([listing.code, listing.reason()]),
    );
    Ok(())
}
