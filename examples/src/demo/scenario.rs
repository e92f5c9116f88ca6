//! The objects the demo creates, what each demonstrates, and where each
//! must come to rest.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use serde_json::json;

use super::observe::{Kind, Tracked};
use crate::database::{Database, DatabaseSpec};
use crate::integration::{BUILDER_IMAGE, Integration, IntegrationSpec, kit_image};
use crate::mutable_jar::{self, BuildPlan, Keycloak, KeycloakSpec};
use crate::shop::{self, Shop, ShopSpec};
use crate::support::create_or_get;
use crate::webpage::{NGINX_IMAGE, SMOKE_TEST_IMAGE, WebPage, WebPageSpec};
use operator_fsm::testkit::simulation::{JobOutcome, JobRule, SimulationConfig};

/// The demo's objects.
pub fn tracked() -> Vec<Tracked> {
    let t = |kind, name: &str, expected, story| Tracked {
        kind,
        name: name.to_owned(),
        expected,
        story,
    };
    vec![
        t(
            Kind::Keycloak,
            "sso",
            "Done",
            "image augmented by a build Job, rolled out; drift repaired without a rebuild",
        ),
        t(
            Kind::Integration,
            "orders",
            "Running",
            "kit build fails once, retried with a new Job",
        ),
        t(
            Kind::Integration,
            "billing",
            "Running",
            "kit built and deployed; new routes, new digest: rebuilt",
        ),
        t(
            Kind::Database,
            "inventory",
            "Ready",
            "created exactly once through a flaky, non-idempotent API",
        ),
        t(
            Kind::WebPage,
            "home",
            "Serving",
            "four dependents converged in a state, then smoke-tested; new HTML: Ingress pruned, page updated in place",
        ),
        t(
            Kind::Database,
            "analytics",
            "Failed",
            "seed SQL rejected: the instance is deleted (compensation)",
        ),
        t(
            Kind::Shop,
            super::shop_story::SHOP,
            "Serving",
            "months in seconds: upgraded v1→v2, paused while v3 was asked for, resumed; v4's broken migration undone alone, retried once fixed; v5 approved by signal",
        ),
    ]
}

/// How the simulated cluster treats the demo's workloads: the first kit
/// build of `orders` fails.
pub fn simulation_config() -> SimulationConfig {
    SimulationConfig {
        job_rules: vec![JobRule::new("orders-kit-", JobOutcome::Fail).times(1)],
        ..SimulationConfig::default()
    }
}

/// The stock Keycloak image, which the second act also sets on the
/// server's Deployment (drift).
const KEYCLOAK_IMAGE: &str = "quay.io/keycloak/keycloak:26.0";

/// The Keycloak `sso`.
fn keycloak() -> Keycloak {
    Keycloak::new(
        "sso",
        KeycloakSpec {
            image: KEYCLOAK_IMAGE.to_owned(),
            extensions: vec![
                "keycloak-metrics-spi-6.0.0.jar".to_owned(),
                "acme-login-theme-1.4.jar".to_owned(),
            ],
            replicas: 2,
        },
    )
}

/// billing's routes after the second act's edit.
const BILLING_ROUTES_EDITED: &str = "- from:\n    uri: timer:invoices?period=30000\n    steps:\n      - to: http:billing.internal/run\n      - to: log:billing\n";

/// The integrations `orders` and `billing`.
fn integration_objects() -> [Integration; 2] {
    let integration = |name: &str, source: &str, dependencies: &[&str]| {
        Integration::new(
            name,
            IntegrationSpec {
                source: source.to_owned(),
                dependencies: dependencies.iter().map(|d| (*d).to_owned()).collect(),
                replicas: 1,
            },
        )
    };
    [
        integration(
            "orders",
            "- from:\n    uri: kafka:orders\n    steps:\n      - to: jdbc:inventory\n",
            &["camel:kafka", "camel:jdbc"],
        ),
        integration(
            "billing",
            "- from:\n    uri: timer:invoices?period=60000\n    steps:\n      - to: http:billing.internal/run\n",
            &["camel:timer", "camel:http"],
        ),
    ]
}

/// Every image the demo's workloads run, as the examples name them: the
/// Keycloak's (its build Job's and the augmented one its Deployment runs),
/// the kit builder's and each kit's (billing's before and after its routes
/// change), the WebPage's server and smoke test, and the shop's versions.
/// A cluster without a registry must hold exactly these
/// (`scripts/real-cluster` builds stand-ins under these names).
pub fn workload_images() -> Vec<String> {
    let sso = keycloak();
    let mut images = vec![
        KEYCLOAK_IMAGE.to_owned(),
        BuildPlan::for_keycloak(&sso, mutable_jar::REGISTRY).image,
        BUILDER_IMAGE.to_owned(),
    ];
    let [orders, billing] = integration_objects();
    let edited = IntegrationSpec {
        source: BILLING_ROUTES_EDITED.to_owned(),
        ..billing.spec.clone()
    };
    for spec in [&orders.spec, &billing.spec, &edited] {
        images.push(kit_image(&spec.kit_digest()));
    }
    images.push(NGINX_IMAGE.to_owned());
    images.push(SMOKE_TEST_IMAGE.to_owned());
    images.extend((1..=super::shop_story::LAST_VERSION).map(shop::image));
    images
}

