//! The machine's handlers and whole upgrades through the harness (the
//! real engine on a virtual clock), against an embedded API server whose
//! simulated Deployment controller rolls out at once.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use operator_fsm::core::{CommandAction, Harness};
use operator_fsm::prelude::*;
use operator_fsm::testkit::ApiServer;
use operator_fsm::testkit::simulation::{Simulation, SimulationConfig};

use super::*;
use crate::testing::{NS, create, server};

struct Fixture {
    _server: ApiServer,
    simulation: Simulation,
    client: Client,
    ctx: ShopContext,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.simulation.stop();
    }
}

async fn fixture() -> Fixture {
    let (server, client) = server().await;
    let simulation = server.simulate(SimulationConfig {
        rollout_delay: Duration::ZERO,
        ..SimulationConfig::default()
    });
    let ctx = ShopContext::new(client.clone());
    Fixture {
        _server: server,
        simulation,
        client,
        ctx,
    }
}

impl Fixture {
    /// A harness for `shop`, with the dependents runtime lent to it.
    fn harness(&self, shop: Shop) -> Harness<ShopState> {
        Harness::new(shop, self.ctx.clone())
            .with_extension(Arc::new(runtime(self.client.clone(), &self.ctx)))
    }

    /// A shop `name` at `version`, provisioned: schema and app exist.
    async fn provisioned(&self, name: &str, version: u32) -> Shop {
        let shop = create(
            &self.client,
            Shop::new(
                name,
                ShopSpec {
                    version,
                    require_approval: false,
                },
            ),
        )
        .await;
        let settled = self
            .harness(shop.clone())
            .run_until_settled()
            .await
            .unwrap();
        assert_eq!(settled.path(), ["Provisioning", "Serving"]);
        assert_eq!(settled.state, ShopState::Serving { version });
        shop
    }

    /// `name` with its spec changed, as stored.
    async fn edit(&self, name: &str, spec: serde_json::Value) -> Shop {
        Api::<Shop>::namespaced(self.client.clone(), NS)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(&serde_json::json!({ "spec": spec })),
            )
            .await
            .unwrap()
    }

    /// The schema's version and the app's image.
    async fn deployed(&self, name: &str) -> (String, String) {
        let schema = Api::<ConfigMap>::namespaced(self.client.clone(), NS)
            .get(&format!("{name}-schema"))
            .await
            .unwrap();
        let app = Api::<Deployment>::namespaced(self.client.clone(), NS)
            .get(name)
            .await
            .unwrap();
        let image = app.spec.unwrap().template.spec.unwrap().containers[0]
            .image
            .clone()
            .unwrap();
        (schema.data.unwrap()["version"].clone(), image)
    }
}

fn trail(harness: &Harness<ShopState>) -> Vec<(String, bool)> {
    harness
        .record()
        .unwrap()
        .trail
        .iter()
        .map(|e| (e.state.clone(), e.closed))
        .collect()
}

#[tokio::test]
async fn serving_starts_an_upgrade_or_asks_for_approval() {
    let f = fixture().await;
    let mut shop = Shop::new(
        "corner",
        ShopSpec {
            version: 2,
            require_approval: false,
        },
    );
    shop.metadata.namespace = Some(NS.to_owned());
    let serving = ShopState::Serving { version: 1 };
    let out = f
        .harness(shop.clone())
        .in_state(serving.clone())
        .run_handler()
        .await
        .unwrap();
    assert_eq!(
        out,
        Transition::next(ShopState::Migrating { from: 1, to: 2 })
    );

    shop.spec.require_approval = true;
    let out = f
        .harness(shop)
        .in_state(serving)
        .run_handler()
        .await
        .unwrap();
    assert_eq!(
        out,
        Transition::next(ShopState::AwaitingApproval { from: 1, to: 2 })
    );
}

