//! The tools from a reader's own crate, exactly as the docs say: a scratch
//! crate made from the tutorial (its `Cargo.toml` from section 1, its
//! `src/main.rs` from section 6), `fsm-apiserver` and `kubectl-fsm`
//! installed with the `cargo install` lines of docs/tools.md, then the
//! "from anywhere" steps of that page: the server started, the crate's CRD
//! applied, its operator run, an object created, and `kubectl fsm get`
//! showing the object's state through the installed plugin.
//!
//! Everything is read from the docs, so a change to them that breaks a
//! reader's path breaks this test. Three changes from the page, each for
//! the test's sake only: the crates' path is this checkout (the page
//! assumes a checkout beside the reader's crate), `--debug` (a release
//! build of both tools would add minutes) and `--offline` (tests do not
//! download: the crate resolves from the registry cache the workspace's
//! own build filled, with this workspace's `Cargo.lock`). The three builds
//! share one target directory under the workspace's `target/tmp`, and the
//! crate takes the workspace's dev profile so that they share dependencies.
//!
//! It needs `kubectl` on `PATH`, as the other kubectl tests do.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The workspace's dev profile, which `cargo install --path` of its
/// members builds with: the reader's crate uses it too (a test-only
/// addition), so that the three builds share their dependencies' builds.
const SHARED_PROFILE: &str =
    "[profile.dev]\ndebug = \"line-tables-only\"\n\n[profile.dev.package.\"*\"]\ndebug = false\n";

/// The workspace root (this crate is `tests/`).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The fenced block of `lang` that follows `heading` in `markdown`.
fn block_after(markdown: &str, heading: &str, lang: &str) -> String {
    let at = markdown
        .find(heading)
        .unwrap_or_else(|| panic!("the docs have no heading {heading:?}"));
    let rest = &markdown[at..];
    let fence = format!("```{lang}");
    let start = rest
        .find(&fence)
        .unwrap_or_else(|| panic!("no ```{lang} block after {heading:?}"));
    let body = &rest[start..];
    let body = &body[body.find('\n').expect("a fence line ends") + 1..];
    let end = body.find("\n```").expect("the block ends");
    body[..end + 1].to_string()
}

