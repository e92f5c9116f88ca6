//! A Service's spec, as 1.20's `ValidateService` checks it: ports
//! (required unless headless or `ExternalName`; names, numbers,
//! protocols, target ports, duplicates), the external name, the
//! selector, session affinity, the type and node ports. Fields the real
//! server defaults first are taken at their defaults when absent (type
//! `ClusterIP`, affinity `None`, protocol `TCP`, target port = port).

use std::collections::BTreeSet;

use serde_json::Value;

use super::field::{FieldErrors, child, go_string, index};
use super::name_problems;
use super::pod::{self, port_name_problems};
use crate::resources::{NameRule, ResourceDef};
use crate::status::Cause;

/// The Service types (sorted, as Go lists a set).
const TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
const AFFINITIES: [&str; 2] = ["ClientIP", "None"];

/// The causes of a Service's spec.
#[must_use]
pub fn service_causes(_def: &ResourceDef, object: &Value) -> Vec<Cause> {
    let mut e = FieldErrors::new();
    let spec = &object["spec"];
    let kind = spec["type"].as_str().unwrap_or("ClusterIP");
    let headless = spec["clusterIP"] == "None";
    let ports = spec["ports"].as_array().map_or(&[][..], Vec::as_slice);
    if ports.is_empty() && !headless && kind != "ExternalName" {
        e.required("spec.ports", "");
    }
    match kind {
        "LoadBalancer" | "NodePort" if headless => e.invalid(
            "spec.clusterIPs[0]",
            &go_string("None"),
            &format!("may not be set to 'None' for {kind} services"),
        ),
        "ExternalName" => {
            let name = spec["externalName"].as_str().unwrap_or_default();
            let cname = name.strip_suffix('.').unwrap_or(name);
            if cname.is_empty() {
                e.required("spec.externalName", "");
            } else {
                for problem in name_problems(NameRule::Subdomain, cname) {
                    e.invalid("spec.externalName", &go_string(cname), &problem);
                }
            }
        }
        _ => {}
    }
    let mut names = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        service_port(
            port,
            ports.len() > 1,
            &mut names,
            &index("spec.ports", i),
            &mut e,
        );
    }
    pod::labels(&spec["selector"], "spec.selector", &mut e);
    match spec["sessionAffinity"].as_str() {
        None => {}
        Some("") => e.required("spec.sessionAffinity", ""),
        Some(a) if AFFINITIES.contains(&a) => {}
        Some(a) => e.not_supported("spec.sessionAffinity", a, &AFFINITIES),
    }
    match spec["type"].as_str() {
        None => {}
        Some("") => e.required("spec.type", ""),
        Some(t) if TYPES.contains(&t) => {}
        Some(t) => e.not_supported("spec.type", t, &TYPES),
    }
    if kind == "ClusterIP" {
        for (i, port) in ports.iter().enumerate() {
            if port["nodePort"].as_i64().is_some_and(|n| n != 0) {
                e.forbidden(
                    &child(&index("spec.ports", i), "nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                );
            }
        }
    }
    let mut seen = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let protocol = port["protocol"].as_str().unwrap_or("TCP");
        let number = port["port"].as_i64().unwrap_or(0);
        if !seen.insert((protocol.to_string(), number)) {
            e.duplicate(
                &index("spec.ports", i),
                &format!(
                    "core.ServicePort{{Name:\"\", Protocol:{}, AppProtocol:(*string)(nil), Port:{number}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}",
                    go_string(protocol)
                ),
            );
        }
    }
    e.into_causes()
}

/// One port (`validateServicePort`); `names` are the names seen before.
fn service_port(
    port: &Value,
    name_required: bool,
    names: &mut BTreeSet<String>,
    path: &str,
    e: &mut FieldErrors,
) {
    let name = port["name"].as_str().unwrap_or_default();
    let name_path = child(path, "name");
    if name.is_empty() {
        if name_required {
            e.required(&name_path, "");
        }
    } else {
        for problem in name_problems(NameRule::Label, name) {
            e.invalid(&name_path, &go_string(name), &problem);
        }
        if !names.insert(name.to_string()) {
            e.duplicate(&name_path, &go_string(name));
        }
    }
    let number = port["port"].as_i64().unwrap_or(0);
    pod::port_number(number, &child(path, "port"), e);
    pod::protocol(&port["protocol"], &child(path, "protocol"), e);
    let target_path = child(path, "targetPort");
    match &port["targetPort"] {
        Value::String(s) if !s.is_empty() => {
            for problem in port_name_problems(s) {
                e.invalid(&target_path, &go_string(s), &problem);
            }
        }
        Value::Number(n) if n.as_i64() != Some(0) => {
            pod::port_number(n.as_i64().unwrap_or(0), &target_path, e);
        }
        // Absent, 0 or "": the port's own number.
        _ => pod::port_number(number, &target_path, e),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn causes(spec: Value) -> Vec<(String, String)> {
        let def = ResourceDef::builtin("", "v1", "Service", "services", true);
        service_causes(&def, &json!({"spec": spec}))
            .into_iter()
            .map(|c| (c.field, c.message))
            .collect()
    }

    #[test]
    fn ports_are_required_unless_headless_or_external() {
        assert_eq!(causes(json!({}))[0].0, "spec.ports");
        assert!(causes(json!({"clusterIP": "None"})).is_empty());
        assert_eq!(
            causes(json!({"type": "ExternalName"})),
            [(
                "spec.externalName".to_string(),
                "Required value".to_string()
            )]
        );
        assert!(causes(json!({"type": "ExternalName", "externalName": "example.com"})).is_empty());
    }

    #[test]
    fn ports_as_the_real_server() {
        let found = causes(json!({"ports": [{"port": 0}, {"port": 80, "name": "a"},
            {"port": 80, "name": "b"}, {"port": 81, "protocol": "XTP", "name": "c"}]}));
        let fields: Vec<&str> = found.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.ports[0].name",
                "spec.ports[0].port",
                "spec.ports[0].targetPort",
                "spec.ports[3].protocol",
                "spec.ports[2]",
            ]
        );
        assert_eq!(
            causes(json!({"type": "Magic", "ports": [{"port": 80}]}))[0].1,
            "Unsupported value: \"Magic\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""
        );
    }
}