#[tokio::test]
async fn an_upgrade_migrates_then_rolls_and_closes_its_scope() {
    let f = fixture().await;
    f.provisioned("corner", 1).await;
    assert_eq!(f.deployed("corner").await, ("1".into(), image(1)));

    let shop = f.edit("corner", serde_json::json!({"version": 2})).await;
    let harness = f.harness(shop).in_state(ShopState::Serving { version: 1 });
    let settled = harness.run_until_settled().await.unwrap();
    assert_eq!(
        settled.path(),
        ["Serving", "Migrating", "Rolling", "Serving"]
    );
    assert_eq!(settled.state, ShopState::Serving { version: 2 });
    assert_eq!(f.deployed("corner").await, ("2".into(), image(2)));
    assert_eq!(f.ctx.migrations.log(), ["migrate v1→v2"]);
    // Serving is ready: the upgrade's scope is closed, nothing left to undo.
    assert_eq!(
        trail(&harness),
        [("Migrating".into(), true), ("Rolling".into(), true)]
    );
}

#[tokio::test]
async fn a_broken_migration_undoes_only_itself_and_a_retry_recovers_the_shop() {
    let f = fixture().await;
    f.provisioned("corner", 1).await;
    f.ctx.migrations.break_version(2);

    let shop = f.edit("corner", serde_json::json!({"version": 2})).await;
    let mut harness = f.harness(shop).in_state(ShopState::Serving { version: 1 });
    let settled = harness.run_until_settled().await.unwrap();
    assert_eq!(settled.state, ShopState::Failed);
    assert_eq!(
        settled.record.last_error.as_deref(),
        Some("the schema migration v1→v2 failed: its script is broken")
    );
    // The schema was migrated half way, then reverted; the app never moved.
    assert_eq!(
        f.ctx.migrations.log(),
        ["migrate v1→v2 failed", "revert v2→v1"]
    );
    assert_eq!(f.deployed("corner").await, ("1".into(), image(1)));

    // The script is fixed; a person says retry: the shop starts again,
    // adopts v1 and upgrades.
    f.ctx.migrations.fix(2);
    harness.send(CommandAction::Retry);
    let settled = harness.run_until_settled().await.unwrap();
    assert_eq!(settled.state, ShopState::Serving { version: 2 });
    let path = settled.path();
    let after_failure = &path[path.iter().position(|s| *s == "Failed").unwrap()..];
    assert_eq!(
        after_failure,
        [
            "Failed",
            "Provisioning",
            "Serving",
            "Migrating",
            "Rolling",
            "Serving"
        ]
    );
    assert_eq!(f.deployed("corner").await, ("2".into(), image(2)));
    assert!(settled.record.commands[0].applied());
}

#[tokio::test]
async fn an_approval_signal_starts_the_migration_and_a_rejection_rests_in_rejected() {
    let f = fixture().await;
    f.provisioned("corner", 1).await;
    let shop = f
        .edit(
            "corner",
            serde_json::json!({"version": 2, "requireApproval": true}),
        )
        .await;
    let mut harness = f.harness(shop).in_state(ShopState::Serving { version: 1 });
    for _ in 0..3 {
        harness.reconcile().await.unwrap();
    }
    assert_eq!(
        harness.state(),
        Some(ShopState::AwaitingApproval { from: 1, to: 2 })
    );
    assert!(f.ctx.migrations.log().is_empty(), "nothing before approval");

    harness.signal("approve");
    let settled = harness.run_until_settled().await.unwrap();
    assert_eq!(settled.state, ShopState::Serving { version: 2 });
    let approved = settled.history.iter().find(|h| h.to == "Approved").unwrap();
    assert_eq!(
        approved.reason.as_deref(),
        Some("signal approve (command 1 by harness)")
    );
    assert_eq!(f.ctx.migrations.log(), ["migrate v1→v2"]);

    // The next upgrade is rejected: nothing is migrated, v2 keeps running.
    let shop = f.edit("corner", serde_json::json!({"version": 3})).await;
    let mut harness = f.harness(shop).in_state(ShopState::Serving { version: 2 });
    harness.reconcile().await.unwrap();
    assert_eq!(
        harness.state(),
        Some(ShopState::AwaitingApproval { from: 2, to: 3 })
    );
    harness.signal("reject");
    let settled = harness.run_until_settled().await.unwrap();
    assert_eq!(settled.state, ShopState::Rejected);
    assert_eq!(f.ctx.migrations.log(), ["migrate v1→v2"]);
    assert_eq!(f.deployed("corner").await, ("2".into(), image(2)));
}

