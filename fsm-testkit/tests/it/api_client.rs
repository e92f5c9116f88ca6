//! The server through `kube::Client`, as an operator uses it.

use crate::common;

use std::collections::BTreeMap;

use common::{Gadget, GadgetSpec, Widget, WidgetStatus, install, status, widget, within};
use fsm_testkit::{ApiServer, ServerConfig};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::Discovery;
use serde_json::json;

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
    );
    c.data = Some(BTreeMap::from([("k".to_string(), "v".to_string())]));
    c
}

fn names<K: kube::Resource>(items: &[K]) -> Vec<String> {
    items
        .iter()
        .map(|o| o.meta().name.clone().unwrap())
        .collect()
}

#[tokio::test]
async fn configmap_crud_and_request_log() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let pp = PostParams::default();

    let created = cms.create(&pp, &cm("a", &[("app", "web")])).await.unwrap();
    let meta = &created.metadata;
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    assert!(meta.uid.is_some() && meta.creation_timestamp.is_some());
    assert!(meta.resource_version.is_some());
    assert_eq!(meta.generation, None, "ConfigMaps do not track generation");

    let got = cms.get("a").await.unwrap();
    assert_eq!(got, created);

    let mut changed = got.clone();
    changed.data = Some(BTreeMap::from([("k".to_string(), "w".to_string())]));
    let replaced = cms.replace("a", &pp, &changed).await.unwrap();
    assert_eq!(replaced.data.unwrap()["k"], "w");
    let rv_after_replace: u64 = replaced.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv_after_replace > created.metadata.resource_version.unwrap().parse().unwrap());

    let patched = cms
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"extra": "1", "k": null}})),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.data.unwrap(),
        BTreeMap::from([("extra".to_string(), "1".to_string())])
    );

    cms.delete("a", &DeleteParams::default()).await.unwrap();
    let e = status(cms.get("a").await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(e.message, r#"configmaps "a" not found"#);

    let log = server.request_log();
    assert_eq!(log.count("create", "configmaps"), 1);
    assert_eq!(log.count("get", "configmaps"), 2);
    assert_eq!(log.count("update", "configmaps"), 1);
    assert_eq!(log.count("patch", "configmaps"), 1);
    assert_eq!(log.count("delete", "configmaps"), 1);
    let missed = log
        .records()
        .into_iter()
        .find(|r| r.code == 404)
        .expect("the failed get is recorded");
    assert_eq!(
        (
            missed.verb.as_str(),
            missed.resource.as_str(),
            missed.name.as_deref()
        ),
        ("get", "configmaps", Some("a"))
    );
    assert_eq!(missed.namespace.as_deref(), Some("default"));
}

#[tokio::test]
async fn label_and_field_selectors_and_paging() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let pp = PostParams::default();
    for (name, app, tier) in [
        ("a", "web", "front"),
        ("b", "web", "back"),
        ("c", "db", "back"),
    ] {
        cms.create(&pp, &cm(name, &[("app", app), ("tier", tier)]))
            .await
            .unwrap();
    }
    cms.create(&pp, &cm("d", &[])).await.unwrap();
    let select = |sel: &'static str| {
        let cms = cms.clone();
        async move {
            names(
                &cms.list(&ListParams::default().labels(sel))
                    .await
                    .unwrap()
                    .items,
            )
        }
    };
    assert_eq!(select("app=web").await, ["a", "b"]);
    assert_eq!(select("app==web,tier=back").await, ["b"]);
    assert_eq!(select("app!=web").await, ["c", "d"]);
    assert_eq!(
        select("tier in (front, back),app notin (db)").await,
        ["a", "b"]
    );
    assert_eq!(select("app").await, ["a", "b", "c"]);
    assert_eq!(select("!app").await, ["d"]);

    let by_name = cms
        .list(&ListParams::default().fields("metadata.name=c"))
        .await
        .unwrap();
    assert_eq!(names(&by_name.items), ["c"]);
    let not_ns = cms
        .list(&ListParams::default().fields("metadata.namespace!=default"))
        .await
        .unwrap();
    assert!(not_ns.items.is_empty());
    let e = status(
        cms.list(&ListParams::default().fields("data.k=v"))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));

    let mut all = Vec::new();
    let mut lp = ListParams::default().limit(3);
    let mut pages = 0;
    loop {
        let page = cms.list(&lp).await.unwrap();
        pages += 1;
        all.extend(names(&page.items));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => lp = ListParams::default().limit(3).continue_token(&token),
            None => break,
        }
    }
    assert_eq!(pages, 2);
    assert_eq!(all, ["a", "b", "c", "d"]);
}

