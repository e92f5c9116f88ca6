//! The README's own path: `cargo run -p examples --bin demo -- --serve`,
//! then `kubectl fsm get|describe|diagram` against it, for every kind the
//! demo runs. The demo's library entry point ([`examples::demo::run`], what
//! the binary runs) with `serve`, on its own embedded server; the real
//! `kubectl` runs the built plugin against the kubeconfig the demo prints.
//!
//! Embedded server only: `--serve` serves the demo's own server (with
//! `--kubeconfig`, which the real server would need, there is nothing to
//! serve).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use examples::demo::observe::Kind;
use examples::demo::{DemoOptions, STORES, crds, run, scenario};
use fsm_core::Fsm;
use fsm_kube::cli::{Command as OperatorCommand, CrdArgs, Operator, RunContext, StoreKind};
use fsm_kube::records::rows::Row;
use fsm_kube::records::{MACHINE_ANNOTATION, PublishedMachine};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::plugin::kubectl_binary;

/// What the demo writes, readable while it runs.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Shared {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

const STAYS_UP: &str = "The API server stays up for kubectl: --kubeconfig ";

/// Runs the demo with `--serve` until it says where its server stays up;
/// the task (aborted when the test ends) and the kubeconfig path.
async fn serve_demo(out: &Shared) -> (tokio::task::JoinHandle<()>, PathBuf) {
    let options = DemoOptions {
        serve: true,
        view: Some(([127, 0, 0, 1], 0).into()),
        timeout: Duration::from_secs(90),
        ..DemoOptions::default()
    };
    let mut writer = out.clone();
    let demo = tokio::spawn(async move {
        // Runs until the test aborts it (the binary waits for Ctrl-C).
        let outcome = run(&options, &mut writer).await;
        writeln!(writer, "\nthe demo returned: {outcome:?}").ok();
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let text = out.text();
        if let Some(at) = text.find(STAYS_UP) {
            assert!(text.contains("Demo succeeded"), "{text}");
            let rest = &text[at + STAYS_UP.len()..];
            let end = rest.find(" (Ctrl-C").expect("the kubeconfig path ends");
            return (demo, PathBuf::from(&rest[..end]));
        }
        assert!(
            tokio::time::Instant::now() < deadline && !demo.is_finished(),
            "the demo never said where its server stays up:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs `kubectl ARGS` with the built plugin first on `PATH`; its stdout,
/// after checking that it succeeded.
async fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> String {
    let plugin = Path::new(env!("CARGO_BIN_EXE_kubectl-fsm"));
    let mut paths = vec![plugin.parent().unwrap().to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let output = tokio::process::Command::new(kubectl_binary())
        .args(args)
        .env("PATH", std::env::join_paths(paths).unwrap())
        .env("KUBECONFIG", kubeconfig)
        .env("KUBECACHEDIR", cache)
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        output.status.success(),
        "kubectl {args:?} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    stdout
}

fn no_run<F: Fsm>(_: RunContext<F>) -> std::future::Ready<()> {
    std::future::ready(())
}

/// What the operator of `F`, keeping its records in `store`, prints with
/// `crd` (`--printer-columns` when `columns`), parsed.
async fn printed<F>(store: StoreKind, columns: bool) -> CustomResourceDefinition
where
    F: Fsm,
    F::Resource: fsm_kube::KubeResource + kube::CustomResourceExt,
{
    let mut out = Vec::new();
    Operator::<F>::new("demo-test", store)
        .execute(
            OperatorCommand::Crd(CrdArgs {
                printer_columns: columns,
                ..CrdArgs::default()
            }),
            no_run::<F>,
            &mut out,
        )
        .await
        .unwrap();
    serde_yaml_ng::from_slice(&out).unwrap()
}

/// The `crd` command's output for the demo's `kind`.
async fn printed_for(kind: Kind, store: StoreKind) -> CustomResourceDefinition {
    let columns = store == StoreKind::Status;
    match kind {
        Kind::Keycloak => printed::<examples::mutable_jar::JarState>(store, columns).await,
        Kind::Integration => {
            printed::<examples::integration::IntegrationPhase>(store, columns).await
        }
        Kind::Database => printed::<examples::database::DbState>(store, columns).await,
        Kind::WebPage => printed::<examples::webpage::PageState>(store, columns).await,
        Kind::Shop => printed::<examples::shop::ShopState>(store, columns).await,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_fsm_get_describe_and_diagram_work_against_demo_serve() {
    let out = Shared::default();
    let (demo, kubeconfig) = serve_demo(&out).await;
    let cache = std::env::temp_dir().join(format!("kubectl-fsm-demo-{}", std::process::id()));
    let namespace = DemoOptions::default().namespace;
    let installed = crds().unwrap();
    assert_eq!(installed.len(), STORES.len());
    let tracked = scenario::tracked();

    for (&(kind, store), demo_crd) in STORES.iter().zip(&installed) {
        // What the demo installs is exactly what the operator's `crd` prints.
        let printed = printed_for(kind, store).await;
        assert_eq!(demo_crd, &printed, "{kind:?}");
        let published = PublishedMachine::from_crd(demo_crd).unwrap().unwrap();
        assert_eq!(published.store, store, "{kind:?}");

        let plural = demo_crd.spec.names.plural.as_str();
        let on_server = kubectl(
            &kubeconfig,
            &cache,
            &[
                "get",
                "crd",
                &demo_crd.metadata.name.clone().unwrap(),
                "-o",
                "json",
            ],
        )
        .await;
        let on_server: CustomResourceDefinition = serde_json::from_str(&on_server).unwrap();
        let annotations = on_server.metadata.annotations.unwrap_or_default();
        assert_eq!(
            annotations.get(MACHINE_ANNOTATION),
            demo_crd
                .metadata
                .annotations
                .as_ref()
                .unwrap()
                .get(MACHINE_ANNOTATION),
            "{kind:?}"
        );
        assert_eq!(
            on_server.spec.versions[0].additional_printer_columns,
            demo_crd.spec.versions[0].additional_printer_columns,
            "{kind:?}"
        );

        let json = kubectl(
            &kubeconfig,
            &cache,
            &["fsm", "get", plural, "-n", &namespace, "-o", "json"],
        )
        .await;
        let rows: Vec<Row> = serde_json::from_str(&json).unwrap();
        let expected: Vec<_> = tracked.iter().filter(|t| t.kind == kind).collect();
        assert_eq!(rows.len(), expected.len(), "{kind:?}: {json}");
        for object in expected {
            let row = rows
                .iter()
                .find(|r| r.name == object.name)
                .unwrap_or_else(|| panic!("{} missing in {json}", object.name));
            assert_eq!(row.state.as_deref(), Some(object.expected), "{json}");

            let described = kubectl(
                &kubeconfig,
                &cache,
                &["fsm", "describe", plural, &object.name, "-n", &namespace],
            )
            .await;
            let heading = format!(
                "{} {namespace}/{} (record in ",
                demo_crd.spec.names.kind, object.name
            );
            assert!(described.starts_with(&heading), "{described}");
            assert!(
                described.contains(&format!("State:        {}", object.expected)),
                "{described}"
            );
            assert!(described.contains("History:\n"), "{described}");
        }

        let diagram = kubectl(&kubeconfig, &cache, &["fsm", "diagram", plural]).await;
        assert_eq!(diagram, published.graph.text(), "{kind:?}");

        // Where the records are in the status, kubectl's own `get` shows
        // each object's state through the printer columns.
        if store == StoreKind::Status {
            let text = kubectl(&kubeconfig, &cache, &["get", plural, "-n", &namespace]).await;
            let rows: Vec<Vec<&str>> = text
                .lines()
                .map(|l| l.split_whitespace().collect())
                .collect();
            for column in ["STATE", "ATTEMPT", "IN-STATE", "AGE"] {
                assert!(rows[0].contains(&column), "{column} missing: {text}");
            }
            let state = rows[0].iter().position(|c| *c == "STATE").unwrap();
            for object in tracked.iter().filter(|t| t.kind == kind) {
                assert!(
                    rows[1..]
                        .iter()
                        .any(|r| r[0] == object.name && r[state] == object.expected),
                    "{} not {}: {text}",
                    object.name,
                    object.expected
                );
            }
        }
    }
    demo.abort();
    std::fs::remove_dir_all(&cache).ok();
}
