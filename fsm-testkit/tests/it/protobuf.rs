//! The protobuf codec (`fsm_testkit::protobuf`) against the prost
//! bindings of `k8s-pb`, which its field table is generated from: bodies
//! prost writes decode to the JSON of the same object, and what the codec
//! writes prost reads back unchanged.

use std::collections::BTreeMap;

use fsm_testkit::protobuf;
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::json;

fn s(v: &str) -> Option<String> {
    Some(v.to_owned())
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn wrap(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s(api_version),
            kind: s(kind),
        }),
        raw: Some(raw),
        content_encoding: s(""),
        content_type: s(""),
    };
    let mut body = protobuf::MAGIC.to_vec();
    body.extend(unknown.encode_to_vec());
    body
}

fn unwrap(body: &[u8]) -> Unknown {
    let rest = body.strip_prefix(protobuf::MAGIC).expect("the magic");
    Unknown::decode(rest).expect("a runtime.Unknown")
}

/// A Deployment touching the special encodings: times, int-or-string (both
/// forms), quantities, maps, repeated messages, a Go struct embedded in
/// its parent (`LocalObjectReference` in `ConfigMapKeySelector`), a
/// negative number, and no empty values (those are indistinguishable on
/// the wire from unset ones).
fn deployment() -> apps::Deployment {
    let container = core::Container {
        name: s("web"),
        image: s("nginx:1.25"),
        args: vec!["--port".into(), "8080".into()],
        ports: vec![core::ContainerPort {
            name: s("http"),
            container_port: Some(8080),
            protocol: s("TCP"),
            ..Default::default()
        }],
        env: vec![core::EnvVar {
            name: s("MODE"),
            value_from: Some(core::EnvVarSource {
                config_map_key_ref: Some(core::ConfigMapKeySelector {
                    local_object_reference: Some(core::LocalObjectReference {
                        name: s("settings"),
                    }),
                    key: s("mode"),
                    optional: Some(true),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }],
        resources: Some(core::ResourceRequirements {
            limits: [("cpu".to_owned(), Quantity { string: s("500m") })].into(),
            requests: [("memory".to_owned(), Quantity { string: s("64Mi") })].into(),
            ..Default::default()
        }),
        readiness_probe: Some(core::Probe {
            handler: Some(core::ProbeHandler {
                http_get: Some(core::HttpGetAction {
                    path: s("/ready"),
                    port: Some(IntOrString {
                        r#type: Some(1),
                        int_val: Some(0),
                        str_val: s("http"),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            period_seconds: Some(5),
            ..Default::default()
        }),
        ..Default::default()
    };
    apps::Deployment {
        metadata: Some(meta::ObjectMeta {
            name: s("web"),
            namespace: s("shop"),
            uid: s("4b1d"),
            generation: Some(2),
            creation_timestamp: Some(meta::Time {
                seconds: Some(1_767_323_045),
                nanos: Some(0),
            }),
            labels: map(&[("app", "web"), ("tier", "front")]),
            annotations: map(&[("note", "a b")]),
            ..Default::default()
        }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(3),
            selector: Some(meta::LabelSelector {
                match_labels: map(&[("app", "web")]),
                match_expressions: vec![meta::LabelSelectorRequirement {
                    key: s("tier"),
                    operator: s("In"),
                    values: vec!["front".into(), "edge".into()],
                }],
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    labels: map(&[("app", "web")]),
                    ..Default::default()
                }),
                spec: Some(core::PodSpec {
                    containers: vec![container],
                    ..Default::default()
                }),
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: s("RollingUpdate"),
                rolling_update: Some(apps::RollingUpdateDeployment {
                    max_unavailable: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(2),
                        str_val: s(""),
                    }),
                    max_surge: Some(IntOrString {
                        r#type: Some(1),
                        int_val: Some(0),
                        str_val: s("25%"),
                    }),
                }),
            }),
            min_ready_seconds: Some(-1),
            ..Default::default()
        }),
        status: None,
    }
}

#[test]
fn prost_bodies_decode_to_the_objects_json() {
    let body = wrap("apps/v1", "Deployment", deployment().encode_to_vec());
    let want = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "uid": "4b1d", "generation": 2,
            "creationTimestamp": "2026-01-02T03:04:05Z",
            "labels": {"app": "web", "tier": "front"}, "annotations": {"note": "a b"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "edge"]}]},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{
                    "name": "web", "image": "nginx:1.25", "args": ["--port", "8080"],
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                    "env": [{"name": "MODE", "valueFrom": {"configMapKeyRef":
                        {"name": "settings", "key": "mode", "optional": true}}}],
                    "resources": {"limits": {"cpu": "500m"}, "requests": {"memory": "64Mi"}},
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 5}
                }]}
            },
            "strategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 2, "maxSurge": "25%"}},
            "minReadySeconds": -1
        }
    });
    assert_eq!(protobuf::decode(&body).unwrap(), want);
}

#[test]
fn prost_reads_back_what_the_codec_writes() {
    let original = deployment();
    let json = protobuf::decode(&wrap("apps/v1", "Deployment", original.encode_to_vec())).unwrap();
    let unknown = unwrap(&protobuf::encode(&json).unwrap());
    let type_meta = unknown.type_meta.unwrap();
    assert_eq!(type_meta.api_version.as_deref(), Some("apps/v1"));
    assert_eq!(type_meta.kind.as_deref(), Some("Deployment"));
    let back = apps::Deployment::decode(unknown.raw.unwrap_or_default().as_slice()).unwrap();
    assert_eq!(back, original);
}

#[test]
fn secrets_bytes_are_base64_in_json() {
    let secret = core::Secret {
        metadata: Some(meta::ObjectMeta {
            name: s("creds"),
            ..Default::default()
        }),
        data: [("key".to_owned(), vec![0u8, 1, 2, 255])].into(),
        r#type: s("Opaque"),
        ..Default::default()
    };
    let json = protobuf::decode(&wrap("v1", "Secret", secret.encode_to_vec())).unwrap();
    assert_eq!(
        json,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
               "data": {"key": "AAEC/w=="}, "type": "Opaque"})
    );
    let unknown = unwrap(&protobuf::encode(&json).unwrap());
    let back = core::Secret::decode(unknown.raw.unwrap_or_default().as_slice()).unwrap();
    assert_eq!(back, secret);
}
