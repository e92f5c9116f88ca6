//! Watches: the event sequence of a series of changes, and how a label
//! selector turns an object leaving or entering it into DELETED / ADDED.

use integration_tests::{Fallible, Scene};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

/// `type` and the object's name and data of each event.
fn summary(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .map(|e| {
            json!([
                e["type"],
                e["object"]["metadata"]["name"],
                e["object"]["data"],
                e["object"]["metadata"]["labels"],
            ])
        })
        .collect()
}

/// Watch from a list's resourceVersion: create, patch, create, delete arrive
/// in order as ADDED, MODIFIED, ADDED, DELETED, with the objects as written.
pub async fn watch_event_sequence(s: &mut Scene) -> Fallible {
    let api: Api<ConfigMap> = s.api();
    let rv = api
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let path = s.core("configmaps");
    let changes = async {
        s.post(&path, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"n": "1"}}))
            .await?
            .expect(201)?;
        s.merge(&format!("{path}/a"), json!({"data": {"n": "2"}}))
            .await?
            .expect(200)?;
        s.post(
            &path,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}),
        )
        .await?
        .expect(201)?;
        s.delete(&format!("{path}/a")).await?.expect(200)?;
        Ok(())
    };
    let events = s.watch_events(&api, &rv, 4, 20, changes).await?;
    let got = summary(&events);
    assert_eq!(
        got,
        vec![
            json!(["ADDED", "a", {"n": "1"}, null]),
            json!(["MODIFIED", "a", {"n": "2"}, null]),
            json!(["ADDED", "b", null, null]),
            json!(["DELETED", "a", {"n": "2"}, null]),
        ]
    );
    // The resourceVersions of the events increase.
    let rvs: Vec<u64> = events
        .iter()
        .filter_map(|e| {
            e["object"]["metadata"]["resourceVersion"]
                .as_str()?
                .parse()
                .ok()
        })
        .collect();
    assert!(rvs.windows(2).all(|w| w[0] < w[1]), "{rvs:?}");
    s.record("events", &events);
    Ok(())
}

/// A watch with a label selector: an object whose labels stop matching is
/// seen as DELETED, one that starts matching as ADDED.
pub async fn watch_with_label_selector(s: &mut Scene) -> Fallible {
    let api: Api<ConfigMap> = s.api();
    let rv = api
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let path = s.core("configmaps");
    let selected: Api<ConfigMap> = Api::namespaced(s.client(), &s.ns);
    let changes = async {
        s.post(
            &path,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "m", "labels": {"watched": "yes"}}}),
        )
        .await?
        .expect(201)?;
        s.post(
            &path,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "other", "labels": {"watched": "no"}}}),
        )
        .await?
        .expect(201)?;
        s.merge(
            &format!("{path}/m"),
            json!({"metadata": {"labels": {"watched": "no"}}}),
        )
        .await?
        .expect(200)?;
        s.merge(
            &format!("{path}/other"),
            json!({"metadata": {"labels": {"watched": "yes"}}}),
        )
        .await?
        .expect(200)?;
        let done: Fallible = Ok(());
        done
    };
    let params = kube::api::WatchParams::default()
        .labels("watched=yes")
        .timeout(20);
    use futures::{StreamExt, TryStreamExt};
    let stream = selected.watch(&params, &rv).await?;
    let collect = stream
        .try_filter(|e| std::future::ready(!matches!(e, kube::api::WatchEvent::Bookmark(_))))
        .take(3)
        .map(|e| Ok::<_, Box<dyn std::error::Error + Send + Sync>>(serde_json::to_value(e?)?))
        .try_collect::<Vec<Value>>();
    let (events, done) = tokio::join!(collect, changes);
    done?;
    let events = events?;
    let got = summary(&events);
    assert_eq!(got[0], json!(["ADDED", "m", null, {"watched": "yes"}]));
    assert_eq!((&got[1][0], &got[1][1]), (&json!("DELETED"), &json!("m")));
    assert_eq!(got[2], json!(["ADDED", "other", null, {"watched": "yes"}]));
    let types: Vec<(&Value, &Value)> = got.iter().map(|e| (&e[0], &e[1])).collect();
    s.record("event types", types);
    // The previous state, the last one that matched.
    assert_eq!(got[1][3], json!({"watched": "yes"}));
    s.record("the DELETED object", &events[1]);
    s.record("the last ADDED object", &events[2]);
    Ok(())
}

/// kube's `watcher` (list, then watch, with bookmarks), as every
/// controller uses it: the initial list, then each change, in order.
pub async fn runtime_watcher_sequence(s: &mut Scene) -> Fallible {
    use futures::StreamExt;
    use kube::runtime::watcher::{self, Event};

    let path = s.core("configmaps");
    for name in ["b", "a"] {
        s.post(
            &path,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}),
        )
        .await?
        .expect(201)?;
    }
    let api: Api<ConfigMap> = s.api();
    let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
    let name = |cm: &ConfigMap| cm.metadata.name.clone().unwrap_or_default();
    let mut seen: Vec<Value> = Vec::new();
    let mut changed = false;
    // Bounded: the whole exchange must be over in 20 s.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while seen.len() < 7 {
        let event = tokio::time::timeout_at(deadline, stream.next())
            .await
            .map_err(|_| format!("the watcher stopped early: {seen:?}"))?
            .ok_or("the watcher's stream ended")??;
        seen.push(match &event {
            Event::Init => json!(["Init"]),
            Event::InitApply(cm) => json!(["InitApply", name(cm)]),
            Event::InitDone => json!(["InitDone"]),
            Event::Apply(cm) => json!(["Apply", name(cm), cm.data]),
            Event::Delete(cm) => json!(["Delete", name(cm)]),
        });
        if matches!(event, Event::InitDone) && !changed {
            changed = true;
            s.merge(&format!("{path}/a"), json!({"data": {"n": "1"}}))
                .await?
                .expect(200)?;
            s.post(
                &path,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
            )
            .await?
            .expect(201)?;
            s.delete(&format!("{path}/b")).await?.expect(200)?;
        }
    }
    assert_eq!(
        seen,
        [
            json!(["Init"]),
            json!(["InitApply", "a"]),
            json!(["InitApply", "b"]),
            json!(["InitDone"]),
            json!(["Apply", "a", {"n": "1"}]),
            json!(["Apply", "c", null]),
            json!(["Delete", "b"]),
        ]
    );
    s.record("watcher events", &seen);
    Ok(())
}

/// A named GET with `?watch=true` is a plain GET: kube-apiserver decides
/// the verb from the name first, so the object comes back at once instead
/// of a watch held open (the web view once passed names through unencoded,
/// and `name%3Fwatch=true` held a request for 40 s on the embedded server).
pub async fn named_get_with_watch_is_a_get(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    s.post(
        &path,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w"}, "data": {"k": "v"}}),
    )
    .await?
    .expect(201)?;
    let mut seen = Vec::new();
    for query in ["watch=true", "watch=1"] {
        let held = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            s.get(&format!("{path}/w?{query}")),
        )
        .await;
        let reply =
            held.map_err(|_| format!("GET {path}/w?{query} was held open as a watch"))??;
        let reply = reply.expect(200)?;
        assert_eq!(reply.body["kind"], "ConfigMap", "{query}");
        assert_eq!(reply.body["data"], json!({"k": "v"}), "{query}");
        seen.push(json!([
            query,
            reply.body["kind"],
            reply.body["metadata"]["name"],
            reply.body["data"]
        ]));
    }
    s.record("named GET with watch", &seen);
    Ok(())
}
