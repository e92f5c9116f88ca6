//! `kubectl` as a second, independent client: if the real client accepts
//! the server, the server is faithful where operators and people look.
//!
//! These tests need `kubectl` on `PATH` (Debian: `apt-get install
//! kubernetes-client`); without it they fail, they never skip.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::within;
use fsm_testkit::{ApiServer, HttpServer};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

fn kubectl_binary() -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("kubectl"))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "kubectl was not found on PATH. The kubectl fidelity tests need it: \
             install it with `apt-get install -y kubernetes-client` (.ci/run does). \
             These tests fail rather than skip."
        )
    })
}

/// kubectl pointed at one server, with its own discovery cache.
struct Kubectl {
    binary: PathBuf,
    kubeconfig: PathBuf,
    cache: PathBuf,
}

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Kubectl {
    fn new(http: &HttpServer) -> Self {
        let cache = http.kubeconfig().parent().unwrap().join("kubectl-cache");
        Self {
            binary: kubectl_binary(),
            kubeconfig: http.kubeconfig().to_path_buf(),
            cache,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.binary);
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        c
    }

    async fn run(&self, args: &[&str]) -> Output {
        let out = within(60, self.command(args).output()).await.unwrap();
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs and requires success.
    /// Runs kubectl with `input` on its standard input (`apply -f -`).
    async fn run_with_stdin(&self, args: &[&str], input: &str) -> Output {
        use tokio::io::AsyncWriteExt;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).await.unwrap();
        drop(stdin);
        let out = within(60, child.wait_with_output()).await.unwrap();
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert_eq!(
            out.code, 0,
            "kubectl {args:?} failed:\nstdout: {}\nstderr: {}",
            out.stdout, out.stderr
        );
        out.stdout
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wd]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - name: Size
      type: integer
      jsonPath: .spec.size
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

const WIDGET: &str = r#"apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
  labels:
    team: blue
spec:
  size: 3
"#;

/// Splits a table into rows of whitespace-separated cells.
fn table(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_get_patch_delete_a_custom_resource() {
    let server = ApiServer::new();
    let http = server.serve_http().await.unwrap();
    let k = Kubectl::new(&http);
    let dir = http.kubeconfig().parent().unwrap().to_path_buf();
    let crd = write(&dir, "crd.yaml", CRD);
    let cr = write(&dir, "widget.yaml", WIDGET);

    // apply -f: CRD, then a CR of it (kubectl validates through the server).
    let out = k.ok(&["apply", "-f", &crd]).await;
    assert_eq!(
        out.trim(),
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created"
    );
    let out = k.ok(&["apply", "-f", &cr]).await;
    assert_eq!(out.trim(), "widget.example.com/w1 created");
    // Applying the same file again is a no-op patch.
    let out = k.ok(&["apply", "-f", &cr]).await;
    assert_eq!(out.trim(), "widget.example.com/w1 unchanged");

    // get: a server-side table with the CRD's printer columns.
    let rows = table(&k.ok(&["get", "widgets"]).await);
    assert_eq!(rows[0], ["NAME", "SIZE", "AGE"]);
    assert_eq!(rows[1][..2], ["w1", "3"]);
    assert_eq!(rows.len(), 2);
    let rows = table(&k.ok(&["get", "wd", "--show-labels"]).await);
    assert_eq!(rows[1].last().unwrap(), "team=blue");
    let rows = table(&k.ok(&["get", "crd"]).await);
    assert_eq!(rows[0], ["NAME", "CREATED", "AT"]);
    assert_eq!(rows[1][0], "widgets.example.com");

    // get -o json: the stored object.
    let obj: Value =
        serde_json::from_str(&k.ok(&["get", "widget", "w1", "-o", "json"]).await).unwrap();
    assert_eq!(obj["spec"]["size"], 3);
    assert_eq!(obj["metadata"]["generation"], 1);
    assert!(
        obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
    let list: Value = serde_json::from_str(&k.ok(&["get", "widgets", "-o", "json"]).await).unwrap();
    assert_eq!(list["items"][0]["metadata"]["name"], "w1");
    // Label selectors pass through kubectl.
    let none = k.run(&["get", "widgets", "-l", "team=red"]).await;
    assert_eq!(none.code, 0);
    assert!(
        none.stderr.contains("No resources found"),
        "{}",
        none.stderr
    );

    // patch --type merge.
    let out = k
        .ok(&[
            "patch",
            "widget",
            "w1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"size":5}}"#,
        ])
        .await;
    assert_eq!(out.trim(), "widget.example.com/w1 patched");
    let size = k
        .ok(&[
            "get",
            "widget",
            "w1",
            "-o",
            "jsonpath={.spec.size} {.metadata.generation}",
        ])
        .await;
    assert_eq!(size.trim(), "5 2");

    // delete, then get is NotFound as kubectl prints it.
    let out = k.ok(&["delete", "widget", "w1"]).await;
    assert_eq!(out.trim(), r#"widget.example.com "w1" deleted"#);
    let gone = k.run(&["get", "widget", "w1"]).await;
    assert_ne!(gone.code, 0);
    assert!(
        gone.stderr
            .contains(r#"Error from server (NotFound): widgets.example.com "w1" not found"#),
        "{}",
        gone.stderr
    );
    assert!(server.request_log().count("create", "widgets") == 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_resources_lists_builtins_and_custom_resources() {
    let server = ApiServer::new();
    let http = server.serve_http().await.unwrap();
    let k = Kubectl::new(&http);
    let dir = http.kubeconfig().parent().unwrap().to_path_buf();
    k.ok(&["apply", "-f", &write(&dir, "crd.yaml", CRD)]).await;

    let rows = table(&k.ok(&["api-resources"]).await);
    assert_eq!(
        rows[0],
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    );
    let has = |cells: &[&str]| rows.iter().any(|r| r == cells);
    assert!(
        has(&["configmaps", "cm", "v1", "true", "ConfigMap"]),
        "{rows:?}"
    );
    assert!(has(&["namespaces", "ns", "v1", "false", "Namespace"]));
    assert!(has(&[
        "deployments",
        "deploy",
        "apps/v1",
        "true",
        "Deployment"
    ]));
    assert!(has(&["leases", "coordination.k8s.io/v1", "true", "Lease"]));
    assert!(has(&["widgets", "wd", "example.com/v1", "true", "Widget"]));

    // kubectl asked for aggregated discovery and got it: no per-group requests.
    let paths: Vec<String> = server
        .request_log()
        .records()
        .into_iter()
        .map(|r| r.path)
        .collect();
    assert!(paths.iter().any(|p| p == "/apis"), "{paths:?}");
    assert!(!paths.iter().any(|p| p == "/apis/apps/v1"), "{paths:?}");

    let versions = k.ok(&["api-versions"]).await;
    assert!(
        versions.lines().any(|l| l == "example.com/v1"),
        "{versions}"
    );
    let ns = table(&k.ok(&["get", "namespaces"]).await);
    assert_eq!(ns[0], ["NAME", "STATUS", "AGE"]);
    assert!(ns.iter().any(|r| r[..2] == ["kube-system", "Active"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_prints_changes_until_killed() {
    let server = ApiServer::new();
    let http = server.serve_http().await.unwrap();
    let k = Kubectl::new(&http);
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());

    let mut child = k
        .command(&["get", "configmaps", "--watch"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Wait until kubectl's watch is open, then make a change it must print.
    within(30, async {
        while server.request_log().count("watch", "configmaps") == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let mut c = ConfigMap::default();
    c.metadata.name = Some("watched".into());
    cms.create(&PostParams::default(), &c).await.unwrap();

    let mut printed = Vec::new();
    within(30, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            printed.push(line.clone());
            if line.starts_with("watched ") {
                break;
            }
        }
    })
    .await;
    child.kill().await.unwrap();
    assert_eq!(
        table(&printed[0].clone())[0],
        ["NAME", "DATA", "AGE"],
        "{printed:?}"
    );
    assert_eq!(table(printed.last().unwrap())[0][..2], ["watched", "0"]);
}

/// Starts the `fsm-apiserver` binary with its kubeconfig in `dir`; returns
/// the process (killed on drop) and kubectl pointed at it.
async fn start_binary(dir: &Path) -> (tokio::process::Child, Kubectl) {
    let kubeconfig = dir.join("kubeconfig");
    let _ = std::fs::remove_file(&kubeconfig);
    let mut server = Command::new(env!("CARGO_BIN_EXE_fsm-apiserver"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = BufReader::new(server.stdout.take().unwrap()).lines();
    let first = within(30, out.next_line()).await.unwrap().unwrap();
    assert!(
        first.starts_with("serving the Kubernetes API on http://127.0.0.1:"),
        "{first}"
    );
    // Keep reading, so that the server never writes to a closed pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = out.next_line().await {} });
    within(30, async {
        while !kubeconfig.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let k = Kubectl {
        binary: kubectl_binary(),
        kubeconfig: kubeconfig.clone(),
        cache: dir.join("cache"),
    };
    (server, k)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_kubectl() {
    let dir = std::env::temp_dir().join(format!("fsm-apiserver-bin-{}", std::process::id()));
    let (mut server, k) = start_binary(&dir).await;
    let rows = table(&k.ok(&["get", "namespaces", "-o", "name"]).await);
    assert_eq!(
        rows,
        [
            ["namespace/default"],
            ["namespace/kube-public"],
            ["namespace/kube-system"]
        ]
    );
    server.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_and_strategic_merge_from_kubectl() {
    let server = ApiServer::new();
    let http = server.serve_http().await.unwrap();
    let k = Kubectl::new(&http);
    let dir = http.kubeconfig().parent().unwrap().to_path_buf();
    let crd = write(&dir, "crd.yaml", CRD);
    let cr = write(&dir, "widget.yaml", WIDGET);

    // Server-side apply of a CRD and of a custom resource: created, then changed.
    let out = k.ok(&["apply", "--server-side", "-f", &crd]).await;
    assert_eq!(
        out.trim(),
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.com serverside-applied"
    );
    let out = k.ok(&["apply", "--server-side", "-f", &cr]).await;
    assert_eq!(out.trim(), "widget.example.com/w1 serverside-applied");
    write(&dir, "widget.yaml", &WIDGET.replace("size: 3", "size: 4"));
    k.ok(&["apply", "--server-side", "-f", &cr]).await;
    let shown = k
        .ok(&["get", "widget", "w1", "-o", "json", "--show-managed-fields"])
        .await;
    let obj: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(obj["spec"]["size"], 4);
    let managers: Vec<&str> = obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["manager"].as_str())
        .collect();
    assert_eq!(managers, ["kubectl"]);

    // Another manager changes the field: re-applying conflicts, as kubectl
    // reports it, until --force-conflicts.
    k.ok(&[
        "patch",
        "widget",
        "w1",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"size":9}}"#,
    ])
    .await;
    let conflict = k.run(&["apply", "--server-side", "-f", &cr]).await;
    assert_ne!(conflict.code, 0);
    assert!(
        conflict.stderr.contains("conflict with \"kubectl-patch\"")
            && conflict.stderr.contains(".spec.size"),
        "{}",
        conflict.stderr
    );
    k.ok(&["apply", "--server-side", "--force-conflicts", "-f", &cr])
        .await;
    let size = k
        .ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.size}"])
        .await;
    assert_eq!(size.trim(), "4");

    // Client-side apply of a changed built-in object sends a strategic
    // merge patch.
    let cm = |v: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: {v}\n"
        )
    };
    let file = write(&dir, "cm.yaml", &cm("a"));
    k.ok(&["apply", "-f", &file]).await;
    write(&dir, "cm.yaml", &cm("b"));
    let out = k.ok(&["apply", "-f", &file]).await;
    assert_eq!(out.trim(), "configmap/settings configured");
    let mode = k
        .ok(&[
            "get",
            "configmap",
            "settings",
            "-o",
            "jsonpath={.data.mode}",
        ])
        .await;
    assert_eq!(mode.trim(), "b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_prints_help_and_refuses_unknown_flags() {
    let run = |args: &'static [&'static str]| async move {
        within(
            30,
            Command::new(env!("CARGO_BIN_EXE_fsm-apiserver"))
                .args(args)
                .kill_on_drop(true)
                .output(),
        )
        .await
        .unwrap()
    };
    let help = run(&["--help"]).await;
    let text = String::from_utf8_lossy(&help.stdout);
    assert_eq!(help.status.code(), Some(0), "--help exits 0: {text}");
    for flag in [
        "--port",
        "--kubeconfig",
        "--debug-port",
        "--simulate-workloads",
        "--help",
        "--version",
    ] {
        assert!(text.contains(flag), "--help lists {flag}:\n{text}");
    }
    let version = run(&["--version"]).await;
    assert_eq!(version.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("fsm-apiserver "));
    let bogus = run(&["--bogus"]).await;
    assert_eq!(bogus.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bogus.stderr);
    assert!(
        err.contains("unknown argument \"--bogus\"") && err.contains("usage:"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_printer_column_with_priority_shows_only_with_o_wide() {
    let server = ApiServer::new();
    let http = server.serve_http().await.unwrap();
    let k = Kubectl::new(&http);
    let dir = http.kubeconfig().parent().unwrap().to_path_buf();
    let with_detail = CRD.replace(
        "    - name: Age\n",
        "    - name: Team\n      type: string\n      jsonPath: .metadata.labels.team\n      priority: 1\n    - name: Age\n",
    );
    k.ok(&["apply", "-f", &write(&dir, "crd.yaml", &with_detail)])
        .await;
    k.ok(&["apply", "-f", &write(&dir, "widget.yaml", WIDGET)])
        .await;
    let rows = table(&k.ok(&["get", "widgets"]).await);
    assert_eq!(rows[0], ["NAME", "SIZE", "AGE"]);
    let rows = table(&k.ok(&["get", "widgets", "-o", "wide"]).await);
    assert_eq!(rows[0], ["NAME", "SIZE", "TEAM", "AGE"]);
    assert_eq!(rows[1][..3], ["w1", "3", "blue"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_clis_rbac_applies_with_kubectl() {
    use fsm_kube::cli::StoreKind;
    use fsm_kube::cli::rbac::{self, OperatorDescription, RbacScope, ResourceInfo};

    let dir = std::env::temp_dir().join(format!("fsm-apiserver-rbac-{}", std::process::id()));
    let (mut server, k) = start_binary(&dir).await;
    let operator = OperatorDescription {
        name: "site-operator".into(),
        resource: ResourceInfo {
            group: "example.io".into(),
            version: "v1".into(),
            kind: "StaticSite".into(),
            plural: "staticsites".into(),
            namespaced: true,
        },
        store: StoreKind::Status,
        needs_finalizer: true,
        extra_rules: vec![fsm_kube::cli::Rule::new(
            "",
            "configmaps",
            ["get", "create", "delete"],
        )],
    };
    // What `site-operator rbac --leader-elect --lease-namespace ops` prints.
    let scope = RbacScope {
        namespace: None,
        lease_namespace: Some("ops".into()),
    };
    let yaml = rbac::to_yaml(&rbac::manifests(&operator, &scope).unwrap()).unwrap();
    let ns = k
        .run_with_stdin(
            &["apply", "-f", "-"],
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: ops}\n",
        )
        .await;
    assert_eq!(ns.code, 0, "{}", ns.stderr);

    let out = k.run_with_stdin(&["apply", "-f", "-"], &yaml).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        [
            "clusterrole.rbac.authorization.k8s.io/site-operator created",
            "role.rbac.authorization.k8s.io/site-operator-leader-election created",
        ]
    );
    let again = k.run_with_stdin(&["apply", "-f", "-"], &yaml).await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stdout.contains("site-operator unchanged"),
        "{}",
        again.stdout
    );

    // Server-side apply of the same output takes over the fields.
    let ssa = k
        .run_with_stdin(
            &["apply", "--server-side", "--force-conflicts", "-f", "-"],
            &yaml,
        )
        .await;
    assert_eq!(ssa.code, 0, "{}", ssa.stderr);
    assert!(
        ssa.stdout
            .contains("clusterrole.rbac.authorization.k8s.io/site-operator serverside-applied"),
        "{}",
        ssa.stdout
    );
    let shown = k
        .ok(&["get", "clusterrole", "site-operator", "-o", "yaml"])
        .await;
    assert!(shown.contains("kind: ClusterRole"), "{shown}");
    assert!(shown.contains("- staticsites/finalizers"), "{shown}");
    let stored: Value = serde_json::from_str(
        &k.ok(&["get", "clusterrole", "site-operator", "-o", "json"])
            .await,
    )
    .unwrap();
    let rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule> =
        serde_json::from_value(stored["rules"].clone()).unwrap();
    assert_eq!(rules, rbac::rules(&operator).unwrap());
    let rows = table(&k.ok(&["get", "roles", "-n", "ops"]).await);
    assert_eq!(rows[0], ["NAME", "CREATED", "AT"]);
    assert_eq!(rows[1][0], "site-operator-leader-election");

    // A ServiceAccount and a binding to the role, as a deployment adds them.
    let binding = "apiVersion: v1
kind: ServiceAccount
metadata: {name: site-operator, namespace: ops}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: site-operator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: site-operator}
subjects:
- {kind: ServiceAccount, name: site-operator, namespace: ops}
";
    let out = k.run_with_stdin(&["apply", "-f", "-"], binding).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let rows = table(&k.ok(&["get", "clusterrolebinding", "site-operator"]).await);
    assert_eq!(rows[0], ["NAME", "ROLE", "AGE"]);
    assert_eq!(rows[1][..2], ["site-operator", "ClusterRole/site-operator"]);
    let rows = table(&k.ok(&["get", "sa", "-n", "ops"]).await);
    assert_eq!(rows[0], ["NAME", "SECRETS", "AGE"]);
    assert_eq!(rows[1][..2], ["site-operator", "0"]);
    k.ok(&["delete", "clusterrole", "site-operator"]).await;
    let gone = k.run(&["get", "clusterrole", "site-operator"]).await;
    assert!(gone.stderr.contains("NotFound"), "{}", gone.stderr);
    server.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_shows_events_written_through_events_k8s_io() {
    use k8s_openapi::api::core::v1::ObjectReference;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};

    let server = ApiServer::new();
    let http = server.serve_http().await.unwrap();
    let k = Kubectl::new(&http);
    let dir = http.kubeconfig().parent().unwrap().to_path_buf();
    k.ok(&["apply", "-f", &write(&dir, "crd.yaml", CRD)]).await;
    k.ok(&["apply", "-f", &write(&dir, "widget.yaml", WIDGET)])
        .await;
    let uid = k
        .ok(&["get", "widget", "w1", "-o", "jsonpath={.metadata.uid}"])
        .await;
    let reference = ObjectReference {
        api_version: Some("example.com/v1".into()),
        kind: Some("Widget".into()),
        name: Some("w1".into()),
        namespace: Some("default".into()),
        uid: Some(uid.trim().into()),
        ..ObjectReference::default()
    };
    // What an operator's Recorder writes: events.k8s.io/v1, created once,
    // then patched with a series.
    let recorder = Recorder::new(
        server.client(),
        Reporter {
            controller: "widget-operator".into(),
            instance: Some("widget-operator-0".into()),
        },
    );
    let event = Event {
        type_: EventType::Normal,
        reason: "Provisioned".into(),
        note: Some("the widget is ready".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    recorder.publish(&event, &reference).await.unwrap();
    recorder.publish(&event, &reference).await.unwrap();
    assert_eq!(server.request_log().count("create", "events"), 1);

    let described = k.ok(&["describe", "widget", "w1"]).await;
    let events = described
        .split_once("Events:")
        .map(|(_, e)| e)
        .unwrap_or_else(|| panic!("no Events section:\n{described}"));
    let line = events
        .lines()
        .find(|l| l.contains("Provisioned"))
        .unwrap_or_else(|| panic!("the event is not described:\n{described}"));
    assert!(
        line.contains("Normal")
            && line.contains("widget-operator")
            && line.contains("the widget is ready")
            && line.contains("(x2 over"),
        "{line}"
    );

    let rows = table(&k.ok(&["get", "events"]).await);
    assert_eq!(
        rows[0],
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    );
    let row = rows
        .iter()
        .find(|r| r.contains(&"Provisioned".into()))
        .unwrap();
    assert!(row.contains(&"widget/w1".into()), "{row:?}");
    let core: Value = serde_json::from_str(
        &k.ok(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.kind=Widget,involvedObject.name=w1,source=widget-operator",
            "-o",
            "json",
        ])
        .await,
    )
    .unwrap();
    let item = &core["items"][0];
    assert_eq!(item["message"], "the widget is ready");
    assert_eq!(item["reportingComponent"], "widget-operator");
    assert_eq!(item["reportingInstance"], "widget-operator-0");
    assert_eq!(item["series"]["count"], 2);
    assert_eq!(item["involvedObject"]["uid"], uid.trim());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_of_deployments_prints_the_real_columns() {
    use k8s_openapi::api::apps::v1::Deployment;
    let server = ApiServer::new();
    let http = server.serve_http().await.unwrap();
    let k = Kubectl::new(&http);
    let deployments: Api<Deployment> = Api::default_namespaced(server.client());
    let web: Deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx:1"},
                                                      {"name": "d", "image": "busybox"}]}}}
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &web)
        .await
        .unwrap();
    let listed = table(&k.ok(&["get", "deployments"]).await);
    assert_eq!(
        listed,
        [
            vec!["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
            vec!["web", "0/2", "0", "0", &listed[1][4]],
        ]
    );

    let mut child = k
        .command(&["get", "deployments", "--watch", "-o", "wide"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    within(30, async {
        while server.request_log().count("watch", "deployments") == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let status = serde_json::json!({"status": {"replicas": 2, "readyReplicas": 1,
        "updatedReplicas": 2, "availableReplicas": 1}});
    deployments
        .patch_status(
            "web",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&status),
        )
        .await
        .unwrap();
    let mut printed = Vec::new();
    within(30, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            printed.push(line.clone());
            if line.starts_with("web ") && line.contains("1/2") {
                break;
            }
        }
    })
    .await;
    child.kill().await.unwrap();
    let rows = table(&printed.join("\n"));
    assert_eq!(
        rows[0],
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ],
        "{printed:?}"
    );
    assert_eq!(
        rows.len(),
        3,
        "one header, then a line per event: {printed:?}"
    );
    let cells = |r: &[String]| {
        let mut r = r.to_vec();
        r.remove(4);
        r
    };
    assert_eq!(
        cells(&rows[1]),
        ["web", "0/2", "0", "0", "c,d", "nginx:1,busybox", "app=web"]
    );
    assert_eq!(
        cells(&rows[2]),
        ["web", "1/2", "2", "1", "c,d", "nginx:1,busybox", "app=web"]
    );
}
