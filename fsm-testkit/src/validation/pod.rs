//! A pod's spec and a workload's pod template, as 1.20's `ValidatePodSpec`
//! and `ValidatePodTemplateSpec` check them: containers (names, images,
//! ports, pull policy, resources), the restart policy, the template's
//! labels. A field the real server defaults before it validates is taken
//! at its default when absent (restart policy `Always`, port protocol
//! `TCP`), so an object is judged the same with or without defaults.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use serde_json::Value;

use super::field::{FieldErrors, child, go_string, go_value, index};
use super::{label_value_problem, name_problems, qualified_name_problems};
use crate::quantity;
use crate::resources::NameRule;
use crate::status::Cause;

/// The restart policies a pod may have.
pub const RESTART_POLICIES: [&str; 3] = ["Always", "OnFailure", "Never"];
/// The protocols of a port (sorted, as Go lists a set).
pub const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];
const PULL_POLICIES: [&str; 3] = ["Always", "IfNotPresent", "Never"];
const MESSAGE_POLICY: &str = "must be 'File' or 'FallbackToLogsOnError'";

/// The restart policy of a pod spec, `Always` when absent (its default).
#[must_use]
pub fn restart_policy(spec: &Value) -> &str {
    spec["restartPolicy"]
        .as_str()
        .filter(|p| !p.is_empty())
        .unwrap_or("Always")
}

/// The causes of a Pod's spec.
#[must_use]
pub fn pod_causes(_def: &crate::resources::ResourceDef, object: &Value) -> Vec<Cause> {
    let mut e = FieldErrors::new();
    spec(&object["spec"], "spec", &mut e);
    e.into_causes()
}

/// A pod template at `path`: its labels, then its spec.
pub fn template(template: &Value, path: &str, e: &mut FieldErrors) {
    labels(
        &template["metadata"]["labels"],
        &child(&child(path, "metadata"), "labels"),
        e,
    );
    spec(&template["spec"], &child(path, "spec"), e);
}

/// A label map at `path` (`ValidateLabels`): qualified keys, valid values.
pub fn labels(labels: &Value, path: &str, e: &mut FieldErrors) {
    let Some(map) = labels.as_object() else {
        return;
    };
    for (k, v) in map {
        for problem in qualified_name_problems(k) {
            e.invalid(path, &go_string(k), &problem);
        }
        if let Some(problem) = v.as_str().and_then(label_value_problem) {
            e.invalid(path, &go_value(v), &problem);
        }
    }
}

/// A pod spec at `path` (`ValidatePodSpec`, the parts operators meet).
pub fn spec(spec: &Value, path: &str, e: &mut FieldErrors) {
    let containers = spec["containers"].as_array().map_or(&[][..], Vec::as_slice);
    let containers_path = child(path, "containers");
    if containers.is_empty() {
        e.required(&containers_path, "");
    } else {
        container_list(containers, &containers_path, e);
    }
    if let Some(init) = spec["initContainers"].as_array().filter(|a| !a.is_empty()) {
        container_list(init, &child(path, "initContainers"), e);
    }
    match spec["restartPolicy"].as_str() {
        None => {}
        Some("") => e.required(&child(path, "restartPolicy"), ""),
        Some(p) if RESTART_POLICIES.contains(&p) => {}
        Some(p) => e.not_supported(&child(path, "restartPolicy"), p, &RESTART_POLICIES),
    }
}

/// Containers (`validateContainers`): each one's name (a DNS label,
/// unique), image, termination message policy, ports, pull policy and
/// resources.
fn container_list(containers: &[Value], path: &str, e: &mut FieldErrors) {
    let mut names = BTreeSet::new();
    for (i, c) in containers.iter().enumerate() {
        let at = index(path, i);
        let name_path = child(&at, "name");
        let name = c["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            e.required(&name_path, "");
        } else {
            for problem in name_problems(NameRule::Label, name) {
                e.invalid(&name_path, &go_string(name), &problem);
            }
        }
        if !names.insert(name.to_string()) {
            e.duplicate(&name_path, &go_string(name));
        }
        if c["image"].as_str().unwrap_or_default().is_empty() {
            e.required(&child(&at, "image"), "");
        }
        match c["terminationMessagePolicy"].as_str() {
            None | Some("File" | "FallbackToLogsOnError") => {}
            Some("") => e.required(&child(&at, "terminationMessagePolicy"), MESSAGE_POLICY),
            Some(other) => e.invalid(
                &child(&at, "terminationMessagePolicy"),
                &go_string(other),
                MESSAGE_POLICY,
            ),
        }
        if let Some(ports) = c["ports"].as_array() {
            container_ports(ports, &child(&at, "ports"), e);
        }
        match c["imagePullPolicy"].as_str() {
            None => {}
            Some("") => e.required(&child(&at, "imagePullPolicy"), ""),
            Some(p) if PULL_POLICIES.contains(&p) => {}
            Some(p) => e.not_supported(&child(&at, "imagePullPolicy"), p, &PULL_POLICIES),
        }
        resources(&c["resources"], &child(&at, "resources"), e);
    }
}

/// A container's ports (`validateContainerPorts`).
fn container_ports(ports: &[Value], path: &str, e: &mut FieldErrors) {
    let mut names = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let at = index(path, i);
        if let Some(name) = p["name"].as_str().filter(|n| !n.is_empty()) {
            let problems = port_name_problems(name);
            for problem in &problems {
                e.invalid(&child(&at, "name"), &go_string(name), problem);
            }
            if problems.is_empty() && !names.insert(name.to_string()) {
                e.duplicate(&child(&at, "name"), &go_string(name));
            }
        }
        match p["containerPort"].as_i64().unwrap_or(0) {
            0 => e.required(&child(&at, "containerPort"), ""),
            n => port_number(n, &child(&at, "containerPort"), e),
        }
        if let Some(n) = p["hostPort"].as_i64().filter(|n| *n != 0) {
            port_number(n, &child(&at, "hostPort"), e);
        }
        protocol(&p["protocol"], &child(&at, "protocol"), e);
    }
}

