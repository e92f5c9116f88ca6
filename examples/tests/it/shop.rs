//! The Shop operator through a real `Controller`, on the embedded API
//! server or the real kube-apiserver (`FSM_REAL_APISERVER_KUBECONFIG`):
//! a shop upgraded version after version, each upgrade in its history; a
//! broken upgrade undone alone and recovered by reverting the spec, or by
//! a `retry` command once fixed; paused (nothing runs while its spec
//! changes) and resumed; an upgrade approved by signal, and a signal
//! refused; and a ready shop whose app a person force-applies stays
//! `Serving`, degraded, then recovers.

use std::time::Duration;

use crate::common;

use common::{Env, eventually, options, quick_simulation, wait_for};
use examples::demo::observe::{Kind, read_record};
use examples::shop::{self, Shop, ShopContext, ShopSpec, VERSION_ANNOTATION, image, send_command};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{CustomResourceExt, ResourceExt};
use operator_fsm::core::{CommandAction, StateRecord};
use serde_json::json;

/// An environment running the Shop operator, and its context (the
/// migrations the test breaks and fixes).
async fn env() -> (Env, ShopContext) {
    let mut env = Env::new(quick_simulation()).await;
    env.cluster.install_crd(&Shop::crd()).await.unwrap();
    let mut ctx = ShopContext::new(env.client.clone());
    ctx.poll = Duration::from_millis(300);
    env.spawn(shop::run_in(
        env.client.clone(),
        env.scope(),
        ctx.clone(),
        options(),
    ));
    (env, ctx)
}

fn shops(env: &Env) -> Api<Shop> {
    Api::namespaced(env.client.clone(), &env.ns)
}

async fn create(env: &Env, name: &str, version: u32, require_approval: bool) {
    let spec = ShopSpec {
        version,
        require_approval,
    };
    shops(env)
        .create(&PostParams::default(), &Shop::new(name, spec))
        .await
        .unwrap();
}

/// Changes the spec; the new generation.
async fn edit(env: &Env, name: &str, spec: serde_json::Value) -> i64 {
    let shop = shops(env)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": spec })),
        )
        .await
        .unwrap();
    shop.metadata.generation.unwrap()
}

/// Waits until `name` serves `version` for `generation` or later.
async fn serving(env: &Env, name: &str, version: u32, generation: i64) -> StateRecord {
    wait_for(env, Kind::Shop, name, "Serving", |r| {
        r.data == Some(json!({ "version": version })) && r.observed_generation >= Some(generation)
    })
    .await
}

/// The schema's version and the app's image and version annotation.
async fn deployed(env: &Env, name: &str) -> (String, String, String) {
    let schema = Api::<ConfigMap>::namespaced(env.client.clone(), &env.ns)
        .get(&format!("{name}-schema"))
        .await
        .unwrap();
    let app = Api::<Deployment>::namespaced(env.client.clone(), &env.ns)
        .get(name)
        .await
        .unwrap();
    let version = app.annotations()[VERSION_ANNOTATION].clone();
    let image = app.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap();
    (schema.data.unwrap()["version"].clone(), image, version)
}

fn at(version: u32) -> (String, String, String) {
    (version.to_string(), image(version), version.to_string())
}

/// The record's history as `from → to` pairs.
fn moves(record: &StateRecord) -> Vec<(String, String)> {
    record
        .history
        .iter()
        .map(|h| (h.from.clone().unwrap_or_default(), h.to.clone()))
        .collect()
}

fn pair(from: &str, to: &str) -> (String, String) {
    (from.to_owned(), to.to_owned())
}

