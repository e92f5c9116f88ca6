//! A NetworkPolicy's spec, as 1.20 validates it
//! (`ValidateNetworkPolicySpec`): its selectors, each rule's ports (a
//! known protocol, a port number or name) and peers (exactly one kind of
//! peer when one is an IP block, a CIDR, exceptions strictly inside it),
//! and its policy types.

use std::net::IpAddr;

use serde_json::Value;

use super::field::{FieldErrors, go_string, index};
use super::pod;
use crate::resources::ResourceDef;
use crate::status::Cause;

/// The protocols a policy's port may name.
const PROTOCOLS: [&str; 3] = ["TCP", "UDP", "SCTP"];
/// The policy types.
const POLICY_TYPES: [&str; 2] = ["Ingress", "Egress"];

/// The causes of a NetworkPolicy's spec.
#[must_use]
pub fn network_policy_causes(_def: &ResourceDef, object: &Value) -> Vec<Cause> {
    let mut e = FieldErrors::new();
    let spec = &object["spec"];
    if !spec["podSelector"].is_null() {
        pod::selector(&spec["podSelector"], "spec.podSelector", &mut e);
    }
    for (direction, peers) in [("ingress", "from"), ("egress", "to")] {
        let rules = spec[direction].as_array().cloned().unwrap_or_default();
        for (i, rule) in rules.iter().enumerate() {
            let at = index(&format!("spec.{direction}"), i);
            for (j, p) in rule["ports"].as_array().into_iter().flatten().enumerate() {
                port(p, &index(&format!("{at}.ports"), j), &mut e);
            }
            for (j, p) in rule[peers].as_array().into_iter().flatten().enumerate() {
                peer(p, &index(&format!("{at}.{peers}"), j), &mut e);
            }
        }
    }
    let types: Vec<&str> = spec["policyTypes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t.as_str().unwrap_or_default())
        .collect();
    if types.len() > POLICY_TYPES.len() {
        e.invalid(
            "spec.policyTypes",
            &format!(
                "[]networking.PolicyType{{{}}}",
                types
                    .iter()
                    .map(|t| format!("{t:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "may not specify more than two policyTypes",
        );
        return e.into_causes();
    }
    for (i, t) in types.iter().enumerate() {
        if !POLICY_TYPES.contains(t) {
            e.not_supported(&index("spec.policyTypes", i), t, &POLICY_TYPES);
        }
    }
    e.into_causes()
}

/// A rule's port: a known protocol, a valid number or name.
fn port(port: &Value, at: &str, e: &mut FieldErrors) {
    if let Some(protocol) = port["protocol"].as_str()
        && !PROTOCOLS.contains(&protocol)
    {
        e.not_supported(&format!("{at}.protocol"), protocol, &PROTOCOLS);
    }
    match &port["port"] {
        Value::Number(n) => pod::port_number(n.as_i64().unwrap_or(0), &format!("{at}.port"), e),
        Value::String(name) => {
            for problem in pod::port_name_problems(name) {
                e.invalid(&format!("{at}.port"), &go_string(name), &problem);
            }
        }
        _ => {}
    }
}

/// A rule's peer: at least one kind; an IP block alone.
fn peer(peer: &Value, at: &str, e: &mut FieldErrors) {
    let mut kinds = 0;
    for selector in ["podSelector", "namespaceSelector"] {
        if !peer[selector].is_null() {
            kinds += 1;
            pod::selector(&peer[selector], &format!("{at}.{selector}"), e);
        }
    }
    let block = &peer["ipBlock"];
    if !block.is_null() {
        kinds += 1;
        ip_block(block, &format!("{at}.ipBlock"), e);
    }
    if kinds == 0 {
        e.required(at, "must specify a peer");
    } else if kinds > 1 && !block.is_null() {
        e.forbidden(at, "may not specify both ipBlock and another peer");
    }
}

/// An IP block: a CIDR, and exceptions strictly inside it.
fn ip_block(block: &Value, at: &str, e: &mut FieldErrors) {
    let cidr = block["cidr"].as_str().unwrap_or_default();
    if cidr.is_empty() {
        e.required(&format!("{at}.cidr"), "");
        return;
    }
    let Some(outer) = parse_cidr(cidr) else {
        e.invalid(&format!("{at}.cidr"), &go_string(cidr), "not a valid CIDR");
        return;
    };
    let excepts = block["except"].as_array().cloned().unwrap_or_default();
    for (i, except) in excepts.iter().enumerate() {
        let text = except.as_str().unwrap_or_default();
        let path = index(&format!("{at}.except"), i);
        let Some(inner) = parse_cidr(text) else {
            e.invalid(&path, &go_string(text), "not a valid CIDR");
            return;
        };
        if !contains(outer, inner.0) || outer.1 >= inner.1 {
            e.invalid(&path, &go_string(text), "must be a strict subset of `cidr`");
        }
    }
}

/// A CIDR's network address and prefix length.
fn parse_cidr(text: &str) -> Option<(IpAddr, u8)> {
    let (ip, bits) = text.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    let bits: u8 = bits.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (bits <= max).then_some((ip, bits))
}

/// Whether `ip` is inside the network `(base, bits)`.
fn contains((base, bits): (IpAddr, u8), ip: IpAddr) -> bool {
    let as_bits = |a: IpAddr| match a {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)) << 96, 32u8),
        IpAddr::V6(v6) => (u128::from(v6), 128u8),
    };
    let ((b, width), (i, other)) = (as_bits(base), as_bits(ip));
    if width != other {
        return false;
    }
    let mask = if bits == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(bits))
    };
    b & mask == i & mask
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fields(spec: Value) -> Vec<String> {
        let def = ResourceDef::builtin(
            "networking.k8s.io",
            "v1",
            "NetworkPolicy",
            "networkpolicies",
            true,
        );
        network_policy_causes(&def, &json!({"spec": spec}))
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    #[test]
    fn ports_peers_and_types_are_checked() {
        assert!(
            fields(
                json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80}],
                "from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]}]})
            )
            .is_empty()
        );
        assert_eq!(
            fields(json!({"podSelector": {}, "ingress": [{
                "ports": [{"port": 0, "protocol": "XTCP"}],
                "from": [{"ipBlock": {"cidr": "nope"}}, {}]}],
                "policyTypes": ["Foo"]})),
            [
                "spec.ingress[0].ports[0].protocol",
                "spec.ingress[0].ports[0].port",
                "spec.ingress[0].from[0].ipBlock.cidr",
                "spec.ingress[0].from[1]",
                "spec.policyTypes[0]"
            ]
        );
        assert_eq!(
            fields(
                json!({"egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/16",
                "except": ["10.0.0.0/8"]}}]}]})
            ),
            ["spec.egress[0].to[0].ipBlock.except[0]"]
        );
    }
}
