//! Reads at a resourceVersion: consistent (snapshot) lists, one snapshot
//! for every page of a paged list, and how the server refuses versions and
//! options it cannot serve.

use integration_tests::scene::eventually;
use integration_tests::{Fallible, Reply, Scene};
use serde_json::{Value, json};

/// The names and `data.v` of a list's items, in order.
fn items(r: &Reply) -> Vec<Value> {
    r.body["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|i| json!([i["metadata"]["name"], i["data"]["v"]]))
                .collect()
        })
        .unwrap_or_default()
}

/// The names of a list's items, in order.
fn names(r: &Reply) -> Vec<Value> {
    r.body["items"]
        .as_array()
        .map(|i| i.iter().map(|i| i["metadata"]["name"].clone()).collect())
        .unwrap_or_default()
}

/// A label selector as a query parameter's value.
fn encoded(selector: &str) -> String {
    selector
        .replace('%', "%25")
        .replace(' ', "%20")
        .replace('=', "%3D")
        .replace(',', "%2C")
        .replace('>', "%3E")
        .replace('<', "%3C")
}

/// What a refusal says, without its wording: code, reason, details (the
/// causes' reasons and fields), and whether a continue token came with it.
fn refusal(r: &Reply) -> Value {
    let causes: Vec<Value> = r.body["details"]["causes"]
        .as_array()
        .map(|c| c.iter().map(|c| json!([c["reason"], c["field"]])).collect())
        .unwrap_or_default();
    json!({
        "code": r.code,
        "reason": r.body["reason"],
        "group": r.body["details"]["group"],
        "kind": r.body["details"]["kind"],
        "causes": causes,
        "retryAfterSeconds": r.body["details"]["retryAfterSeconds"],
        "continue": r.body["metadata"]["continue"].is_string(),
        "Retry-After": r.body["<Retry-After header>"],
    })
}

async fn create(s: &Scene, path: &str, name: &str) -> Fallible<Reply> {
    s.post(
        path,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": "1"}}),
    )
    .await?
    .expect(201)
}

/// `resourceVersionMatch=Exact` and the legacy `resourceVersion=N&limit=M`
/// list the snapshot at N; the pages of a paged list all come from the
/// snapshot of its first page, whatever changes in between.
pub async fn consistent_lists(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    create(s, &path, "a").await?;
    create(s, &path, "b").await?;
    let snapshot = create(s, &path, "c").await?.rv();
    // Changes after the snapshot: a modified, b deleted, d created.
    s.merge(&format!("{path}/a"), json!({"data": {"v": "2"}}))
        .await?
        .expect(200)?;
    s.delete(&format!("{path}/b")).await?.expect(200)?;
    create(s, &path, "d").await?;

    let exact = s
        .get(&format!(
            "{path}?resourceVersionMatch=Exact&resourceVersion={snapshot}"
        ))
        .await?
        .expect(200)?;
    assert_eq!(
        exact.rv(),
        snapshot,
        "the list is at the snapshot's version"
    );
    let then = vec![json!(["a", "1"]), json!(["b", "1"]), json!(["c", "1"])];
    assert_eq!(items(&exact), then);
    s.record("exact list", items(&exact));

    let newest = s
        .get(&format!(
            "{path}?resourceVersionMatch=NotOlderThan&resourceVersion={snapshot}"
        ))
        .await?
        .expect(200)?;
    let now = vec![json!(["a", "2"]), json!(["c", "1"]), json!(["d", "1"])];
    let mut got = items(&newest);
    got.sort_by_key(Value::to_string);
    assert_eq!(got, now, "NotOlderThan is the newest");
    s.record("not-older-than list", got);

    // The legacy form: a resourceVersion with a limit is an exact list.
    let first = s
        .get(&format!("{path}?resourceVersion={snapshot}&limit=2"))
        .await?
        .expect(200)?;
    assert_eq!(first.rv(), snapshot);
    assert_eq!(items(&first), then[..2]);
    assert_eq!(first.body["metadata"]["remainingItemCount"], 1);
    let token = first.body["metadata"]["continue"]
        .as_str()
        .ok_or("a continue token")?
        .to_owned();
    let second = s
        .get(&format!("{path}?limit=2&continue={token}"))
        .await?
        .expect(200)?;
    assert_eq!(second.rv(), snapshot, "the next page is the same snapshot");
    assert_eq!(items(&second), then[2..]);
    s.record("legacy paged list", [items(&first), items(&second)]);

    // A paged list of the newest objects, with changes between its pages
    // (as kube's watcher lists): the second page is still the first's snapshot.
    let first = s.get(&format!("{path}?limit=1")).await?.expect(200)?;
    let token = first.body["metadata"]["continue"]
        .as_str()
        .ok_or("a continue token")?
        .to_owned();
    s.merge(&format!("{path}/c"), json!({"data": {"v": "3"}}))
        .await?
        .expect(200)?;
    s.delete(&format!("{path}/d")).await?.expect(200)?;
    create(s, &path, "e").await?;
    let rest = s
        .get(&format!("{path}?limit=5&continue={token}"))
        .await?
        .expect(200)?;
    assert_eq!(rest.rv(), first.rv(), "one snapshot");
    assert_eq!(items(&first), [json!(["a", "2"])]);
    assert_eq!(items(&rest), [json!(["c", "1"]), json!(["d", "1"])]);
    s.record("pages across changes", [items(&first), items(&rest)]);
    Ok(())
}

