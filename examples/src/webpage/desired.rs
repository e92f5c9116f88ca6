//! What a `WebPage` should have: the four dependents, as one desired set.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, PodSpec, PodTemplateSpec, Service,
    ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule,
    IngressServiceBackend, IngressSpec, ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use operator_fsm::dependents::{Dependent, DependentKind, DesiredSet, SetError};

use super::WebPage;
use crate::support::digest;

/// The nginx image serving the pages.
pub const NGINX_IMAGE: &str = "nginx:1.27";

/// The set of `page`: its HTML in a ConfigMap, an nginx Deployment
/// mounting it (rolled again when the HTML changes), a Service in front,
/// and an Ingress to the Service only while `spec.exposed`.
///
/// ```
/// use examples::webpage::{WebPage, WebPageSpec, desired};
///
/// let page = WebPage::new("hello", WebPageSpec { html: "<h1>hi</h1>".into(), exposed: false });
/// let set = desired(&page).unwrap();
/// assert_eq!(set.keys().collect::<Vec<_>>(), ["html", "server", "service", "ingress"]);
/// assert!(!set.get("ingress").unwrap().is_active());
/// ```
///
/// # Errors
/// None for a page read from the server; [`SetError`] if the set were
/// malformed.
pub fn desired(page: &WebPage) -> Result<DesiredSet, SetError> {
    let name = page.name_any();
    DesiredSet::builder()
        .dependent(Dependent::new("html", &html(page)))
        .dependent(Dependent::new("server", &server(page)).depends_on(["html"]))
        .dependent(Dependent::new("service", &service(&name)))
        .dependent(
            Dependent::new("ingress", &ingress(&name))
                .depends_on(["service"])
                .when(page.spec.exposed),
        )
        .build()
}

/// The kinds of [`desired`], for the controller's watches.
pub fn kinds() -> [DependentKind; 4] {
    [
        DependentKind::of::<ConfigMap>(),
        DependentKind::of::<Deployment>(),
        DependentKind::of::<Service>(),
        DependentKind::of::<Ingress>(),
    ]
}

/// The ConfigMap holding the page: `<name>-html`.
pub fn html_config_map_name(page: &WebPage) -> String {
    format!("{}-html", page.name_any())
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        ..ObjectMeta::default()
    }
}

fn selector(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_owned(), name.to_owned())])
}

fn html(page: &WebPage) -> ConfigMap {
    ConfigMap {
        metadata: meta(&html_config_map_name(page)),
        data: Some(BTreeMap::from([(
            "index.html".to_owned(),
            page.spec.html.clone(),
        )])),
        ..ConfigMap::default()
    }
}

fn server(page: &WebPage) -> Deployment {
    let name = page.name_any();
    // nginx reads the mounted page once: a new page rolls new pods.
    let rollout = BTreeMap::from([(
        "examples.operator-fsm.io/html-digest".to_owned(),
        digest(&page.spec.html),
    )]);
    Deployment {
        metadata: meta(&name),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(selector(&name)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(selector(&name)),
                    annotations: Some(rollout),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "nginx".to_owned(),
                        image: Some(NGINX_IMAGE.to_owned()),
                        ports: Some(vec![ContainerPort {
                            container_port: 80,
                            ..ContainerPort::default()
                        }]),
                        volume_mounts: Some(vec![VolumeMount {
                            name: "html".to_owned(),
                            mount_path: "/usr/share/nginx/html".to_owned(),
                            ..VolumeMount::default()
                        }]),
                        ..Container::default()
                    }],
                    volumes: Some(vec![Volume {
                        name: "html".to_owned(),
                        config_map: Some(ConfigMapVolumeSource {
                            name: html_config_map_name(page),
                            ..ConfigMapVolumeSource::default()
                        }),
                        ..Volume::default()
                    }]),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

fn service(name: &str) -> Service {
    Service {
        metadata: meta(name),
        spec: Some(ServiceSpec {
            selector: Some(selector(name)),
            ports: Some(vec![ServicePort {
                port: 80,
                target_port: Some(IntOrString::Int(80)),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

fn ingress(name: &str) -> Ingress {
    let backend = IngressBackend {
        service: Some(IngressServiceBackend {
            name: name.to_owned(),
            port: Some(ServiceBackendPort {
                number: Some(80),
                ..ServiceBackendPort::default()
            }),
        }),
        ..IngressBackend::default()
    };
    Ingress {
        metadata: meta(name),
        spec: Some(IngressSpec {
            rules: Some(vec![IngressRule {
                http: Some(HTTPIngressRuleValue {
                    paths: vec![HTTPIngressPath {
                        path: Some("/".to_owned()),
                        path_type: "Prefix".to_owned(),
                        backend,
                    }],
                }),
                ..IngressRule::default()
            }]),
            ..IngressSpec::default()
        }),
        status: None,
    }
}
