//! Server-side printing: the `meta.k8s.io/v1` `Table` that `kubectl get`
//! asks for (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`).
//!
//! Columns are NAME, the resource's printer columns (a CRD's
//! `additionalPrinterColumns`), and AGE unless the resource opts out.

use serde_json::{Value, json};

use crate::resources::{PrinterColumn, ResourceDef};
use crate::time::age;

/// What each row carries in `object` (the `includeObject` parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// Nothing.
    None,
    /// A `PartialObjectMetadata` (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter (unknown values mean the default).
    #[must_use]
    pub fn parse(value: Option<&str>) -> Self {
        match value {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

/// Whether an `Accept` header asks for a Table.
#[must_use]
pub fn wanted(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

/// Renders `objects` (already presented) as a Table at `revision`.
#[must_use]
pub fn render(
    def: &ResourceDef,
    objects: &[Value],
    revision: Option<&str>,
    include: IncludeObject,
    now: jiff::Timestamp,
) -> Value {
    if crate::events::is_event(def) {
        return table(
            crate::events::table_columns(),
            objects
                .iter()
                .map(|o| row(crate::events::table_cells(def, o, now), o, include))
                .collect(),
            revision,
        );
    }
    let mut columns = vec![json!({
        "name": "Name", "type": "string", "format": "name",
        "description": "Name must be unique within a namespace.", "priority": 0
    })];
    let (before_age, after_age): (Vec<&PrinterColumn>, Vec<&PrinterColumn>) = def
        .printer_columns
        .iter()
        .partition(|c| !printed_after_age(c));
    let column = |c: &PrinterColumn| {
        let type_ = match c.type_.as_str() {
            t if crate::table_cells::column_type(t).is_some() => {
                crate::table_cells::column_type(t).unwrap_or(t)
            }
            "timestamp" => "date",
            "count" | "roleRef" | "ratio" | "int0" | "externalIPs" | "ports" | "podReady"
            | "podStatus" | "ingressClass" | "ingressHosts" | "loadBalancer" | "ingressPorts" => {
                "string"
            }
            "podRestarts" => "integer",
            t if printed_after_age(c) || t.starts_with("subjects:") => "string",
            other => other,
        };
        let priority =
            if WIDE_TYPES.contains(&c.type_.as_str()) || crate::table_cells::wide(&c.type_) {
                1
            } else {
                c.priority
            };
        json!({
            "name": c.name, "type": type_, "format": c.format,
            "description": c.description, "priority": priority
        })
    };
    columns.extend(before_age.iter().map(|c| column(c)));
    if def.age_column {
        columns.push(json!({
            "name": "Age", "type": "string", "format": "",
            "description": "CreationTimestamp is a timestamp representing the server time when this object was created.",
            "priority": 0
        }));
    }
    columns.extend(after_age.iter().map(|c| column(c)));
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut cells = vec![name_cell(def, o)];
            for c in &before_age {
                if let Some(cell) =
                    crate::table_cells::cell(&c.type_, o, &lookup(o, &c.json_path), now)
                {
                    cells.push(cell);
                    continue;
                }
                cells.push(match c.type_.as_str() {
                    "date" => lookup(o, &c.json_path)
                        .as_str()
                        .map_or(Value::Null, |t| json!(age(t, now))),
                    "count" => json!(count(o, &c.json_path)),
                    "int0" => json!(lookup(o, &c.json_path).as_i64().unwrap_or(0)),
                    "externalIPs" => json!(external_ips(&lookup(o, &c.json_path), &o["status"])),
                    "ports" => json!(ports(&lookup(o, &c.json_path))),
                    "ingressClass" => match lookup(o, &c.json_path) {
                        Value::String(class) => json!(class),
                        _ => json!("<none>"),
                    },
                    "ingressHosts" => json!(ingress_hosts(&lookup(o, &c.json_path))),
                    "loadBalancer" => json!(load_balancer(&lookup(o, &c.json_path))),
                    // TLS adds 443 whatever its hosts, as the real printer.
                    "ingressPorts" => match lookup(o, &c.json_path).as_array() {
                        Some(tls) if !tls.is_empty() => json!("80, 443"),
                        _ => json!("80"),
                    },
                    "podReady" | "podStatus" | "podRestarts" => {
                        let (ready, status, restarts) = pod_state(o);
                        match c.type_.as_str() {
                            "podReady" => json!(ready),
                            "podStatus" => json!(status),
                            _ => json!(restarts),
                        }
                    }
                    "ratio" => {
                        let n = |p: &str| lookup(o, p.trim()).as_i64().unwrap_or(0);
                        let (a, b) = c.json_path.split_once(',').unwrap_or((&c.json_path, ""));
                        json!(format!("{}/{}", n(a), n(b)))
                    }
                    "roleRef" => {
                        let r = lookup(o, &c.json_path);
                        match (r["kind"].as_str(), r["name"].as_str()) {
                            (Some(kind), Some(name)) => json!(format!("{kind}/{name}")),
                            _ => Value::Null,
                        }
                    }
                    _ => lookup(o, &c.json_path),
                });
            }
            if def.age_column {
                let created = o["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or_default();
                cells.push(json!(age(created, now)));
            }
            for c in &after_age {
                if let Some(cell) =
                    crate::table_cells::cell(&c.type_, o, &lookup(o, &c.json_path), now)
                {
                    cells.push(cell);
                    continue;
                }
                cells.push(match c.type_.as_str() {
                    "containers" | "images" => {
                        let field = if c.type_ == "images" { "image" } else { "name" };
                        json!(
                            lookup(o, &c.json_path)
                                .as_array()
                                .into_iter()
                                .flatten()
                                .map(|x| x[field].as_str().unwrap_or_default())
                                .collect::<Vec<_>>()
                                .join(",")
                        )
                    }
                    "selector" => json!(selector(&lookup(o, &c.json_path))),
                    "orNone" => match lookup(o, &c.json_path) {
                        Value::String(v) if !v.is_empty() => json!(v),
                        _ => json!("<none>"),
                    },
                    "readinessGates" => json!(readiness_gates(o)),
                    t => json!(subjects(
                        &lookup(o, &c.json_path),
                        t.trim_start_matches("subjects:")
                    )),
                });
            }
            row(cells, o, include)
        })
        .collect();
    table(columns, rows, revision)
}

/// The NAME cell: the object's name; a default StorageClass's is followed
/// by ` (default)`, as the real printer writes it.
fn name_cell(def: &ResourceDef, o: &Value) -> Value {
    let name = &o["metadata"]["name"];
    let annotations = &o["metadata"]["annotations"];
    let default_class = def.group == "storage.k8s.io"
        && def.plural == "storageclasses"
        && [
            "storageclass.kubernetes.io/is-default-class",
            "storageclass.beta.kubernetes.io/is-default-class",
        ]
        .iter()
        .any(|a| annotations[*a] == "true");
    match name.as_str() {
        Some(n) if default_class => json!(format!("{n} (default)")),
        _ => name.clone(),
    }
}

/// Built-in column types the real server prints only with `-o wide`
/// (priority 1), after AGE: a pod template's container names and images,
/// and a label selector.
const WIDE_TYPES: [&str; 5] = [
    "containers",
    "images",
    "selector",
    "orNone",
    "readinessGates",
];

/// A Pod's READY (`ready/containers`), STATUS and RESTARTS, as the real
/// printer reads them from its container statuses.
fn pod_state(pod: &Value) -> (String, String, i64) {
    let total = pod["spec"]["containers"].as_array().map_or(0, Vec::len);
    let status = &pod["status"];
    let mut reason = status["reason"]
        .as_str()
        .filter(|r| !r.is_empty())
        .or_else(|| status["phase"].as_str())
        .unwrap_or_default()
        .to_string();
    let (mut ready, mut restarts, mut running) = (0, 0, false);
    let statuses = status["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for c in statuses.iter().rev() {
        restarts += c["restartCount"].as_i64().unwrap_or(0);
        let state = &c["state"];
        let reason_of = |s: &Value| {
            s["reason"]
                .as_str()
                .filter(|r| !r.is_empty())
                .map(String::from)
        };
        if let Some(r) = reason_of(&state["waiting"]) {
            reason = r;
        } else if let Some(r) = reason_of(&state["terminated"]) {
            reason = r;
        } else if state["terminated"].is_object() {
            let t = &state["terminated"];
            reason = match t["signal"].as_i64().filter(|s| *s != 0) {
                Some(signal) => format!("Signal:{signal}"),
                None => format!("ExitCode:{}", t["exitCode"].as_i64().unwrap_or(0)),
            };
        } else if c["ready"] == true && state["running"].is_object() {
            running = true;
            ready += 1;
        }
    }
    if reason == "Completed" && running {
        reason = "Running".into();
    }
    if pod["metadata"]["deletionTimestamp"].is_string() {
        reason = if status["reason"] == "NodeLost" {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    (format!("{ready}/{total}"), reason, restarts)
}

/// A Pod's READINESS GATES: `true/all` of its gates' conditions, `<none>`.
fn readiness_gates(pod: &Value) -> String {
    let gates = pod["spec"]["readinessGates"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if gates.is_empty() {
        return "<none>".into();
    }
    let conditions = pod["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let met = gates
        .iter()
        .filter(|g| {
            conditions
                .iter()
                .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
        })
        .count();
    format!("{met}/{}", gates.len())
}

fn printed_after_age(c: &PrinterColumn) -> bool {
    c.type_.starts_with("subjects:")
        || WIDE_TYPES.contains(&c.type_.as_str())
        || crate::table_cells::wide(&c.type_)
}

/// A Service's EXTERNAL-IP: its external IPs, a load balancer's ingress
/// (`<pending>` until it has one), else `<none>`.
fn external_ips(spec: &Value, status: &Value) -> String {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str().map(String::from))
            .collect()
    };
    let mut ips = strings(&spec["externalIPs"]);
    if spec["type"] == "LoadBalancer" {
        let ingress: Vec<String> = status["loadBalancer"]["ingress"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["ip"].as_str().or_else(|| i["hostname"].as_str()))
            .map(String::from)
            .collect();
        if ingress.is_empty() && ips.is_empty() {
            return "<pending>".into();
        }
        ips.extend(ingress);
    }
    if spec["type"] == "ExternalName" {
        return spec["externalName"]
            .as_str()
            .unwrap_or("<none>")
            .to_string();
    }
    if ips.is_empty() {
        "<none>".into()
    } else {
        ips.join(",")
    }
}

/// A Service's PORT(S): `port[:nodePort]/protocol`, joined; `<none>`.
fn ports(list: &Value) -> String {
    let parts: Vec<String> = list
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let protocol = p["protocol"].as_str().unwrap_or("TCP");
            match p["nodePort"].as_i64() {
                Some(node) => format!("{}:{node}/{protocol}", p["port"]),
                None => format!("{}/{protocol}", p["port"]),
            }
        })
        .collect();
    if parts.is_empty() {
        "<none>".into()
    } else {
        parts.join(",")
    }
}

/// An Ingress's HOSTS as the real printer writes them: the rules' hosts
/// up to three, then `+ N more...` (N counting the rules after the third
/// host, hosted or not); `*` when no rule names a host.
fn ingress_hosts(rules: &Value) -> String {
    const SHOWN: usize = 3;
    let rules = rules.as_array().map(Vec::as_slice).unwrap_or_default();
    let mut hosts: Vec<&str> = Vec::new();
    let mut more = false;
    for rule in rules {
        if hosts.len() == SHOWN {
            more = true;
            break;
        }
        if let Some(host) = rule["host"].as_str().filter(|h| !h.is_empty()) {
            hosts.push(host);
        }
    }
    if hosts.is_empty() {
        "*".into()
    } else if more {
        format!("{} + {} more...", hosts.join(","), rules.len() - SHOWN)
    } else {
        hosts.join(",")
    }
}

/// A load balancer status' ADDRESS: the ingress points' IPs (else host
/// names), sorted and unique, cut to 16 characters as without `-o wide`;
/// empty when there is none.
fn load_balancer(status: &Value) -> String {
    const WIDTH: usize = 16;
    let points: std::collections::BTreeSet<&str> = status["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| {
            i["ip"]
                .as_str()
                .filter(|ip| !ip.is_empty())
                .or_else(|| i["hostname"].as_str().filter(|h| !h.is_empty()))
        })
        .collect();
    let joined = points.into_iter().collect::<Vec<_>>().join(",");
    if joined.len() > WIDTH {
        format!("{}...", &joined[..WIDTH - 3])
    } else {
        joined
    }
}

/// A `LabelSelector` as the real printer formats it (`a=b,c in (d)`), or a
/// plain label map (a Service's selector); `<none>` when empty.
fn selector(s: &Value) -> String {
    let labels = if s.get("matchLabels").is_some() || s.get("matchExpressions").is_some() {
        &s["matchLabels"]
    } else {
        s
    };
    let mut parts: Vec<String> = labels
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    for e in s["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        parts.push(match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        });
    }
    if parts.is_empty() {
        "<none>".into()
    } else {
        parts.join(",")
    }
}

/// A binding's subjects of `kind`, joined as the real server prints them.
fn subjects(list: &Value, kind: &str) -> String {
    list.as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["kind"] == kind)
        .map(|s| {
            let name = s["name"].as_str().unwrap_or_default();
            if kind == "ServiceAccount" {
                format!("{}/{name}", s["namespace"].as_str().unwrap_or_default())
            } else {
                name.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A row of `cells` for `o`, carrying what `include` asks for.
fn row(cells: Vec<Value>, o: &Value, include: IncludeObject) -> Value {
    let mut row = json!({ "cells": cells });
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            row["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": o["metadata"],
            });
        }
        IncludeObject::Object => row["object"] = o.clone(),
    }
    row
}

fn table(columns: Vec<Value>, rows: Vec<Value>, revision: Option<&str>) -> Value {
    let mut metadata = json!({});
    if let Some(rv) = revision {
        metadata["resourceVersion"] = json!(rv);
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

/// Evaluates a simple JSONPath (`.a.b`, `.a[0].b`); `null` when absent or unsupported.
#[must_use]
pub fn lookup(object: &Value, path: &str) -> Value {
    let mut cur = object;
    for seg in path.trim_start_matches('.').split('.') {
        if seg.is_empty() {
            continue;
        }
        let (field, index) = match seg.split_once('[') {
            Some((f, rest)) => (
                f,
                rest.strip_suffix(']').and_then(|i| i.parse::<usize>().ok()),
            ),
            None => (seg, None),
        };
        let Some(next) = cur.get(field) else {
            return Value::Null;
        };
        cur = match (seg.contains('['), index) {
            (false, _) => next,
            (true, Some(i)) => match next.get(i) {
                Some(v) => v,
                None => return Value::Null,
            },
            (true, None) => return Value::Null,
        };
    }
    cur.clone()
}

/// The number of entries of the maps or lists at the comma-separated `paths`.
#[must_use]
pub fn count(object: &Value, paths: &str) -> usize {
    paths
        .split(',')
        .map(|p| match lookup(object, p.trim()) {
            Value::Object(m) => m.len(),
            Value::Array(a) => a.len(),
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ingress_prints_class_hosts_address_and_ports_as_the_real_server() {
        let r = crate::builtins::registry();
        let def = r.get("networking.k8s.io", "v1", "ingresses").unwrap();
        let now = jiff::Timestamp::from_second(1_000_000).unwrap();
        let created = crate::time::timestamp(now);
        let rule = |host: &str| json!({"host": host});
        let plain = json!({"metadata": {"name": "web", "creationTimestamp": created},
            "spec": {"rules": [{"http": {}}]}, "status": {"loadBalancer": {}}});
        let busy = json!({"metadata": {"name": "busy", "creationTimestamp": created},
            "spec": {"ingressClassName": "nginx", "tls": [{"hosts": ["a.example"]}],
                     "rules": [rule("a.example"), rule(""), rule("b.example"), rule("c.example"), rule("d.example")]},
            "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.12"}, {"hostname": "lb.example.com"}]}}});
        let t = render(&def, &[plain, busy], None, IncludeObject::None, now);
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "Class", "Hosts", "Address", "Ports", "Age"]);
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["web", "<none>", "*", "", "80", "0s"])
        );
        assert_eq!(
            t["rows"][1]["cells"],
            json!([
                "busy",
                "nginx",
                // N is the rules past the third, not the hosts left out.
                "a.example,b.example,c.example + 2 more...",
                "10.0.0.12,lb....",
                "80, 443",
                "0s"
            ])
        );
    }

    #[test]
    fn accept_header_detection() {
        assert!(wanted(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(!wanted("application/json"));
        assert!(!wanted("application/json, application/json;as=Table"));
    }

    #[test]
    fn rows_have_name_columns_and_age() {
        let r = crate::builtins::registry();
        let def = r.get("apps", "v1", "deployments").unwrap();
        let now = jiff::Timestamp::from_second(1_000_000).unwrap();
        let created =
            crate::time::timestamp(jiff::Timestamp::from_second(1_000_000 - 300).unwrap());
        let o = json!({"metadata": {"name": "web", "creationTimestamp": created},
                       "spec": {"replicas": 3}, "status": {"readyReplicas": 1}});
        let t = render(&def, &[o], Some("9"), IncludeObject::Metadata, now);
        assert_eq!(t["kind"], "Table");
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            vec![
                "Name",
                "Ready",
                "Up-to-date",
                "Available",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["web", "1/3", 0, 0, "5m", "", "", "<none>"])
        );
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["metadata"]["resourceVersion"], "9");
    }

    #[test]
    fn services_print_external_ips_ports_and_selector() {
        let r = crate::builtins::registry();
        let def = r.get("", "v1", "services").unwrap();
        let now = jiff::Timestamp::from_second(1_000_000).unwrap();
        let created = crate::time::timestamp(now);
        let o = json!({"metadata": {"name": "n", "creationTimestamp": created},
            "spec": {"type": "NodePort", "clusterIP": "10.0.0.1", "externalIPs": ["1.2.3.4"],
                     "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}});
        let t = render(&def, &[o], None, IncludeObject::None, now);
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "n",
                "NodePort",
                "10.0.0.1",
                "1.2.3.4",
                "80:30080/TCP,53/UDP",
                "0s",
                "<none>"
            ])
        );
        let lb = json!({"metadata": {"name": "l", "creationTimestamp": created},
            "spec": {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": []}});
        let t = render(&def, &[lb], None, IncludeObject::None, now);
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "l",
                "LoadBalancer",
                null,
                "<pending>",
                "<none>",
                "0s",
                "app=web"
            ])
        );
        assert_eq!(t["columnDefinitions"][6]["priority"], 1);
    }

    #[test]
    fn pods_print_ready_status_restarts_and_wide_columns() {
        let r = crate::builtins::registry();
        let def = r.get("", "v1", "pods").unwrap();
        let now = jiff::Timestamp::from_second(1_000_000).unwrap();
        let created = crate::time::timestamp(now);
        let fresh = json!({"metadata": {"name": "p", "creationTimestamp": created},
            "spec": {"containers": [{"name": "c"}, {"name": "d"}]}, "status": {"phase": "Pending"}});
        let running = json!({"metadata": {"name": "q", "creationTimestamp": created},
            "spec": {"containers": [{"name": "c"}, {"name": "d"}], "nodeName": "n1"},
            "status": {"phase": "Running", "podIP": "10.1.1.1", "containerStatuses": [
                {"name": "c", "ready": true, "restartCount": 2, "state": {"running": {}}},
                {"name": "d", "ready": false, "restartCount": 1,
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        let t = render(&def, &[fresh, running], None, IncludeObject::None, now);
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "p", "0/2", "Pending", 0, "0s", "<none>", "<none>", "<none>", "<none>"
            ])
        );
        assert_eq!(
            t["rows"][1]["cells"],
            json!([
                "q",
                "1/2",
                "CrashLoopBackOff",
                3,
                "0s",
                "10.1.1.1",
                "n1",
                "<none>",
                "<none>"
            ])
        );
    }

    #[test]
    fn configmaps_count_their_data() {
        let r = crate::builtins::registry();
        let def = r.get("", "v1", "configmaps").unwrap();
        let now = jiff::Timestamp::from_second(1_000_000).unwrap();
        let o = json!({"metadata": {"name": "c", "creationTimestamp": "1970-01-12T13:46:40Z"},
                       "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
        let t = render(&def, &[o], None, IncludeObject::None, now);
        assert_eq!(t["columnDefinitions"][1]["name"], "Data");
        // The real printer declares the count a string column.
        assert_eq!(t["columnDefinitions"][1]["type"], "string");
        assert_eq!(t["rows"][0]["cells"], json!(["c", 3, "0s"]));
        assert!(t["rows"][0].get("object").is_none());
    }

    #[test]
    fn crd_columns_carry_priority_and_bindings_print_subjects_after_age() {
        let mut r = crate::builtins::registry();
        let crd = json!({"metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "additionalPrinterColumns": [
                    {"name": "Owner", "type": "string", "jsonPath": ".spec.owner", "priority": 1}]}]}});
        let (defs, _) = crate::crd::definitions(&crd).unwrap();
        r.insert(defs[0].clone(), true);
        let widgets = r.get("example.com", "v1", "widgets").unwrap();
        let now = jiff::Timestamp::from_second(1_000_000).unwrap();
        let w = json!({"metadata": {"name": "w"}, "spec": {"owner": "ops"}});
        let t = render(&widgets, &[w], None, IncludeObject::None, now);
        assert_eq!(t["columnDefinitions"][1]["priority"], 1);
        assert_eq!(
            t["columnDefinitions"][1]["description"],
            "Custom resource definition column (in JSONPath format): .spec.owner"
        );
        let bindings = r
            .get("rbac.authorization.k8s.io", "v1", "rolebindings")
            .unwrap();
        let b = json!({"metadata": {"name": "b", "creationTimestamp": "1970-01-12T13:46:40Z"},
            "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "ops"},
                         {"kind": "User", "name": "a"}, {"kind": "User", "name": "b"}]});
        let t = render(&bindings, &[b], None, IncludeObject::None, now);
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["b", "Role/r", "0s", "a, b", "", "ops/op"])
        );
    }

    #[test]
    fn json_paths() {
        let o = json!({"a": {"b": [{"c": 1}]}});
        assert_eq!(lookup(&o, ".a.b[0].c"), json!(1));
        assert_eq!(lookup(&o, ".a.x"), Value::Null);
        assert_eq!(lookup(&o, ".a.b[5]"), Value::Null);
    }
}