/// A port's protocol: `TCP` when absent, else one of [`PROTOCOLS`].
pub fn protocol(value: &Value, path: &str, e: &mut FieldErrors) {
    match value.as_str() {
        None => {}
        Some("") => e.required(path, ""),
        Some(p) if PROTOCOLS.contains(&p) => {}
        Some(p) => e.not_supported(path, p, &PROTOCOLS),
    }
}

/// `IsValidPortNum`: 1 to 65535.
pub fn port_number(n: i64, path: &str, e: &mut FieldErrors) {
    if !(1..=65535).contains(&n) {
        e.invalid(
            path,
            &n.to_string(),
            "must be between 1 and 65535, inclusive",
        );
    }
}

/// `IsValidPortName`: an IANA service name.
#[must_use]
pub fn port_name_problems(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    if name.len() > 15 {
        out.push("must be no more than 15 characters".into());
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        out.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !name
        .chars()
        .any(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    {
        out.push("must contain at least one letter or number (a-z, 0-9)".into());
    }
    if name.contains("--") {
        out.push("must not contain consecutive hyphens".into());
    }
    if name.starts_with('-') || name.ends_with('-') {
        out.push("must not begin or end with a hyphen".into());
    }
    out
}

/// A container's resources: no request above its limit (the real
/// server's `ValidateResourceRequirements`, the part operators meet).
fn resources(resources: &Value, path: &str, e: &mut FieldErrors) {
    let Some(requests) = resources["requests"].as_object() else {
        return;
    };
    let limits = &resources["limits"];
    for (name, request) in requests {
        let (Some(request), Some(limit)) = (request.as_str(), limits[name].as_str()) else {
            continue;
        };
        if quantity::compare(request, limit) == Some(Ordering::Greater) {
            let shown = quantity::canonical(request).unwrap_or_else(|| request.to_string());
            e.invalid(
                &child(path, "requests"),
                &go_string(&shown),
                &format!("must be less than or equal to {name} limit"),
            );
        }
    }
}

/// Whether a label selector (`matchLabels`, `matchExpressions`) selects
/// an object labelled `labels`, as `LabelSelectorAsSelector` then
/// `Matches` judge it. `None` when there is no selector.
#[must_use]
pub fn selector_matches(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let match_labels = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let expressions = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|x| {
            let k = x["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = x["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match x["operator"].as_str().unwrap_or_default() {
                "In" => label(k).is_some_and(|v| values.contains(&v)),
                "NotIn" => label(k).is_none_or(|v| !values.contains(&v)),
                "Exists" => label(k).is_some(),
                "DoesNotExist" => label(k).is_none(),
                _ => false,
            }
        });
    match_labels && expressions
}

/// Whether a label selector selects everything (no labels, no
/// expressions).
#[must_use]
pub fn selector_is_empty(selector: &Value) -> bool {
    let len = |k: &str| {
        selector[k].as_object().map_or(0, serde_json::Map::len)
            + selector[k].as_array().map_or(0, Vec::len)
    };
    len("matchLabels") + len("matchExpressions") == 0
}

/// A label selector's labels (`ValidateLabelSelector`, its `matchLabels`).
pub fn selector(selector: &Value, path: &str, e: &mut FieldErrors) {
    labels(&selector["matchLabels"], &child(path, "matchLabels"), e);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn causes(pod_spec: &Value) -> Vec<(String, String)> {
        let mut e = FieldErrors::new();
        spec(pod_spec, "spec", &mut e);
        e.into_causes()
            .into_iter()
            .map(|c| (c.field, c.message))
            .collect()
    }

    #[test]
    fn containers_are_checked_as_the_real_server() {
        let found = causes(&json!({"restartPolicy": "Sometimes", "containers": [
            {"name": "c"},
            {"name": "c", "image": "x", "ports": [{"containerPort": 0}, {"containerPort": 70000}]},
            {"image": "y", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}},
        ]}));
        let fields: Vec<&str> = found.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.containers[0].image",
                "spec.containers[1].name",
                "spec.containers[1].ports[0].containerPort",
                "spec.containers[1].ports[1].containerPort",
                "spec.containers[2].name",
                "spec.containers[2].resources.requests",
                "spec.restartPolicy",
            ]
        );
        assert_eq!(
            found[5].1,
            "Invalid value: \"2\": must be less than or equal to cpu limit"
        );
    }

    #[test]
    fn absent_defaults_are_valid() {
        assert!(
            causes(&json!({"containers": [{"name": "c", "image": "x",
            "ports": [{"containerPort": 80}]}]}))
            .is_empty()
        );
        assert_eq!(causes(&json!({}))[0].0, "spec.containers");
    }

    #[test]
    fn selectors_match_labels_and_expressions() {
        let labels = json!({"app": "a", "tier": "web"});
        assert!(selector_matches(
            &json!({"matchLabels": {"app": "a"}}),
            &labels
        ));
        assert!(!selector_matches(
            &json!({"matchLabels": {"app": "b"}}),
            &labels
        ));
        assert!(selector_matches(
            &json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]},
                                         {"key": "x", "operator": "DoesNotExist"}]}),
            &labels
        ));
        assert!(!selector_matches(
            &json!({"matchLabels": {"app": "a"}}),
            &Value::Null
        ));
        assert!(selector_is_empty(&json!({})));
    }
}