/// Creates the namespace and the demo's objects (those already there are
/// left as they are).
///
/// # Errors
/// The API's error.
pub async fn create_objects(client: &Client, namespace: &str) -> Result<(), kube::Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    create_or_get(
        &namespaces,
        &Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        },
    )
    .await?;

    let keycloaks: Api<Keycloak> = Api::namespaced(client.clone(), namespace);
    create_or_get(&keycloaks, &keycloak()).await?;

    let integrations: Api<Integration> = Api::namespaced(client.clone(), namespace);
    for integration in integration_objects() {
        create_or_get(&integrations, &integration).await?;
    }

    let pages: Api<WebPage> = Api::namespaced(client.clone(), namespace);
    create_or_get(
        &pages,
        &WebPage::new(
            "home",
            WebPageSpec {
                html: "<html><body><h1>Hello from operator-fsm</h1></body></html>".to_owned(),
                exposed: true,
            },
        ),
    )
    .await?;

    let shops: Api<Shop> = Api::namespaced(client.clone(), namespace);
    create_or_get(
        &shops,
        &Shop::new(
            super::shop_story::SHOP,
            ShopSpec {
                version: 1,
                require_approval: false,
            },
        ),
    )
    .await?;

    let databases: Api<Database> = Api::namespaced(client.clone(), namespace);
    let database = |name: &str, engine: &str, seed: &str| {
        Database::new(
            name,
            DatabaseSpec {
                engine: engine.to_owned(),
                size: "small".to_owned(),
                seed: seed.to_owned(),
            },
        )
    };
    create_or_get(
        &databases,
        &database(
            "inventory",
            "postgres",
            "CREATE TABLE items (sku text primary key, stock int); INSERT INTO items VALUES ('A-1', 12);",
        ),
    )
    .await?;
    create_or_get(
        &databases,
        &database(
            "analytics",
            "mysql",
            "CREATE TABLE events (id bigint, kind text); INSRT INTO events VALUES (1, 'signup');",
        ),
    )
    .await?;
    Ok(())
}

/// The objects the second act changes: they must move again. (The shop's
/// changes are its story: [`super::shop_story`].)
pub const CHANGED: [(Kind, &str); 4] = [
    (Kind::Keycloak, "sso"),
    (Kind::Integration, "billing"),
    (Kind::WebPage, "home"),
    (Kind::Shop, super::shop_story::SHOP),
];

/// The second act: someone sets the stock image on the Keycloak Deployment
/// (drift, repaired from `Done`), billing's routes change (a new kit
/// digest: a rebuild), and the web page gets new HTML and is no longer
/// exposed. Returns what was done, for the log.
///
/// # Errors
/// The API's error.
pub async fn make_changes(client: &Client, namespace: &str) -> Result<Vec<String>, kube::Error> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let drift = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "keycloak", "image": KEYCLOAK_IMAGE}]}}}});
    deployments
        .patch("sso", &PatchParams::default(), &Patch::Merge(&drift))
        .await?;
    let integrations: Api<Integration> = Api::namespaced(client.clone(), namespace);
    let routes = json!({"spec": {"source": BILLING_ROUTES_EDITED}});
    integrations
        .patch("billing", &PatchParams::default(), &Patch::Merge(&routes))
        .await?;
    let pages: Api<WebPage> = Api::namespaced(client.clone(), namespace);
    let page = json!({"spec": {"exposed": false,
        "html": "<html><body><h1>Hello again, now internal only</h1></body></html>"}});
    pages
        .patch("home", &PatchParams::default(), &Patch::Merge(&page))
        .await?;
    Ok(vec![
        "deployment/sso set back to the stock image quay.io/keycloak/keycloak:26.0 (drift)"
            .to_owned(),
        "integration/billing routes edited (new kit digest: rebuild)".to_owned(),
        "webpage/home gets new HTML and is no longer exposed (Ingress pruned)".to_owned(),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `name` as the CRI resolves it: a first component that is no host
    /// (no `.` or `:`, not `localhost`) is Docker Hub's, a single one under
    /// `library/`.
    fn normalized(name: &str) -> String {
        let first = name.split('/').next().unwrap_or_default();
        let has_host = name.contains('/')
            && (first.contains('.') || first.contains(':') || first == "localhost");
        if has_host {
            name.to_owned()
        } else if name.contains('/') {
            format!("docker.io/{name}")
        } else {
            format!("docker.io/library/{name}")
        }
    }

    #[test]
    fn names_resolve_as_the_cri_resolves_them() {
        assert_eq!(normalized("nginx:1.27"), "docker.io/library/nginx:1.27");
        assert_eq!(
            normalized("curlimages/curl:8.10.1"),
            "docker.io/curlimages/curl:8.10.1"
        );
        assert_eq!(
            normalized("registry.local/camel-k/builder:2"),
            "registry.local/camel-k/builder:2"
        );
    }

    /// The one-node cluster (scripts/real-cluster) has no registry: it
    /// holds a stand-in for each of the demo's images, under the names
    /// common.sh lists. A change of the demo's specs changes the digests
    /// in the augmented Keycloak's and the kits' names: this says which.
    #[test]
    fn the_real_cluster_holds_every_image_the_demo_runs() {
        let common = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scripts/real-cluster/common.sh"
        ))
        .expect("scripts/real-cluster/common.sh");
        let listed: Vec<&str> = common
            .lines()
            .filter(|line| !line.trim_start().starts_with('#'))
            .filter_map(|line| line.split_once('='))
            .filter(|(name, _)| name.ends_with("_IMAGE") || name.ends_with("_IMAGES"))
            .flat_map(|(_, value)| value.split(','))
            .collect();
        let images = workload_images();
        assert_eq!(images.len(), 13, "{images:?}");
        for image in images {
            let image = normalized(&image);
            assert!(
                listed.contains(&image.as_str()),
                "{image} is not among the real cluster's images in \
                 scripts/real-cluster/common.sh: {listed:?}"
            );
        }
    }
}
