//! An Ingress's rules, as 1.20 validates `networking.k8s.io/v1` ones: a
//! host that is a DNS name, HTTP paths that have a `pathType` and an
//! absolute path, and service backends with a name and a port.

use serde_json::Value;

use super::field::{FieldErrors, child, go_string, index};
use super::name_problems;
use super::pod::{port_name_problems, port_number};
use crate::resources::{NameRule, ResourceDef};
use crate::status::Cause;

/// The path types (sorted, as Go lists a set).
const PATH_TYPES: [&str; 3] = ["Exact", "ImplementationSpecific", "Prefix"];
const BAD_SEQUENCES: [&str; 5] = ["//", "/./", "/../", "%2f", "%2F"];
const BAD_SUFFIXES: [&str; 2] = ["/..", "/."];

/// The causes of an Ingress's rules.
#[must_use]
pub fn ingress_causes(_def: &ResourceDef, object: &Value) -> Vec<Cause> {
    let mut e = FieldErrors::new();
    let rules = object["spec"]["rules"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    for (i, rule) in rules.iter().enumerate() {
        let at = index("spec.rules", i);
        if let Some(host) = rule["host"].as_str().filter(|h| !h.is_empty()) {
            let host_path = child(&at, "host");
            if host.parse::<std::net::IpAddr>().is_ok() {
                e.invalid(
                    &host_path,
                    &go_string(host),
                    "must be a DNS name, not an IP address",
                );
            }
            let checked = host.strip_prefix("*.").unwrap_or(host);
            for problem in name_problems(NameRule::Subdomain, checked) {
                e.invalid(&host_path, &go_string(host), &problem);
            }
        }
        let http = &rule["http"];
        if http.is_null() {
            continue;
        }
        let paths_path = child(&child(&at, "http"), "paths");
        let paths = http["paths"].as_array().map_or(&[][..], Vec::as_slice);
        if paths.is_empty() {
            e.required(&paths_path, "");
        }
        for (j, path) in paths.iter().enumerate() {
            http_path(path, &index(&paths_path, j), &mut e);
        }
    }
    e.into_causes()
}

/// One HTTP path (`validateHTTPIngressPath`).
fn http_path(path: &Value, at: &str, e: &mut FieldErrors) {
    let Some(kind) = path["pathType"].as_str() else {
        e.required(&child(at, "pathType"), "pathType must be specified");
        return;
    };
    let text = path["path"].as_str().unwrap_or_default();
    let path_field = child(at, "path");
    match kind {
        "Exact" | "Prefix" => {
            if !text.starts_with('/') {
                e.invalid(&path_field, &go_string(text), "must be an absolute path");
            }
            if !text.is_empty() {
                for bad in BAD_SEQUENCES.iter().filter(|b| text.contains(*b)) {
                    e.invalid(
                        &path_field,
                        &go_string(text),
                        &format!("must not contain '{bad}'"),
                    );
                }
                for bad in BAD_SUFFIXES.iter().filter(|b| text.ends_with(*b)) {
                    e.invalid(
                        &path_field,
                        &go_string(text),
                        &format!("cannot end with '{bad}'"),
                    );
                }
            }
        }
        "ImplementationSpecific" => {
            if !text.is_empty() && !text.starts_with('/') {
                e.invalid(&path_field, &go_string(text), "must be an absolute path");
            }
        }
        other => e.not_supported(&child(at, "pathType"), other, &PATH_TYPES),
    }
    backend(&path["backend"], &child(at, "backend"), e);
}

/// A backend (`validateIngressBackend`): a resource or a service with a
/// name and a port.
fn backend(backend: &Value, at: &str, e: &mut FieldErrors) {
    let service = &backend["service"];
    match (backend["resource"].is_null(), service.is_null()) {
        (false, false) => e.invalid(at, "\"\"", "cannot set both resource and service backends"),
        (false, true) => {}
        (true, true) => e.invalid(at, "\"\"", "resource or service backend is required"),
        (true, false) => {
            let name_path = child(&child(at, "service"), "name");
            match service["name"].as_str().unwrap_or_default() {
                "" => e.required(&name_path, ""),
                name => {
                    for problem in name_problems(NameRule::Label1035, name) {
                        e.invalid(&name_path, &go_string(name), &problem);
                    }
                }
            }
            let port = &service["port"];
            let port_path = child(&child(at, "service"), "port");
            let name = port["name"].as_str().unwrap_or_default();
            let number = port["number"].as_i64().unwrap_or(0);
            match (name.is_empty(), number == 0) {
                (false, false) => e.invalid(at, "\"\"", "cannot set both port name & port number"),
                (false, true) => {
                    for problem in port_name_problems(name) {
                        e.invalid(&child(&port_path, "name"), &go_string(name), &problem);
                    }
                }
                (true, false) => port_number(number, &child(&port_path, "number"), e),
                (true, true) => e.required(at, "port name or number is required"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn causes(paths: Value) -> Vec<(String, String)> {
        let def = ResourceDef::builtin("networking.k8s.io", "v1", "Ingress", "ingresses", true);
        let ing = json!({"spec": {"rules": [{"host": "a.example.com", "http": {"paths": paths}}]}});
        ingress_causes(&def, &ing)
            .into_iter()
            .map(|c| (c.field, c.message))
            .collect()
    }

    #[test]
    fn paths_need_a_type_and_an_absolute_path() {
        let backend = json!({"service": {"name": "s", "port": {"number": 80}}});
        assert!(
            causes(json!([{"path": "/", "pathType": "Prefix", "backend": backend}])).is_empty()
        );
        assert_eq!(
            causes(json!([{"path": "/", "backend": backend}])),
            [(
                "spec.rules[0].http.paths[0].pathType".to_string(),
                "Required value: pathType must be specified".to_string()
            )]
        );
        let found = causes(
            json!([{"path": "/", "pathType": "Weird", "backend": backend},
            {"path": "x", "pathType": "Prefix", "backend": backend}]),
        );
        assert_eq!(found[0].0, "spec.rules[0].http.paths[0].pathType");
        assert_eq!(
            found[1],
            (
                "spec.rules[0].http.paths[1].path".to_string(),
                "Invalid value: \"x\": must be an absolute path".to_string()
            )
        );
    }
}