#[tokio::test]
async fn continue_token_older_than_the_history_is_gone() {
    let server = ApiServer::with_config(ServerConfig {
        history_limit: 4,
        ..ServerConfig::default()
    });
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let pp = PostParams::default();
    for name in ["a", "b", "c"] {
        cms.create(&pp, &cm(name, &[])).await.unwrap();
    }
    let page = cms.list(&ListParams::default().limit(1)).await.unwrap();
    let token = page.metadata.continue_.unwrap();
    for i in 0..10 {
        cms.create(&pp, &cm(&format!("n{i}"), &[])).await.unwrap();
    }
    let e = status(
        cms.list(&ListParams::default().limit(1).continue_token(&token))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
}

#[tokio::test]
async fn missing_namespace_is_refused_like_the_real_server() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "nope");
    let e = status(
        cms.create(&PostParams::default(), &cm("a", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(e.message, r#"namespaces "nope" not found"#);
    let details = e.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("nope", "namespaces")
    );

    let nss: Api<Namespace> = Api::all(server.client());
    let listed = names(&nss.list(&ListParams::default()).await.unwrap().items);
    assert!(listed.contains(&"default".to_string()) && listed.contains(&"kube-system".to_string()));
}

#[tokio::test]
async fn already_exists_and_generate_name() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let pp = PostParams::default();
    cms.create(&pp, &cm("a", &[])).await.unwrap();
    let e = status(cms.create(&pp, &cm("a", &[])).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(e.message, r#"configmaps "a" already exists"#);

    let mut generated = ConfigMap::default();
    generated.metadata.generate_name = Some("job-".into());
    let one = cms
        .create(&pp, &generated)
        .await
        .unwrap()
        .metadata
        .name
        .unwrap();
    let two = cms
        .create(&pp, &generated)
        .await
        .unwrap()
        .metadata
        .name
        .unwrap();
    assert!(
        one.starts_with("job-") && one.len() == "job-".len() + 5,
        "{one}"
    );
    assert_ne!(one, two);
}

#[tokio::test]
async fn stale_updates_conflict() {
    let server = ApiServer::new();
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let pp = PostParams::default();
    let first = cms.create(&pp, &cm("a", &[])).await.unwrap();
    let mut newer = first.clone();
    newer.data = Some(BTreeMap::from([("k".to_string(), "2".to_string())]));
    cms.replace("a", &pp, &newer).await.unwrap();
    let e = status(cms.replace("a", &pp, &first).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert!(
        e.message.contains("the object has been modified"),
        "{}",
        e.message
    );

    // A merge patch naming a stale resourceVersion conflicts too.
    let stale_rv = first.metadata.resource_version.clone().unwrap();
    let e = status(
        cms.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"resourceVersion": stale_rv}, "data": {"x": "y"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 409);

    // Custom resources refuse an update without a resourceVersion.
    install::<Widget>(&client).await;
    let widgets: Api<Widget> = Api::default_namespaced(client);
    widgets.create(&pp, &widget("w", 1)).await.unwrap();
    let e = status(
        widgets
            .replace("w", &pp, &widget("w", 2))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(
        e.message.contains("metadata.resourceVersion"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn custom_resource_crud_and_discovery() {
    let server = ApiServer::new();
    let client = server.client();
    let crd = install::<Widget>(&client).await;
    let conditions = crd.status.unwrap().conditions.unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "NamesAccepted" && c.status == "True")
    );

    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let group = discovery
        .groups()
        .find(|g| g.name() == "example.com")
        .expect("example.com is discovered");
    let (ar, caps) = group
        .recommended_resources()
        .into_iter()
        .find(|(ar, _)| ar.kind == "Widget")
        .expect("Widget is discovered");
    assert_eq!(ar.plural, "widgets");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    assert!(
        caps.subresources
            .iter()
            .any(|(s, _)| s.plural == "widgets/status" || s.plural == "status")
    );

    let widgets: Api<Widget> = Api::default_namespaced(client.clone());
    let pp = PostParams::default();
    let w = widgets.create(&pp, &widget("one", 3)).await.unwrap();
    assert_eq!(w.metadata.generation, Some(1));
    assert_eq!(w.spec.size, 3);
    let listed = widgets.list(&ListParams::default()).await.unwrap();
    assert_eq!(names(&listed.items), ["one"]);
    let patched = widgets
        .patch(
            "one",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(
        (patched.spec.size, patched.metadata.generation),
        (4, Some(2))
    );
    widgets
        .delete("one", &DeleteParams::default())
        .await
        .unwrap();
    assert!(widgets.get_opt("one").await.unwrap().is_none());

    // Cluster-scoped custom resources, without a status subresource.
    install::<Gadget>(&client).await;
    let gadgets: Api<Gadget> = Api::all(client.clone());
    let g = gadgets
        .create(
            &pp,
            &Gadget::new(
                "g",
                GadgetSpec {
                    color: "red".into(),
                },
            ),
        )
        .await
        .unwrap();
    assert_eq!(g.metadata.namespace, None);

    // Deleting a CRD removes its objects and its resource.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete("gadgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let e = status(gadgets.get("g").await.unwrap_err());
    assert_eq!(e.code, 404);
    let discovery = Discovery::new(client).run().await.unwrap();
    let kinds: Vec<String> = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .map(|(ar, _)| ar.kind)
        .collect();
    assert!(kinds.contains(&"Widget".to_string()));
    assert!(!kinds.contains(&"Gadget".to_string()));
}

#[tokio::test]
async fn status_subresource_and_generation_rules() {
    let server = ApiServer::new();
    let client = server.client();
    install::<Widget>(&client).await;
    let widgets: Api<Widget> = Api::default_namespaced(client.clone());
    let pp = PostParams::default();

    let mut w = widget("w", 1);
    w.status = Some(WidgetStatus {
        ready: true,
        observed_generation: None,
    });
    let created = widgets.create(&pp, &w).await.unwrap();
    assert_eq!(created.status, None, "status is dropped on create");
    assert_eq!(created.metadata.generation, Some(1));

    // A write to the object ignores status; a spec change bumps generation.
    let mut main = created.clone();
    main.spec.size = 2;
    main.status = Some(WidgetStatus {
        ready: true,
        observed_generation: Some(9),
    });
    let after_main = widgets.replace("w", &pp, &main).await.unwrap();
    assert_eq!(after_main.status, None);
    assert_eq!(after_main.metadata.generation, Some(2));

    // A write to /status changes only status; generation stays.
    let mut st = after_main.clone();
    st.spec.size = 100;
    st.metadata.labels = Some(BTreeMap::from([("ignored".to_string(), "yes".to_string())]));
    st.status = Some(WidgetStatus {
        ready: true,
        observed_generation: Some(2),
    });
    let after_status = widgets.replace_status("w", &pp, &st).await.unwrap();
    assert_eq!(after_status.spec.size, 2);
    assert_eq!(after_status.metadata.labels, None);
    assert_eq!(
        after_status.status.as_ref().unwrap().observed_generation,
        Some(2)
    );
    assert_eq!(after_status.metadata.generation, Some(2));

    // patch_status (merge) works the same way.
    let patched = widgets
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 50}, "status": {"ready": false}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.size, 2);
    assert!(!patched.status.as_ref().unwrap().ready);
    assert_eq!(patched.metadata.generation, Some(2));
    assert_eq!(
        widgets.get_status("w").await.unwrap().status,
        patched.status
    );

    // Metadata-only changes keep generation.
    let labelled = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(2));
    // Status written to the object is ignored, and is no spec change.
    let ignored = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert!(!ignored.status.unwrap().ready);
    assert_eq!(ignored.metadata.generation, Some(2));

    // Built-in kinds follow the same rules (Deployment).
    let deps: Api<Deployment> = Api::default_namespaced(client);
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .unwrap();
    let d = deps.create(&pp, &d).await.unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    let d = deps
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(2));
    let d = deps
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"readyReplicas": 3, "replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(2));
    assert_eq!(d.status.unwrap().ready_replicas, Some(3));
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let server = ApiServer::new();
    let client = server.client();
    install::<Widget>(&client).await;
    let widgets: Api<Widget> = Api::default_namespaced(client);
    let mut w = widget("held", 1);
    w.metadata.finalizers = Some(vec!["example.com/cleanup".into()]);
    widgets.create(&PostParams::default(), &w).await.unwrap();

    let deleted = widgets
        .delete("held", &DeleteParams::default())
        .await
        .unwrap();
    let marked = deleted
        .left()
        .expect("the object is returned while it waits");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(
        marked.metadata.generation,
        Some(2),
        "deletion bumps generation"
    );
    let still = widgets.get("held").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());

    // Deleting again changes nothing.
    let again = widgets
        .delete("held", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        again.left().unwrap().metadata.resource_version,
        still.metadata.resource_version
    );

    // No new finalizers while deleting.
    let e = status(
        widgets
            .patch(
                "held",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"finalizers": ["example.com/cleanup", "other"]}}),
                ),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));

    // Removing the last finalizer removes the object.
    widgets
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    assert!(widgets.get_opt("held").await.unwrap().is_none());
}