#[tokio::test]
async fn an_approval_while_nothing_awaits_it_is_refused_and_logged() {
    let f = fixture().await;
    let shop = f.provisioned("corner", 1).await;
    let mut harness = f.harness(shop).in_state(ShopState::Serving { version: 1 });
    let seq = harness.signal("approve");
    harness.reconcile().await.unwrap();
    let record = harness.record().unwrap();
    assert_eq!(record.state, "Serving");
    assert_eq!(record.command_seq, seq);
    assert_eq!(
        record.commands[0].refused.as_deref(),
        Some("Serving takes no signals (asked for 'approve')")
    );
}

#[tokio::test]
async fn a_paused_shop_runs_nothing_until_it_is_resumed() {
    let f = fixture().await;
    f.provisioned("corner", 1).await;
    let shop = f.edit("corner", serde_json::json!({"version": 2})).await;
    let mut harness = f.harness(shop).in_state(ShopState::Serving { version: 1 });
    harness.send(CommandAction::Pause);
    for _ in 0..3 {
        harness.reconcile().await.unwrap();
        harness.advance(Duration::from_secs(60));
    }
    let record = harness.record().unwrap();
    assert!(record.paused.is_some());
    assert_eq!(record.state, "Serving");
    assert_eq!(record.transitions, 1, "no transition while paused");
    assert!(f.ctx.migrations.log().is_empty(), "no handler while paused");
    assert_eq!(f.deployed("corner").await, ("1".into(), image(1)));

    harness.send(CommandAction::Resume);
    let settled = harness.run_until_settled().await.unwrap();
    assert_eq!(settled.state, ShopState::Serving { version: 2 });
    assert!(settled.record.paused.is_none());
    assert_eq!(f.ctx.migrations.log(), ["migrate v1→v2"]);
}

#[tokio::test]
async fn serving_reports_a_field_a_person_took_over_as_degraded_not_as_an_error() {
    let f = fixture().await;
    let shop = f.provisioned("corner", 1).await;
    let apps: Api<Deployment> = Api::namespaced(f.client.clone(), NS);
    let person = |image: String| {
        serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "corner"},
            "spec": {"template": {"spec": {"containers": [{"name": "shop", "image": image}]}}},
        })
    };
    // kubectl apply --server-side --force-conflicts
    let force = PatchParams::apply("kubectl").force();
    apps.patch(
        "corner",
        &force,
        &Patch::Apply(person("example.com/shop:hotfix".into())),
    )
    .await
    .unwrap();

    let serving = || {
        f.harness(shop.clone())
            .in_state(ShopState::Serving { version: 1 })
    };
    let out = serving().run_handler().await.unwrap();
    let Transition::Degraded { reason, .. } = out else {
        panic!("expected degraded, got {out:?}");
    };
    assert!(
        reason.contains("conflict with field manager kubectl"),
        "{reason}"
    );

    // The person hands the field back (applies the operator's value).
    apps.patch("corner", &force, &Patch::Apply(person(image(1))))
        .await
        .unwrap();
    let out = serving().run_handler().await.unwrap();
    assert!(
        matches!(out, Transition::Stay | Transition::Wait(_)),
        "{out:?}"
    );
    assert_eq!(
        apps.get("corner").await.unwrap().annotations()[VERSION_ANNOTATION],
        "1"
    );
}
