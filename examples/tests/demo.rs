//! The main demo, as CI runs it: non-interactive, bounded, every object in
//! its expected state.

use std::process::Command;
use std::time::Duration;

use examples::demo::observe::Kind;
use examples::demo::{DemoOptions, run, scenario};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_rests_in_its_expected_state() {
    let options = DemoOptions {
        timeout: Duration::from_secs(60),
        ..DemoOptions::default()
    };
    let mut out = Vec::new();
    let report = run(&options, &mut out).await.unwrap();
    let text = String::from_utf8(out).unwrap();
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
    assert!(report.elapsed < Duration::from_secs(60));
}

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
        stdout.contains("Summary: 5 of 5 objects rest in their expected state"),
        "{stdout}"
    );
    for line in [
        "✔ keycloak/sso: Done (expected Done)",
        "✔ integration/orders: Running (expected Running)",
        "✔ integration/billing: Running (expected Running)",
        "✔ database/inventory: Ready (expected Ready)",
        "✔ database/analytics: Failed (expected Failed)",
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

/// `--kubeconfig` wiring, against the embedded server over loopback HTTP
/// (which, like `fsm-apiserver`, runs no controllers: `--simulate`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_operators_run_through_a_kubeconfig() {
    let server = fsm_testkit::ApiServer::new();
    let http = server.serve_http().await.unwrap();
    let options = DemoOptions {
        timeout: Duration::from_secs(60),
        kubeconfig: Some(http.kubeconfig().to_path_buf()),
        simulate: true,
        namespace: "over-http".into(),
        ..DemoOptions::default()
    };
    let mut out = Vec::new();
    let report = run(&options, &mut out).await.unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(report.success(), "{text}");
    assert!(
        text.contains(&format!(
            "Using the cluster of {}",
            http.kubeconfig().display()
        )),
        "{text}"
    );
    // The objects are in the server, as the in-process client sees them.
    let keycloaks: kube::Api<examples::mutable_jar::Keycloak> =
        kube::Api::namespaced(server.client(), "over-http");
    let sso = keycloaks.get("sso").await.unwrap();
    let state = sso
        .status
        .and_then(|s| s.fsm)
        .map(|f| f.state_name().map(str::to_owned));
    assert_eq!(state, Some(Some("Done".to_owned())));
}