/// Refusals of reads: `resourceVersionMatch` misuse (422 with the causes),
/// `resourceVersion` with `continue` (400), a non-numeric
/// `resourceVersion` (500), a `resourceVersion` newer than the server's
/// (504 `Timeout` with a `ResourceVersionTooLarge` cause after the
/// server's wait; an exact list of it is etcd's 500), label selectors with
/// invalid keys or values (400), and the watch variants.
pub async fn read_refusals(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    let rv = create(s, &path, "a").await?.rv();
    create(s, &path, "b").await?;
    let far: u64 = rv.parse::<u64>()? + 1_000_000;
    let token = s.get(&format!("{path}?limit=1")).await?.expect(200)?.body["metadata"]["continue"]
        .as_str()
        .ok_or("a continue token")?
        .to_owned();
    for query in [
        "resourceVersionMatch=Exact".to_string(),
        "resourceVersionMatch=Exact&resourceVersion=0".into(),
        format!("resourceVersionMatch=Bogus&resourceVersion={rv}"),
        format!("resourceVersionMatch=Exact&continue={token}"),
        format!("resourceVersion={rv}&continue={token}"),
        "resourceVersion=abc".into(),
        format!("resourceVersionMatch=Exact&resourceVersion={far}"),
        "labelSelector=-a%3Db".into(),
        "labelSelector=a%3D-b".into(),
        "labelSelector=a%20in%20(x,-y)".into(),
        format!("watch=true&resourceVersionMatch=NotOlderThan&resourceVersion={rv}"),
        "watch=true&resourceVersion=abc".into(),
        "watch=true&labelSelector=-a%3Db".into(),
    ] {
        let r = s.get(&format!("{path}?{query}")).await?;
        assert!(r.code >= 400, "{query}: {r:?}");
        let label = query
            .replace(&token, "TOKEN")
            .replace(&far.to_string(), "FAR")
            .replace(&rv, "RV");
        s.record(format!("list ?{label}"), refusal(&r));
    }
    // resourceVersion=0 goes with continue (the token's version is used).
    let r = s
        .get(&format!("{path}?resourceVersion=0&continue={token}"))
        .await?
        .expect(200)?;
    s.record("continue with resourceVersion=0", items(&r));

    let started = std::time::Instant::now();
    let list = s.get_once(&format!("{path}?resourceVersion={far}")).await?;
    let get = s
        .get_once(&format!("{path}/a?resourceVersion={far}"))
        .await?;
    let waited = started.elapsed();
    assert_eq!((list.code, get.code), (504, 504), "{list:?} {get:?}");
    assert!(
        waited >= std::time::Duration::from_secs(5),
        "the server waits for the version before refusing: {waited:?}"
    );
    s.record("list at a future version", refusal(&list));
    s.record("get at a future version", refusal(&get));
    let r = s.get(&format!("{path}/a?resourceVersion=abc")).await?;
    s.record("get ?resourceVersion=abc", refusal(&r));
    Ok(())
}