#[tokio::test]
async fn delete_preconditions_and_collection() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let pp = PostParams::default();
    let a = cms.create(&pp, &cm("a", &[("app", "x")])).await.unwrap();
    cms.create(&pp, &cm("b", &[("app", "x")])).await.unwrap();
    cms.create(&pp, &cm("c", &[("app", "y")])).await.unwrap();

    let wrong = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("not-the-uid".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let e = status(cms.delete("a", &wrong).await.unwrap_err());
    assert_eq!(e.code, 409);
    let right = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: a.metadata.uid.clone(),
            resource_version: a.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    cms.delete("a", &right).await.unwrap();

    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("app=x"),
    )
    .await
    .unwrap();
    let left = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(names(&left.items), ["c"]);
}

#[tokio::test]
async fn namespaces_take_their_objects_with_them() {
    let server = ApiServer::new();
    let client = server.client();
    let nss: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("team".into());
    let created = nss.create(&PostParams::default(), &ns).await.unwrap();
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Active"));
    let cms: Api<ConfigMap> = Api::namespaced(client, "team");
    cms.create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let terminating = nss
        .delete("team", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("a namespace is answered while it terminates");
    assert_eq!(
        terminating.status.unwrap().phase.as_deref(),
        Some("Terminating")
    );
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, None);
    // Until the namespace controller has run, new content is refused.
    let e = status(
        cms.create(&PostParams::default(), &cm("late", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert!(
        e.message.contains(
            "unable to create new content in namespace team because it is being terminated"
        ),
        "{}",
        e.message
    );
    within(5, async {
        while nss.get_opt("team").await.unwrap().is_some() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    let e = status(cms.get("a").await.unwrap_err());
    assert_eq!(e.code, 404);
}

#[tokio::test]
async fn secrets_leases_and_other_builtins() {
    let server = ApiServer::new();
    let client = server.client();
    let secrets: Api<Secret> = Api::default_namespaced(client.clone());
    let mut s = Secret::default();
    s.metadata.name = Some("creds".into());
    s.string_data = Some(BTreeMap::from([(
        "password".to_string(),
        "hunter2".to_string(),
    )]));
    let s = secrets.create(&PostParams::default(), &s).await.unwrap();
    assert_eq!(s.string_data, None);
    assert_eq!(s.data.unwrap()["password"].0, b"hunter2".to_vec());
    assert_eq!(s.type_.as_deref(), Some("Opaque"));

    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let mut l = Lease::default();
    l.metadata.name = Some("leader".into());
    let l = leases.create(&PostParams::default(), &l).await.unwrap();
    let patched = leases
        .patch(
            "leader",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().holder_identity.as_deref(), Some("me"));
    assert_ne!(
        patched.metadata.resource_version,
        l.metadata.resource_version
    );

    // Every built-in kind of the issue is served.
    let discovery = Discovery::new(client).run().await.unwrap();
    let kinds: Vec<(String, String)> = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .map(|(ar, _)| (ar.group, ar.kind))
        .collect();
    for (group, kind) in [
        ("", "Namespace"),
        ("", "ConfigMap"),
        ("", "Secret"),
        ("", "Service"),
        ("", "Pod"),
        ("", "Event"),
        ("events.k8s.io", "Event"),
        ("apps", "Deployment"),
        ("apps", "StatefulSet"),
        ("batch", "Job"),
        ("coordination.k8s.io", "Lease"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ] {
        assert!(
            kinds.contains(&(group.to_string(), kind.to_string())),
            "{group}/{kind} missing from discovery"
        );
    }
}

#[tokio::test]
async fn http_listener_with_kubeconfig() {
    let server = ApiServer::with_config(ServerConfig::default());
    let http = server.serve_http().await.unwrap();
    assert!(http.addr().ip().is_loopback());
    let text = std::fs::read_to_string(http.kubeconfig()).unwrap();
    assert!(text.contains(&http.url()));
    let client = http.kube_client().await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    within(
        10,
        cms.create(&PostParams::default(), &cm("over-http", &[])),
    )
    .await
    .unwrap();
    // The in-process client sees what was written over HTTP: one server.
    let local: Api<ConfigMap> = Api::default_namespaced(server.client());
    assert!(local.get("over-http").await.is_ok());
    let version = within(10, http.kube_client().await.unwrap().apiserver_version())
        .await
        .unwrap();
    assert_eq!(version.major, "1");
    let path = http.kubeconfig().to_path_buf();
    drop(http);
    assert!(!path.exists(), "the temporary kubeconfig is removed");
}