/// A Rust doc block as a source file: the lines hidden with `# ` shown.
fn unhide(rust: &str) -> String {
    rust.lines()
        .map(|line| {
            let trimmed = line.trim_start();
            if trimmed == "#" {
                ""
            } else if let Some(rest) = trimmed.strip_prefix("# ") {
                rest
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs `command`, failing the test with its output unless it succeeds.
fn run(command: &mut Command) -> Output {
    let shown = format!("{command:?}");
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{shown} did not start: {e}"));
    assert!(
        output.status.success(),
        "{shown} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A cargo of the same toolchain, building into the shared `target`.
fn cargo(target: &Path) -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET_DIR");
    command
}

/// Child processes killed when the test ends, however it ends.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `kubectl` with the installed tools first on `PATH`.
fn kubectl(bin: &Path, kubeconfig: &Path, cache: &Path) -> Command {
    let mut paths = vec![bin.to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let mut command = Command::new("kubectl");
    command
        .env("PATH", std::env::join_paths(paths).expect("a PATH"))
        .env("KUBECONFIG", kubeconfig)
        .env("KUBECACHEDIR", cache);
    command
}

#[test]
fn a_scratch_crate_installs_and_uses_the_tools_as_the_docs_say() {
    let repo = repo();
    let tutorial = std::fs::read_to_string(repo.join("docs/tutorial.md")).expect("tutorial.md");
    let tools = std::fs::read_to_string(repo.join("docs/tools.md")).expect("tools.md");
    let checkout = format!("{}/", repo.display());

    // The reader's crate, beside nothing: a fresh directory.
    let scratch = std::env::temp_dir().join(format!("fsm-scratch-crate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let krate = scratch.join("site-operator");
    std::fs::create_dir_all(krate.join("src")).expect("the crate's directory");
    let dependencies =
        block_after(&tutorial, "## 1. The crate", "toml").replace("../operator-fsm/", &checkout);
    assert!(
        dependencies.contains(&checkout),
        "the tutorial's Cargo.toml no longer depends on operator-fsm by path:\n{dependencies}"
    );
    std::fs::write(
        krate.join("Cargo.toml"),
        format!(
            "[package]\nname = \"site-operator\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n{dependencies}\n{SHARED_PROFILE}"
        ),
    )
    .expect("Cargo.toml");
    let main = unhide(&block_after(&tutorial, "## 6. The binary", "rust"));
    std::fs::write(krate.join("src/main.rs"), main).expect("src/main.rs");
    std::fs::copy(repo.join("Cargo.lock"), krate.join("Cargo.lock")).expect("Cargo.lock");

    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scratch-crate-target");
    let root = scratch.join("cargo-root");
    let bin = root.join("bin");

    // The two tools, with the page's `cargo install` lines.
    let installs: Vec<&str> = tools
        .lines()
        .filter(|l| l.starts_with("cargo install --locked --path ../operator-fsm/"))
        .collect();
    assert_eq!(
        installs.len(),
        2,
        "docs/tools.md should install fsm-apiserver and kubectl-fsm from a checkout"
    );
    for line in installs {
        let line = line.replace("../operator-fsm/", &checkout);
        let mut words = line.split_whitespace();
        assert_eq!(words.next(), Some("cargo"));
        run(cargo(&target)
            .args(words)
            .args(["--debug", "--offline", "--root"])
            .arg(&root));
    }
    for tool in ["fsm-apiserver", "kubectl-fsm"] {
        assert!(
            bin.join(tool).is_file(),
            "{tool} was not installed in {bin:?}"
        );
    }

    // The reader's operator.
    run(cargo(&target)
        .args(["build", "--offline", "--manifest-path"])
        .arg(krate.join("Cargo.toml")));
    let operator = target.join("debug/site-operator");

    // "Then, from anywhere".
    let kubeconfig = scratch.join("fsm.kubeconfig");
    let cache = scratch.join("kube-cache");
    let mut children = Children(Vec::new());
    children.0.push(
        Command::new(bin.join("fsm-apiserver"))
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .stdout(Stdio::null())
            .spawn()
            .expect("fsm-apiserver starts"),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while !kubeconfig.is_file() {
        assert!(
            Instant::now() < deadline,
            "fsm-apiserver wrote no kubeconfig"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let namespaces = run(kubectl(&bin, &kubeconfig, &cache).args(["get", "namespaces"]));
    assert!(String::from_utf8_lossy(&namespaces.stdout).contains("default"));

    let crd = run(Command::new(&operator).args(["crd", "--printer-columns"]));
    let mut apply = kubectl(&bin, &kubeconfig, &cache)
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl apply starts");
    apply
        .stdin
        .take()
        .expect("stdin")
        .write_all(&crd.stdout)
        .expect("the CRD to kubectl");
    let applied = apply.wait_with_output().expect("kubectl apply ends");
    assert!(
        applied.status.success(),
        "kubectl apply of the CRD: {}",
        String::from_utf8_lossy(&applied.stderr)
    );

    children.0.push(
        Command::new(&operator)
            .args(["run", "--kubeconfig"])
            .arg(&kubeconfig)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the operator starts"),
    );
    let site = scratch.join("home.yaml");
    std::fs::write(
        &site,
        "apiVersion: example.io/v1\nkind: StaticSite\nmetadata: {name: home, namespace: default}\nspec: {content: \"<h1>hi</h1>\"}\n",
    )
    .expect("the object's manifest");
    // The CRD may take a moment to be served.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let created = kubectl(&bin, &kubeconfig, &cache)
            .args(["apply", "-f"])
            .arg(&site)
            .output()
            .expect("kubectl runs");
        if created.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the StaticSite was never created: {}",
            String::from_utf8_lossy(&created.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let plugins = run(kubectl(&bin, &kubeconfig, &cache).args(["plugin", "list"]));
    assert!(
        String::from_utf8_lossy(&plugins.stdout)
            .contains(&bin.join("kubectl-fsm").display().to_string()),
        "kubectl plugin list does not show the installed plugin:\n{}",
        String::from_utf8_lossy(&plugins.stdout)
    );

    // The operator drives the object to its state; the plugin shows it.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let got = run(kubectl(&bin, &kubeconfig, &cache).args(["fsm", "get", "staticsites", "-A"]));
        let table = String::from_utf8_lossy(&got.stdout).into_owned();
        let row = table
            .lines()
            .find(|l| l.split_whitespace().any(|w| w == "home"));
        if row.is_some_and(|r| r.split_whitespace().any(|w| w == "Pending")) {
            assert!(table.starts_with("NAMESPACE"), "{table}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl fsm get never showed home in Pending:\n{table}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    drop(children);
    let _ = std::fs::remove_dir_all(&scratch);
}