/// The columns and cells (AGE left out) of a Table.
pub(super) fn table_summary(t: &Value) -> Value {
    let columns: Vec<Value> = t["columnDefinitions"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|c| json!([c["name"], c["type"], c["priority"]]))
                .collect()
        })
        .unwrap_or_default();
    let age = columns.iter().position(|c| c[0] == "Age");
    let rows: Vec<Value> = t["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let mut cells = r["cells"].as_array().cloned().unwrap_or_default();
            if let Some(i) = age.filter(|i| *i < cells.len()) {
                cells.remove(i);
            }
            Value::from(cells)
        })
        .collect();
    json!({"columns": columns, "rows": rows})
}

/// `kubectl get` of built-in kinds: the Table of Deployments, StatefulSets
/// and Services (columns, `-o wide` ones with priority 1, cells); and a
/// Table watch (`kubectl get -w`): one Table per event, the column
/// definitions with the first event only.
pub async fn builtin_tables_and_table_watch(s: &mut Scene) -> Fallible {
    let ns = s.ns.clone();
    let template = json!({"metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1"}, {"name": "d", "image": "busybox"}]}});
    s.post(
        &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template}}),
    )
    .await?
    .expect(201)?;
    s.merge(
        &format!("/apis/apps/v1/namespaces/{ns}/deployments/web/status"),
        json!({"status": {"replicas": 2, "readyReplicas": 1, "updatedReplicas": 2, "availableReplicas": 1}}),
    )
    .await?
    .expect(200)?;
    s.post(
        &format!("/apis/apps/v1/namespaces/{ns}/statefulsets"),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
               "spec": {"serviceName": "db", "replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": template}}),
    )
    .await?
    .expect(201)?;
    s.post(
        &format!("/api/v1/namespaces/{ns}/services"),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db"},
               "spec": {"clusterIP": "None", "selector": {"app": "web"},
                        "ports": [{"name": "pg", "port": 5432}, {"name": "dns", "port": 53, "protocol": "UDP"}]}}),
    )
    .await?
    .expect(201)?;
    // A Pod (its service account may still be on its way on the real server).
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"automountServiceAccountToken": false,
                 "containers": [{"name": "c", "image": "nginx:1"}, {"name": "d", "image": "busybox"}]}});
    let pods = format!("/api/v1/namespaces/{ns}/pods");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let r = s.post(&pods, pod.clone()).await?;
        if r.code == 201 || std::time::Instant::now() > deadline {
            r.expect(201)?;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    s.merge(
        &format!("{pods}/p/status"),
        json!({"status": {"phase": "Running", "podIP": "10.1.1.1", "containerStatuses": [
            {"name": "c", "image": "nginx:1", "imageID": "", "ready": true, "restartCount": 2, "state": {"running": {}}},
            {"name": "d", "image": "busybox", "imageID": "", "ready": false, "restartCount": 1,
             "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}),
    )
    .await?
    .expect(200)?;
    for path in [
        pods.clone(),
        format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        format!("/apis/apps/v1/namespaces/{ns}/statefulsets"),
        format!("/api/v1/namespaces/{ns}/services"),
    ] {
        let t = s.get_table(&path).await?.expect(200)?;
        let summary = table_summary(&t.body);
        s.record(path.replace(&ns, "NS"), summary);
    }
    let deployment = table_summary(
        &s.get_table(&format!("/apis/apps/v1/namespaces/{ns}/deployments"))
            .await?
            .body,
    );
    assert_eq!(
        deployment["rows"][0],
        json!(["web", "1/2", 2, 1, "c,d", "nginx:1,busybox", "app=web"])
    );

    // A Table watch from before two creations replays them.
    let path = s.core("configmaps");
    let rv = s.get(&path).await?.expect(200)?.rv();
    for name in ["a", "b"] {
        s.post(
            &path,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}),
        )
        .await?
        .expect(201)?;
    }
    let watched = s
        .get_table(&format!(
            "{path}?watch=true&resourceVersion={rv}&timeoutSeconds=2&includeObject=None"
        ))
        .await?
        .expect(200)?;
    let text = match &watched.body {
        Value::String(t) => t.clone(),
        other => other.to_string(),
    };
    let events: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let summary: Vec<Value> = events
        .iter()
        .map(|e| {
            json!([
                e["type"],
                e["object"]["kind"],
                e["object"]["columnDefinitions"].is_null(),
                mask_ages(&table_summary(&e["object"])["rows"])
            ])
        })
        .collect();
    assert_eq!(summary.len(), 2, "{text}");
    assert_eq!(summary[0][2], false, "the first event carries the columns");
    assert_eq!(summary[1][2], true, "later ones do not");
    s.record("table watch events", summary);
    Ok(())
}

/// `rows` with every cell that reads as an age (`0s`, `1s`, `3m`…)
/// replaced by `<age>`: an age depends on when the second turned, not on
/// the server.
pub(super) fn mask_ages(rows: &Value) -> Value {
    let is_age = |t: &str| {
        t.len() > 1
            && t[..t.len() - 1].chars().all(|c| c.is_ascii_digit())
            && t.ends_with(['s', 'm', 'h', 'd'])
    };
    match rows {
        Value::Array(items) => Value::Array(items.iter().map(mask_ages).collect()),
        Value::String(t) if is_age(t) => json!("<age>"),
        other => other.clone(),
    }
}

/// A list at `resourceVersion=0` comes from the real server's watch
/// cache, which has no pages: `limit` is ignored and every item comes at
/// once, without a continue token (also with `NotOlderThan`), in the
/// cache's order (not always by name there); without the version, the same
/// `limit` pages.
pub async fn a_list_at_version_zero_is_not_paged(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    for name in ["a", "b", "c"] {
        create(s, &path, name).await?;
    }
    for query in [
        "limit=1&resourceVersion=0",
        "limit=1&resourceVersion=0&resourceVersionMatch=NotOlderThan",
    ] {
        // The cache may lag a moment behind the writes.
        let whole = eventually(query, 10, async || {
            let r = s.get(&format!("{path}?{query}")).await?.expect(200)?;
            Ok((items(&r).len() == 3).then_some(r))
        })
        .await?;
        let continued = whole.body["metadata"]["continue"].is_string();
        assert!(!continued, "{query}: {}", whole.body["metadata"]);
        // In the order of the real server's cache, not of names: compared
        // sorted.
        let mut listed = items(&whole);
        listed.sort_by_key(Value::to_string);
        s.record(query, json!({"items": listed, "continue": continued}));
    }
    let paged = s.get(&format!("{path}?limit=1")).await?.expect(200)?;
    assert_eq!(items(&paged).len(), 1);
    let continued = paged.body["metadata"]["continue"].is_string();
    assert!(continued, "{}", paged.body["metadata"]);
    s.record(
        "limit=1",
        json!({"items": items(&paged), "continue": continued}),
    );
    Ok(())
}

/// Label selectors with `>` and `<`: the label must be an integer greater
/// (less) than the value; a label that is not one, or is absent, matches
/// neither; a value that is not an integer is refused.
pub async fn integer_label_selectors(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    for (name, size) in [("one", "1"), ("five", "5"), ("word", "many")] {
        s.post(
            &path,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "labels": {"size": size}}}),
        )
        .await?
        .expect(201)?;
    }
    create(s, &path, "unlabelled").await?;
    for (selector, expected) in [
        ("size>1", vec!["five"]),
        ("size<5", vec!["one"]),
        ("size>0,size<10", vec!["five", "one"]),
        ("size<0", vec![]),
    ] {
        let r = s
            .get(&format!("{path}?labelSelector={}", encoded(selector)))
            .await?
            .expect(200)?;
        assert_eq!(names(&r), expected, "{selector}");
        s.record(selector, names(&r));
    }
    for bad in ["size>many", "size<1.5"] {
        let r = s
            .get(&format!("{path}?labelSelector={}", encoded(bad)))
            .await?
            .expect(400)?;
        assert_eq!(
            r.body["message"],
            "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer"
        );
        s.record(bad, refusal(&r));
        s.record(format!("{bad}: message"), &r.body["message"]);
    }
    Ok(())
}