/// The migrations' log without the repeats a re-run handler may add.
fn ran(ctx: &ShopContext) -> Vec<String> {
    let mut log = ctx.migrations.log();
    log.dedup();
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgraded_version_after_version_a_broken_upgrade_undoes_only_itself_and_a_revert_recovers()
{
    let (env, ctx) = env().await;
    create(&env, "corner", 1, false).await;
    serving(&env, "corner", 1, 1).await;
    assert_eq!(deployed(&env, "corner").await, at(1));

    // v1 → v2 → v3: each upgrade migrates, rolls, and closes its scope.
    for version in 2..=3 {
        let generation = edit(&env, "corner", json!({ "version": version })).await;
        let record = serving(&env, "corner", version, generation).await;
        assert_eq!(deployed(&env, "corner").await, at(version));
        let trail: Vec<(&str, bool)> = record
            .trail
            .iter()
            .map(|e| (e.state.as_str(), e.closed))
            .collect();
        assert_eq!(trail, [("Migrating", true), ("Rolling", true)]);
    }
    let record = read_record(&env.client, &env.ns, Kind::Shop, "corner")
        .await
        .unwrap()
        .unwrap();
    let upgrade = [
        pair("Serving", "Migrating"),
        pair("Migrating", "Rolling"),
        pair("Rolling", "Serving"),
    ];
    let expected: Vec<_> = [pair("", "Provisioning"), pair("Provisioning", "Serving")]
        .into_iter()
        .chain(upgrade.clone())
        .chain(upgrade)
        .collect();
    assert_eq!(moves(&record), expected);
    assert_eq!(ran(&ctx), ["migrate v1→v2", "migrate v2→v3"]);

    // v3 → v4 breaks half way: only that upgrade is undone.
    ctx.migrations.break_version(4);
    let generation = edit(&env, "corner", json!({"version": 4})).await;
    let failed = wait_for(&env, Kind::Shop, "corner", "Failed", |r| {
        r.observed_generation >= Some(generation)
    })
    .await;
    assert_eq!(
        failed.last_error.as_deref(),
        Some("the schema migration v3→v4 failed: its script is broken")
    );
    assert_eq!(
        ran(&ctx)[2..],
        ["migrate v3→v4 failed", "revert v4→v3"],
        "v2's and v3's migrations stay"
    );
    assert_eq!(deployed(&env, "corner").await, at(3));

    // A person reverts the spec: the failed shop starts again
    // (on_failed_spec_change = restart) and adopts v3.
    let generation = edit(&env, "corner", json!({"version": 3})).await;
    let recovered = serving(&env, "corner", 3, generation).await;
    assert_eq!(recovered.last_error, None);
    let tail = &moves(&recovered)[moves(&recovered).len() - 2..];
    assert_eq!(
        tail,
        [
            pair("Failed", "Provisioning"),
            pair("Provisioning", "Serving")
        ]
    );
    assert_eq!(deployed(&env, "corner").await, at(3));
    assert_eq!(ran(&ctx).len(), 4, "no migration on the way back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_upgrade_is_retried_by_command_once_its_migration_is_fixed() {
    let (env, ctx) = env().await;
    create(&env, "corner", 1, false).await;
    serving(&env, "corner", 1, 1).await;
    ctx.migrations.break_version(2);
    let generation = edit(&env, "corner", json!({"version": 2})).await;
    wait_for(&env, Kind::Shop, "corner", "Failed", |r| {
        r.observed_generation >= Some(generation)
    })
    .await;
    assert_eq!(deployed(&env, "corner").await, at(1));

    ctx.migrations.fix(2);
    let seq = send_command(&shops(&env), "corner", CommandAction::Retry, "on-call")
        .await
        .unwrap();
    let record = serving(&env, "corner", 2, generation).await;
    assert_eq!(deployed(&env, "corner").await, at(2));
    let retry = record.commands.iter().find(|c| c.seq == seq).unwrap();
    assert_eq!(
        (retry.command.as_str(), retry.by.as_deref(), retry.applied()),
        ("retry", Some("on-call"), true)
    );
    let entered = record
        .history
        .iter()
        .find(|h| h.from.as_deref() == Some("Failed"))
        .unwrap();
    assert_eq!(
        entered.reason.as_deref(),
        Some(format!("retry (command {seq} by on-call)").as_str())
    );
    assert_eq!(
        ran(&ctx),
        ["migrate v1→v2 failed", "revert v2→v1", "migrate v1→v2"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_shop_runs_nothing_while_its_spec_changes_and_upgrades_when_resumed() {
    let (env, ctx) = env().await;
    create(&env, "corner", 1, false).await;
    serving(&env, "corner", 1, 1).await;
    let apps: Api<Deployment> = Api::namespaced(env.client.clone(), &env.ns);
    let app_version = apps.get("corner").await.unwrap().resource_version();

    let pause = send_command(&shops(&env), "corner", CommandAction::Pause, "on-call")
        .await
        .unwrap();
    let paused = wait_for(&env, Kind::Shop, "corner", "Serving", |r| {
        r.paused.is_some()
    })
    .await;
    assert_eq!(
        paused.paused.as_ref().unwrap().by.as_deref(),
        Some("on-call")
    );

    // The spec changes while paused: for two seconds nothing is taken,
    // nothing runs, nothing moves.
    let generation = edit(&env, "corner", json!({"version": 2})).await;
    let until = tokio::time::Instant::now() + Duration::from_secs(2);
    while tokio::time::Instant::now() < until {
        let record = read_record(&env.client, &env.ns, Kind::Shop, "corner")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(record.state, "Serving");
        assert_eq!(record.transitions, paused.transitions, "no transition");
        assert_eq!(
            record.observed_generation, paused.observed_generation,
            "the spec change is not taken"
        );
        assert!(record.paused.is_some());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        apps.get("corner").await.unwrap().resource_version(),
        app_version,
        "the app is untouched"
    );
    assert!(ctx.migrations.log().is_empty(), "no handler ran");

    let resume = send_command(&shops(&env), "corner", CommandAction::Resume, "on-call")
        .await
        .unwrap();
    let record = serving(&env, "corner", 2, generation).await;
    assert!(record.paused.is_none());
    assert_eq!(deployed(&env, "corner").await, at(2));
    let log: Vec<(u64, &str, bool)> = record
        .commands
        .iter()
        .map(|c| (c.seq, c.command.as_str(), c.applied()))
        .collect();
    assert_eq!(log, [(pause, "pause", true), (resume, "resume", true)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_waits_for_approval_and_a_signal_out_of_place_is_refused() {
    let (env, ctx) = env().await;
    create(&env, "corner", 1, true).await;
    serving(&env, "corner", 1, 1).await;

    // Nothing awaits approval: refused, with the reason in the log.
    let stray = send_command(
        &shops(&env),
        "corner",
        CommandAction::Signal("approve".into()),
        "intern",
    )
    .await
    .unwrap();
    let record = wait_for(&env, Kind::Shop, "corner", "Serving", |r| {
        r.command_seq >= stray
    })
    .await;
    let refused = record.commands.iter().find(|c| c.seq == stray).unwrap();
    assert_eq!(
        refused.refused.as_deref(),
        Some("Serving takes no signals (asked for 'approve')")
    );

    let generation = edit(&env, "corner", json!({"version": 2})).await;
    wait_for(&env, Kind::Shop, "corner", "AwaitingApproval", |r| {
        r.data == Some(json!({"from": 1, "to": 2})) && r.observed_generation >= Some(generation)
    })
    .await;
    // It waits: nothing migrated, v1 still runs.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(ctx.migrations.log().is_empty());
    assert_eq!(deployed(&env, "corner").await, at(1));

    let approve = send_command(
        &shops(&env),
        "corner",
        CommandAction::Signal("approve".into()),
        "release-manager",
    )
    .await
    .unwrap();
    let record = serving(&env, "corner", 2, generation).await;
    assert_eq!(deployed(&env, "corner").await, at(2));
    let approved = record.history.iter().find(|h| h.to == "Approved").unwrap();
    assert_eq!(approved.from.as_deref(), Some("AwaitingApproval"));
    assert_eq!(
        approved.reason.as_deref(),
        Some(format!("signal approve (command {approve} by release-manager)").as_str())
    );
    assert_eq!(ran(&ctx), ["migrate v1→v2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_force_applying_the_app_leaves_the_shop_serving_degraded_until_handed_back() {
    let (env, _ctx) = env().await;
    create(&env, "corner", 1, false).await;
    serving(&env, "corner", 1, 1).await;
    let apps: Api<Deployment> = Api::namespaced(env.client.clone(), &env.ns);
    let person = |image: &str| {
        json!({
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
        &Patch::Apply(person("example.com/shop:hotfix")),
    )
    .await
    .unwrap();

    let degraded = || {
        let env = &env;
        async move {
            let r = read_record(&env.client, &env.ns, Kind::Shop, "corner")
                .await
                .ok()??;
            r.degraded.is_some().then_some(r)
        }
    };
    let first = eventually("degraded", degraded).await;
    let reason = &first.degraded.as_ref().unwrap().reason;
    assert!(
        reason.contains("conflict with field manager kubectl"),
        "{reason}"
    );
    // Still serving, no attempt spent, a while later: it keeps trying
    // without leaving, and without a write per try (same `since`).
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let tried = eventually("still degraded", degraded).await;
    assert_eq!((tried.state.as_str(), tried.attempt), ("Serving", 0));
    assert_eq!(tried.transitions, first.transitions, "no transition");
    assert_eq!(tried.last_error, None, "not an error");
    assert_eq!(
        tried.degraded, first.degraded,
        "the same report, not rewritten"
    );

    // The person hands the field back: the shop converges, degraded clears.
    apps.patch("corner", &force, &Patch::Apply(person(&image(1))))
        .await
        .unwrap();
    let recovered = wait_for(&env, Kind::Shop, "corner", "Serving", |r| {
        r.degraded.is_none()
    })
    .await;
    assert_eq!(recovered.transitions, first.transitions);
    assert_eq!(recovered.last_error, None);
    assert_eq!(deployed(&env, "corner").await, at(1));
}
