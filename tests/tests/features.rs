//! An operator that only embeds the reconciler compiles no HTTP server, no
//! command-line parser and no YAML library: `operator-fsm` without its
//! default features (`cli`, and with it `view` and `http`) pulls in none of
//! axum, clap and serde_yaml_ng, and with them it does. Read from the
//! dependency graph cargo resolves (`cargo tree`), which needs no build.

use std::collections::BTreeSet;
use std::process::Command;

/// The packages `cargo tree` lists for `operator-fsm` built with `args`
/// (normal dependencies only: what an operator's build compiles).
fn packages(args: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace");
    let output = Command::new(cargo)
        .current_dir(workspace)
        .args([
            "tree",
            "--offline",
            "-p",
            "operator-fsm",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .args(args)
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

const FRONT_ENDS: [&str; 3] = ["axum", "clap", "serde_yaml_ng"];

#[test]
fn the_reconciler_alone_pulls_no_http_server_cli_parser_or_yaml() {
    let lean = packages(&["--no-default-features"]);
    assert!(
        lean.contains("kube") && lean.contains("fsm-kube"),
        "the tree was read: {lean:?}"
    );
    let pulled: Vec<&str> = FRONT_ENDS
        .into_iter()
        .filter(|name| lean.contains(*name))
        .collect();
    assert!(
        pulled.is_empty(),
        "operator-fsm without default features still depends on {pulled:?}"
    );
}

#[test]
fn the_default_features_bring_the_cli_the_view_and_the_endpoints() {
    let full = packages(&[]);
    for name in FRONT_ENDS {
        assert!(full.contains(name), "{name} missing from {full:?}");
    }
    // `http` alone: the endpoints' server, no CLI parser.
    let http = packages(&["--no-default-features", "--features", "http"]);
    assert!(http.contains("axum") && !http.contains("clap"), "{http:?}");
}