/// Field selector values: `\,`, `\=` and `\\` escape; an unescaped `=` in
/// a value (`name===x`, `name!==x`: the first operator from the left
/// splits the term) or another escape is refused with the real server's
/// words; terms split at unescaped commas only.
pub async fn field_selector_values_and_escapes(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    create(s, &path, "one").await?;
    create(s, &path, "two").await?;
    for (selector, expected) in [
        ("metadata.name%3D%3Done", vec!["one"]),
        ("metadata.name%3Done%2Cmetadata.name!%3Dtwo", vec!["one"]),
        ("metadata.name!%3Done", vec!["two"]),
        ("metadata.name%3Do%5C%2Cne", vec![]),
    ] {
        let r = s
            .get(&format!("{path}?fieldSelector={selector}"))
            .await?
            .expect(200)?;
        assert_eq!(names(&r), expected, "{selector}");
        s.record(selector, names(&r));
    }
    for (selector, message) in [
        (
            "metadata.name%3D%3D%3Dx",
            "invalid field selector: unescaped character in value: 61",
        ),
        (
            "metadata.name!%3D%3Done",
            "invalid field selector: unescaped character in value: 61",
        ),
        (
            "metadata.name%3Da%5Cx",
            "invalid field selector: invalid escape sequence: \\x",
        ),
        (
            "metadata.name%3Dx%5C",
            "invalid field selector: invalid escape sequence: \\",
        ),
    ] {
        let r = s
            .get(&format!("{path}?fieldSelector={selector}"))
            .await?
            .expect(400)?;
        assert_eq!(r.body["message"], message, "{selector}");
        s.record(selector, json!([refusal(&r), r.body["message"]]));
    }
    Ok(())
}

/// Label selectors the parser refuses, each with the real parser's words
/// (what it found where it wanted what), and the odd ones it accepts
/// (`a==`: the empty value; `a in ()`, `a in (,)`: the one empty value).
pub async fn label_selector_refusals(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    create(s, &path, "a").await?;
    for selector in [
        "a=b,",
        ",a=b",
        "a=b=c",
        "a in (b",
        "a=(b)",
        "a >= 1",
        "a b",
        "a!",
        "!",
        "a>",
        "x<-1",
        "a in (x y)",
    ] {
        let query = encoded(selector);
        let r = s
            .get(&format!("{path}?labelSelector={query}"))
            .await?
            .expect(400)?;
        s.record(selector, json!([refusal(&r), r.body["message"]]));
    }
    for selector in ["a==", "a in ()", "a in (,)"] {
        let query = encoded(selector);
        let r = s
            .get(&format!("{path}?labelSelector={query}"))
            .await?
            .expect(200)?;
        s.record(selector, items(&r).len());
    }
    Ok(())
}
