//! The load balancer status of a Service or an Ingress, as 1.20's status
//! update validation checks it (`ValidateLoadBalancerStatus`): each
//! ingress point's `ip` an IP address, its `hostname` a DNS name and not
//! an IP address.

use std::net::IpAddr;

use serde_json::Value;

use super::field::{FieldErrors, go_string};
use super::name_problems;
use crate::resources::NameRule;
use crate::status::Cause;

/// The causes of a status write of a Service or an Ingress (`_old`, the
/// stored object, is not compared).
#[must_use]
pub fn status_causes(new: &Value, _old: &Value) -> Vec<Cause> {
    let mut e = FieldErrors::new();
    let points = new["status"]["loadBalancer"]["ingress"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (i, point) in points.iter().enumerate() {
        let at = format!("status.loadBalancer.ingress[{i}]");
        let is_ip = |text: &str| text.parse::<IpAddr>().is_ok();
        if let Some(ip) = point["ip"].as_str().filter(|ip| !ip.is_empty())
            && !is_ip(ip)
        {
            e.invalid(
                &format!("{at}.ip"),
                &go_string(ip),
                "must be a valid IP address",
            );
        }
        if let Some(host) = point["hostname"].as_str().filter(|h| !h.is_empty()) {
            for problem in name_problems(NameRule::Subdomain, host) {
                e.invalid(&format!("{at}.hostname"), &go_string(host), &problem);
            }
            if is_ip(host) {
                e.invalid(
                    &format!("{at}.hostname"),
                    &go_string(host),
                    "must be a DNS name, not an IP address",
                );
            }
        }
    }
    e.into_causes()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ingress_points_are_addresses_and_names() {
        let status = |points: Value| json!({"status": {"loadBalancer": {"ingress": points}}});
        assert!(
            status_causes(
                &status(json!([{"ip": "10.0.0.1"}, {"hostname": "lb.example.com"}])),
                &json!({})
            )
            .is_empty()
        );
        let causes = status_causes(
            &status(json!([{"ip": "nope"}, {"hostname": "10.0.0.1"}])),
            &json!({}),
        );
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "status.loadBalancer.ingress[0].ip",
                "status.loadBalancer.ingress[1].hostname"
            ]
        );
    }
}
