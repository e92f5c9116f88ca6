//! The main demo, as CI runs it: non-interactive, bounded, every object in
//! its expected state.

use std::process::Command;
use std::time::Duration;

use examples::demo::observe::Kind;
use examples::demo::{DemoOptions, run, scenario};

// The demo's own mode, without --kubeconfig: it starts its own embedded
// server (the_operators_pass_through_a_kubeconfig covers the real one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_rests_in_its_expected_state() {
    let options = DemoOptions {
        timeout: Duration::from_secs(60),
        ..DemoOptions::default()
    };
    let mut out = Vec::new();
    let report = run(&options, &mut out).await.unwrap();
    let text = String::from_utf8(out).unwrap();
    the_whole_story_was_told(&report, &text);
    assert!(report.elapsed < Duration::from_secs(60));
}

/// What the demo must have shown, wherever it ran (`text`: its output):
/// every object in its expected state, each database paid for once and
/// analytics' instance deleted, the second act's drift repaired and
/// rebuild done, orders' first kit build failed and retried, and the
/// shop's whole story.
pub(crate) fn the_whole_story_was_told(report: &examples::demo::DemoReport, text: &str) {
    assert!(report.success(), "{text}");

    let expected = scenario::tracked();
    assert_eq!(report.views.len(), expected.len());
    for (view, tracked) in report.views.iter().zip(&expected) {
        assert_eq!(view.state(), tracked.expected, "{}: {text}", tracked.name);
    }
    for view in report
        .views
        .iter()
        .filter(|v| v.tracked.kind == Kind::Database)
    {
        assert_eq!(report.ledger.creates_for(&view.tracked.name), 1, "{text}");
    }
    // analytics was compensated: its instance is gone.
    assert_eq!(report.ledger.deleted.len(), 1, "{text}");
    // Act two: sso's drift was repaired, billing rebuilt for its new routes.
    let moved = |name: &str, from: &str, to: &str| {
        let view = report
            .views
            .iter()
            .find(|v| v.tracked.name == name)
            .unwrap();
        view.history()
            .iter()
            .any(|h| h.from.as_deref() == Some(from) && h.to == to)
    };
    assert!(moved("sso", "Done", "Unknown"), "{text}");
    assert!(moved("billing", "Running", "Initialization"), "{text}");
    assert!(text.contains("Change: deployment/sso"), "{text}");
    // The page's new HTML was deployed and smoke-tested again.
    assert!(moved("home", "Serving", "Deploying"), "{text}");
    // orders' first kit build failed and was retried.
    let orders = report
        .views
        .iter()
        .find(|v| v.tracked.name == "orders")
        .unwrap();
    assert_eq!(orders.state(), "Running");
    assert!(
        text.contains(
            "integration/orders     BuildingKit · attempt 2 · last error: kit build orders-kit-"
        ),
        "{text}"
    );
    // The shop's story: upgraded, paused, resumed, a broken upgrade undone
    // and retried, a stray signal refused, an upgrade approved.
    assert!(report.story_told, "{text}");
    let corner = report
        .views
        .iter()
        .find(|v| v.tracked.kind == Kind::Shop)
        .unwrap();
    let record = corner.record.as_ref().unwrap();
    assert_eq!(
        record.data,
        Some(serde_json::json!({"version": 5})),
        "{text}"
    );
    assert!(moved("corner", "Rolling", "Serving"), "{text}");
    assert!(moved("corner", "Migrating", "Failed"), "{text}");
    assert!(moved("corner", "Failed", "Provisioning"), "{text}");
    assert!(moved("corner", "AwaitingApproval", "Approved"), "{text}");
    let commands: Vec<(&str, Option<&str>, bool)> = record
        .commands
        .iter()
        .map(|c| (c.command.as_str(), c.by.as_deref(), c.applied()))
        .collect();
    assert_eq!(
        commands,
        [
            ("pause", Some("on-call"), true),
            ("resume", Some("on-call"), true),
            ("retry", Some("on-call"), true),
            ("signal approve", Some("intern"), false),
            ("signal approve", Some("release-manager"), true),
        ],
        "{text}"
    );
    for line in [
        "Shop: shop/corner: paused by on-call (command 1)",
        "nothing ran",
        "Shop: shop/corner: Failed (the schema migration v3→v4 failed: its script is broken); only that upgrade was rolled back",
        "refused: Serving takes no signals (asked for 'approve')",
        "Shop: shop/corner: serves v5",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

// The binary's own embedded server (no --kubeconfig); the real server is
// the_operators_pass_through_a_kubeconfig's.
#[test]
fn the_binary_exits_zero_with_a_readable_log() {
    let output = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(["--timeout", "60s"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "exit {:?}\n{stdout}\n{stderr}",
        output.status
    );
    // Not a terminal: plain lines, no cursor movement.
    assert!(!stdout.contains('\x1b'), "{stdout}");
    assert!(
        stdout.contains("Summary: 7 of 7 objects rest in their expected state"),
        "{stdout}"
    );
    for line in [
        "✔ keycloak/sso: Done (expected Done)",
        "✔ integration/orders: Running (expected Running)",
        "✔ integration/billing: Running (expected Running)",
        "✔ database/inventory: Ready (expected Ready)",
        "✔ database/analytics: Failed (expected Failed)",
        "✔ webpage/home: Serving (expected Serving)",
        "✔ shop/corner: Serving (expected Serving)",
        "    command 4: signal approve by intern, refused: Serving takes no signals (asked for 'approve')",
        "stateDiagram-v2",
        "Demo succeeded",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in\n{stdout}");
    }
}

#[test]
fn a_bad_flag_is_refused() {
    let output = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(["--timeout", "soon"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}

// Embedded only: the demo's own server, cut short before any object rests.
#[test]
fn a_demo_cut_short_exits_one() {
    let output = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(["--timeout", "300ms"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("Timed out after 300ms"), "{stdout}");
    assert!(stdout.contains("Demo FAILED"), "{stdout}");
}

/// `--kubeconfig`, through the binary: against the real kube-apiserver
/// named by `FSM_REAL_APISERVER_KUBECONFIG`, else the embedded server over
/// loopback HTTP. Neither runs Job or Deployment controllers
/// (scripts/real-apiserver/start starts only the garbage collector,
/// namespace and service-account controllers): `--simulate`. A namespace of
/// its own, as the real server may be shared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_pass_through_a_kubeconfig() {
    let cluster = operator_fsm::testkit::TestCluster::from_env()
        .await
        .unwrap();
    let namespace = cluster.create_namespace("demo").await.unwrap();
    let (_http, kubeconfig) = match (cluster.embedded_server(), cluster.kubeconfig()) {
        (Some(server), _) => {
            let http = server.serve_http().await.unwrap();
            let path = http.kubeconfig().to_path_buf();
            (Some(http), path)
        }
        (None, Some(path)) => (None, path.to_path_buf()),
        (None, None) => panic!("a real cluster without a kubeconfig"),
    };
    let started = std::time::Instant::now();
    let mut demo = Command::new(env!("CARGO_BIN_EXE_demo"));
    demo.arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--simulate", "--namespace", &namespace, "--timeout", "120s"])
        .env_remove("RUST_LOG");
    // The embedded server answers from this process's runtime meanwhile.
    let output = tokio::task::spawn_blocking(move || demo.output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "exit {:?}\n{stdout}\n{stderr}",
        output.status
    );
    println!(
        "demo on the {} server: {:.1} s",
        cluster.backend(),
        started.elapsed().as_secs_f64()
    );
    let using = format!("Using the cluster of {}", kubeconfig.display());
    for line in [
        using.as_str(),
        "Summary: 7 of 7 objects rest in their expected state",
        "Change: deployment/sso",
        "Shop: shop/corner: serves v5",
        "Demo succeeded",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in\n{stdout}");
    }
    // The objects are in the server, as another client sees them.
    let keycloaks: kube::Api<examples::mutable_jar::Keycloak> =
        kube::Api::namespaced(cluster.client(), &namespace);
    let sso = keycloaks.get("sso").await.unwrap();
    let state = sso.status.and_then(|s| s.fsm).map(|f| f.state_name());
    assert_eq!(state, Some(Some("Done".to_owned())));
}
