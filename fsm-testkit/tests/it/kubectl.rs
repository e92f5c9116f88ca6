//! `kubectl` as a second, independent client: if the real client accepts
//! the server, the server is faithful where operators and people look.
//!
//! These tests need `kubectl` on `PATH` (Debian: `apt-get install
//! kubernetes-client`); without it they fail, they never skip.

use crate::common;

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
    use fsm_kube::cli::rbac::{self, OperatorDescription, RbacScope};
    use fsm_kube::records::ResourceInfo;

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
        lease_name: None,
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
    // The namespace's own `default` account (the serviceaccount
    // controller's) comes first; each has its token Secret, as the 1.20
    // token controller makes it.
    assert_eq!(rows[1][..2], ["default", "1"]);
    assert_eq!(rows[2][..2], ["site-operator", "1"]);
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

// ---------------------------------------------------------------- generators ---

/// A self-signed certificate and its key for `kubectl create secret tls`
/// (valid until 2126; only parsed).
const TLS_CERT: &str = r"-----BEGIN CERTIFICATE-----
MIIBijCCAS+gAwIBAgIUYywhVNEFxVccIMGHtuG9OAnTeWUwCgYIKoZIzj0EAwIw
GTEXMBUGA1UEAwwOZ2VuZXJhdG9yLnRlc3QwIBcNMjYxMTMwMTM0MjUyWhgPMjEy
NjExMDYxMzQyNTJaMBkxFzAVBgNVBAMMDmdlbmVyYXRvci50ZXN0MFkwEwYHKoZI
zj0CAQYIKoZIzj0DAQcDQgAEb0gPVNp6W7I8bA2PSsTioEGLLhuTfgZ47JUJl1/x
RoZ1WA3tujthBEgbPrtiMOgksKOz4yVFPpqG2FOMp2WYB6NTMFEwHQYDVR0OBBYE
FBJsBQQxuy7qnm8AbSeAxZQsq28OMB8GA1UdIwQYMBaAFBJsBQQxuy7qnm8AbSeA
xZQsq28OMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSQAwRgIhAMib177d
mHco3uAuf9ke1pdXAVlRfLzq+OL1+AVZvC7HAiEA/GSd8vq5yr1o5cDWc592MQnv
XhnQvDsmv8vSzkRDzWo=
-----END CERTIFICATE-----
";
const TLS_KEY: &str = r"-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgkUnuZqVYUdaImQeh
GCfLI8MxR0UDv9Xrbkhkviu3WHWhRANCAARvSA9U2npbsjxsDY9KxOKgQYsuG5N+
BnjslQmXX/FGhnVYDe26O2EESBs+u2Iw6CSwo7PjJUU+mobYU4ynZZgH
-----END PRIVATE KEY-----
";

/// kubectl pointed at the real kube-apiserver of
/// `FSM_REAL_APISERVER_KUBECONFIG`, if set, with its own discovery cache.
fn real_kubectl(dir: &Path) -> Option<Kubectl> {
    let kubeconfig = std::env::var_os(fsm_testkit::REAL_APISERVER_ENV).filter(|v| !v.is_empty())?;
    Some(Kubectl {
        binary: kubectl_binary(),
        kubeconfig: PathBuf::from(kubeconfig),
        cache: dir.join("real-kubectl-cache"),
    })
}

/// Drops what differs between any two servers or runs: uid,
/// resourceVersion, timestamps, managedFields, allocated IPs and node ports.
fn normalize(mut object: Value, node_port: u64) -> Value {
    if let Some(meta) = object["metadata"].as_object_mut() {
        for k in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
        ] {
            meta.remove(k);
        }
    }
    if let Some(spec) = object["spec"].as_object_mut() {
        for k in ["clusterIP", "clusterIPs"] {
            if spec.contains_key(k) {
                spec.insert(k.into(), Value::from("<allocated>"));
            }
        }
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for p in ports {
                // Allocated unless asked for (`--node-port`).
                if p.get("nodePort").is_some_and(|n| n != node_port) {
                    p["nodePort"] = Value::from("<allocated>");
                }
            }
        }
    }
    object
}

/// Where `a` and `b` differ: `(path, a's value, b's value)`, `null` for absent.
fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<(String, Value, Value)>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let null = Value::Null;
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                differences(
                    &p,
                    x.get(k).unwrap_or(&null),
                    y.get(k).unwrap_or(&null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (xa, yb)) in x.iter().zip(y).enumerate() {
                differences(&format!("{path}[{i}]"), xa, yb, out);
            }
        }
        _ if a == b => {}
        _ => out.push((path.to_owned(), a.clone(), b.clone())),
    }
}

/// Fields the real server adds that the embedded one does not: its
/// defaulting of workloads and Services, and its controllers (docs/testing.md).
/// A path here is a kind and a field path with indexes dropped.
const DEFAULTED_BY_THE_REAL_SERVER: &[&str] = &[
    // The namespace lifecycle's finalizer.
    "namespace spec.finalizers",
    // Pod template defaults.
    "deployment spec.template.spec.",
    "job spec.template.spec.",
    // Workload defaults.
    "deployment spec.progressDeadlineSeconds",
    "deployment spec.revisionHistoryLimit",
    "deployment spec.strategy.",
    "job spec.backoffLimit",
    "job spec.completions",
    "job spec.parallelism",
    // A Job's generated selector and labels (`controller-uid`, `job-name`).
    "job spec.selector",
    "job metadata.labels",
    "job spec.template.metadata.labels",
    // The token controller's Secret (1.20).
    "serviceaccount secrets",
    // Service defaults and allocation.
    "service spec.sessionAffinity",
    "service spec.externalTrafficPolicy",
    "service spec.clusterIPs",
    "service spec.ports.nodePort",
];

/// Differences between the versions (1.20 there, the 1.34 API here):
/// Jobs have had `metadata.generation` since 1.21.
const VERSION_DIFFERENCES: &[&str] = &["job metadata.generation"];

/// An empty status (`{}`, `{"loadBalancer": {}}`): the embedded server
/// drops a status sent with a create; the real one keeps its empty struct.
fn hollow(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.values().all(|x| x.is_object() && hollow(x)),
        _ => false,
    }
}

fn without_indexes(path: &str) -> String {
    let mut out = String::new();
    let mut skipping = false;
    for c in path.chars() {
        match c {
            '[' => skipping = true,
            ']' => skipping = false,
            c if !skipping => out.push(c),
            _ => {}
        }
    }
    out
}

/// Every `kubectl create` generator whose kind the embedded server serves:
/// kubectl 1.32 sends them in protobuf. Each stores, on the embedded
/// server, what the command builds (its `--dry-run=client -o json`) and,
/// with `FSM_REAL_APISERVER_KUBECONFIG` set, what the same command stores
/// on the real server, but for the real server's defaults listed in
/// [`DEFAULTED_BY_THE_REAL_SERVER`].
///
/// Not served, so not here: `cronjob`, `priorityclass`, `quota` (404 from
/// the embedded server) and `token` (the `serviceaccounts/token`
/// subresource, 405). `ingress` and `poddisruptionbudget` are served and
/// their generators store on the embedded server, but are not compared
/// here (PodDisruptionBudget is served without a schema, so its objects
/// are not decoded against a type: docs/served-kinds.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_create_generator_stores_what_the_real_server_stores() {
    let server = ApiServer::new();
    let http = server.serve_http().await.unwrap();
    let dir = http.kubeconfig().parent().unwrap().to_path_buf();
    let embedded = Kubectl::new(&http);
    let real = real_kubectl(&dir);
    let token = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
            % 0xff_ffff
    );
    let ns = format!("gen-{token}");
    // A node port of this run's own: another run's may still be allocated
    // on the real server while its namespace terminates.
    let node_port = 30_000 + u64::from_str_radix(&token, 16).unwrap() % 2_700;
    let cert = write(&dir, "tls.crt", TLS_CERT);
    let key = write(&dir, "tls.key", TLS_KEY);
    let file = write(&dir, "settings.ini", "[main]\nmode=fast\n");
    let cr = format!("gen-cr-{token}");
    let crb = format!("gen-crb-{token}");
    let agg = format!("gen-agg-{token}");
    // (resource to get, name, generator and its arguments).
    let cases: Vec<(&str, String, Vec<String>)> = vec![
        (
            "namespace",
            ns.clone(),
            vec!["namespace".into(), ns.clone()],
        ),
        (
            "configmap",
            "cm".into(),
            vec![
                "configmap".into(),
                "cm".into(),
                "--from-literal=a=1".into(),
                format!("--from-file={file}"),
                "--from-literal=empty=".into(),
            ],
        ),
        (
            "secret",
            "generic".into(),
            vec![
                "secret".into(),
                "generic".into(),
                "generic".into(),
                "--from-literal=user=admin".into(),
                format!("--from-file=config={file}"),
                "--type=example.com/custom".into(),
            ],
        ),
        (
            "secret",
            "tls".into(),
            vec![
                "secret".into(),
                "tls".into(),
                "tls".into(),
                format!("--cert={cert}"),
                format!("--key={key}"),
            ],
        ),
        (
            "secret",
            "registry".into(),
            vec![
                "secret".into(),
                "docker-registry".into(),
                "registry".into(),
                "--docker-username=u".into(),
                "--docker-password=p".into(),
                "--docker-email=u@example.com".into(),
                "--docker-server=registry.example.com".into(),
            ],
        ),
        (
            "deployment",
            "web".into(),
            vec![
                "deployment".into(),
                "web".into(),
                "--image=nginx:1.25".into(),
                "--image=busybox:1".into(),
                "--replicas=3".into(),
                "--port=8080".into(),
            ],
        ),
        (
            "job",
            "once".into(),
            vec![
                "job".into(),
                "once".into(),
                "--image=busybox:1".into(),
                "--".into(),
                "echo".into(),
                "hi".into(),
            ],
        ),
        (
            "serviceaccount",
            "robot".into(),
            vec!["serviceaccount".into(), "robot".into()],
        ),
        (
            "service",
            "cip".into(),
            vec![
                "service".into(),
                "clusterip".into(),
                "cip".into(),
                "--tcp=80:8080".into(),
                "--tcp=443:https".into(),
            ],
        ),
        (
            "service",
            "headless".into(),
            vec![
                "service".into(),
                "clusterip".into(),
                "headless".into(),
                "--clusterip=None".into(),
            ],
        ),
        (
            "service",
            "np".into(),
            vec![
                "service".into(),
                "nodeport".into(),
                "np".into(),
                "--tcp=80:8080".into(),
                format!("--node-port={node_port}"),
            ],
        ),
        (
            "service",
            "lb".into(),
            vec![
                "service".into(),
                "loadbalancer".into(),
                "lb".into(),
                "--tcp=80:8080".into(),
            ],
        ),
        (
            "service",
            "ext".into(),
            vec![
                "service".into(),
                "externalname".into(),
                "ext".into(),
                "--external-name=db.example.com".into(),
            ],
        ),
        (
            "role",
            "reader".into(),
            vec![
                "role".into(),
                "reader".into(),
                "--verb=get,list,watch".into(),
                "--resource=pods,deployments.apps,pods/log".into(),
                "--resource-name=a".into(),
            ],
        ),
        (
            "clusterrole",
            cr.clone(),
            vec![
                "clusterrole".into(),
                cr.clone(),
                "--verb=get".into(),
                "--resource=configmaps".into(),
                "--non-resource-url=/healthz".into(),
            ],
        ),
        (
            "clusterrole",
            agg.clone(),
            vec![
                "clusterrole".into(),
                agg.clone(),
                "--aggregation-rule=gen.example.com/aggregate=true".into(),
            ],
        ),
        (
            "rolebinding",
            "readers".into(),
            vec![
                "rolebinding".into(),
                "readers".into(),
                "--role=reader".into(),
                "--user=alice".into(),
                "--group=devs".into(),
                format!("--serviceaccount={ns}:robot"),
            ],
        ),
        (
            "clusterrolebinding",
            crb.clone(),
            vec![
                "clusterrolebinding".into(),
                crb.clone(),
                format!("--clusterrole={cr}"),
                "--user=bob".into(),
            ],
        ),
    ];
    let mut problems = Vec::new();
    let mut defaulted = std::collections::BTreeSet::new();
    for (resource, name, args) in &cases {
        let namespaced = !matches!(
            *resource,
            "namespace" | "clusterrole" | "clusterrolebinding"
        );
        let mut create: Vec<&str> = vec!["create"];
        let scope = ["-n", ns.as_str()];
        // Flags before `--` (a job's command follows it).
        let split = args.iter().position(|a| a == "--").unwrap_or(args.len());
        create.extend(args[..split].iter().map(String::as_str));
        if namespaced {
            create.extend(scope);
        }
        let mut client_side = create.clone();
        client_side.extend(["--dry-run=client", "-o", "json"]);
        create.extend(args[split..].iter().map(String::as_str));
        client_side.extend(args[split..].iter().map(String::as_str));
        let mut get = vec!["get", resource, name.as_str(), "-o", "json"];
        if namespaced {
            get.extend(scope);
        }
        // What kubectl builds, and what the embedded server stores of it.
        let built: Value = serde_json::from_str(&embedded.ok(&client_side).await).unwrap();
        embedded.ok(&create).await;
        let stored = normalize(
            serde_json::from_str(&embedded.ok(&get).await).unwrap(),
            node_port,
        );
        let mut diffs = Vec::new();
        differences("", &normalize(built, node_port), &stored, &mut diffs);
        for (path, sent, kept) in diffs {
            // The server adds its own (a namespace's status); it keeps all
            // it was sent, but for an empty status.
            let empty_status = path == "status" && hollow(&sent);
            if !sent.is_null() && !empty_status {
                problems.push(format!(
                    "{resource}/{name}: {path}: sent {sent}, stored {kept}"
                ));
            }
        }
        let Some(real) = &real else { continue };
        // Failures on the real server are collected, not panicked on, so
        // that what this run made there is deleted below.
        let made = real.run(&create).await;
        let read = real.run(&get).await;
        let Ok(theirs) = serde_json::from_str::<Value>(&read.stdout) else {
            problems.push(format!(
                "{resource}/{name} on the real server: {}{}",
                made.stderr, read.stderr
            ));
            continue;
        };
        let theirs = normalize(theirs, node_port);
        let mut diffs = Vec::new();
        differences("", &stored, &theirs, &mut diffs);
        for (path, ours, real_value) in diffs {
            let key = format!("{resource} {}", without_indexes(&path));
            let listed = |list: &[&str]| list.iter().any(|d| key.starts_with(d));
            if (ours.is_null() && listed(DEFAULTED_BY_THE_REAL_SERVER))
                || (real_value.is_null() && listed(VERSION_DIFFERENCES))
                || (path == "status" && hollow(&ours) && hollow(&real_value))
            {
                defaulted.insert(key);
                continue;
            }
            problems.push(format!(
                "{resource}/{name}: {path}: embedded {ours}, real {real_value}"
            ));
        }
    }
    if let Some(real) = &real {
        let _ = real
            .run(&["delete", "namespace", &ns, "--wait=false"])
            .await;
        let _ = real.run(&["delete", "clusterrole", &cr, &agg]).await;
        let _ = real.run(&["delete", "clusterrolebinding", &crb]).await;
        eprintln!("known differences from the real server: {defaulted:#?}");
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// kubectl's move from client-side to server-side apply rewrites
/// managedFields with a JSON patch; the embedded server keeps what it
/// writes, as the real one does (managers `kubectl` and
/// `kubectl-last-applied`, both `Apply`, on kube-apiserver 1.20).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_then_server_side_apply_migrates_managed_fields() {
    let server = ApiServer::new();
    let http = server.serve_http().await.unwrap();
    let k = Kubectl::new(&http);
    let dir = http.kubeconfig().parent().unwrap().to_path_buf();
    let cm = |v: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: migrate\ndata:\n  mode: {v}\n")
    };
    let file = write(&dir, "cm.yaml", &cm("a"));
    k.ok(&["apply", "-f", &file]).await;
    write(&dir, "cm.yaml", &cm("b"));
    let out = k.ok(&["apply", "--server-side", "-f", &file]).await;
    assert_eq!(out.trim(), "configmap/migrate serverside-applied");
    let shown = k
        .ok(&[
            "get",
            "configmap",
            "migrate",
            "-o",
            "json",
            "--show-managed-fields",
        ])
        .await;
    let obj: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(obj["data"]["mode"], "b");
    let entries: Vec<(String, String, Value)> = obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or_default().to_string(),
                e["operation"].as_str().unwrap_or_default().to_string(),
                e["fieldsV1"].clone(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            (
                "kubectl".to_string(),
                "Apply".to_string(),
                serde_json::json!({"f:data": {"f:mode": {}}})
            ),
            (
                "kubectl-last-applied".to_string(),
                "Apply".to_string(),
                serde_json::json!({"f:metadata": {"f:annotations": {
                    "f:kubectl.kubernetes.io/last-applied-configuration": {}}}})
            ),
        ],
        "{shown}"
    );
}

/// What kubectl prints for writes the real server refuses: an annotation
/// key that is not a qualified name, a create in a namespace being
/// deleted, a custom resource breaking its schema's `format`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_writes_read_as_on_the_real_server() {
    let server = ApiServer::new();
    let http = server.serve_http().await.unwrap();
    let k = Kubectl::new(&http);
    let dir = http.kubeconfig().parent().unwrap().to_path_buf();
    let cm = write(
        &dir,
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n",
    );
    k.ok(&["apply", "-f", &cm]).await;
    let bad = k
        .run(&["annotate", "configmap", "settings", "bad key=x"])
        .await;
    assert_eq!(bad.code, 1);
    assert_eq!(
        bad.stderr.trim(),
        "The ConfigMap \"settings\" is invalid: metadata.annotations: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    );

    // A namespace held by a finalizer of its content stays terminating.
    let held = write(
        &dir,
        "held.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: leaving\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: leaving\n  finalizers: [example.com/hold]\n",
    );
    k.ok(&["apply", "-f", &held]).await;
    k.ok(&["delete", "namespace", "leaving", "--wait=false"])
        .await;
    let new = write(
        &dir,
        "new.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: leaving\n",
    );
    let refused = k.run(&["create", "-f", &new]).await;
    assert_eq!(refused.code, 1);
    assert_eq!(
        refused.stderr.trim(),
        format!(
            "Error from server (Forbidden): error when creating \"{new}\": configmaps \"x\" is forbidden: unable to create new content in namespace leaving because it is being terminated"
        )
    );

    let crd = write(
        &dir,
        "crd.yaml",
        &CRD.replace(
            "        x-kubernetes-preserve-unknown-fields: true\n",
            "        properties:\n          spec:\n            type: object\n            properties:\n              when:\n                type: string\n                format: date-time\n",
        ),
    );
    k.ok(&["apply", "-f", &crd]).await;
    within(30, async {
        while k.run(&["get", "widgets"]).await.code != 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    let cr = write(
        &dir,
        "w.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  when: yesterday\n",
    );
    let invalid = k.run(&["apply", "-f", &cr]).await;
    assert_eq!(invalid.code, 1);
    assert!(
        invalid.stderr.contains(
            "The Widget \"w1\" is invalid: spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\""
        ),
        "{}",
        invalid.stderr
    );
}

/// A CRD with two served versions and descriptions, for `kubectl explain`.
const GIZMO_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: A Gizmo is a test kind.
        properties:
          spec:
            type: object
            description: The desired gizmo.
            required: [color]
            properties:
              color: {type: string, description: The gizmo's color., enum: [red, blue]}
              size: {type: integer, description: How big the gizmo is.}
              parts:
                type: array
                description: The gizmo's parts.
                items:
                  type: object
                  properties:
                    name: {type: string, description: The part's name.}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              shade: {type: string, description: The v2 shade of the gizmo.}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_custom_and_builtin_kinds() {
    let dir = std::env::temp_dir().join(format!("fsm-apiserver-explain-{}", std::process::id()));
    let (mut server, k) = start_binary(&dir).await;
    k.ok(&["apply", "-f", &write(&dir, "crd.yaml", GIZMO_CRD)])
        .await;

    // The kind: its description and fields, with theirs.
    let out = k.ok(&["explain", "gizmo"]).await;
    for text in [
        "KIND:       Gizmo",
        "VERSION:    v1",
        "A Gizmo is a test kind.",
        "metadata\t<ObjectMeta>",
        "Standard object's metadata.",
        "spec\t<Object>",
        "The desired gizmo.",
    ] {
        assert!(out.contains(text), "{text:?} not in:\n{out}");
    }
    // A nested field, and a subtree.
    let out = k.ok(&["explain", "gizmo.spec.color"]).await;
    assert!(out.contains("FIELD: color <string>"), "{out}");
    assert!(out.contains("The gizmo's color."), "{out}");
    assert!(out.contains("red"), "{out}");
    let out = k.ok(&["explain", "gizmo.spec.parts.name"]).await;
    assert!(out.contains("The part's name."), "{out}");
    let out = k.ok(&["explain", "gizmo.spec", "--recursive"]).await;
    for text in [
        "color\t<string> -required-",
        "size\t<integer>",
        "parts\t<[]Object>",
        "name\t<string>",
    ] {
        assert!(out.contains(text), "{text:?} not in:\n{out}");
    }
    // The other version.
    let out = k
        .ok(&["explain", "gizmo.spec", "--api-version=example.com/v2"])
        .await;
    assert!(out.contains("VERSION:    v2"), "{out}");
    assert!(out.contains("shade\t<string>"), "{out}");
    assert!(out.contains("The v2 shade of the gizmo."), "{out}");
    assert!(!out.contains("color"), "{out}");

    // Built-in kinds, with the real descriptions.
    let out = k.ok(&["explain", "deployment.spec.replicas"]).await;
    assert!(out.contains("GROUP:      apps"), "{out}");
    assert!(out.contains("FIELD: replicas <integer>"), "{out}");
    assert!(out.contains("Number of desired pods."), "{out}");
    let out = k.ok(&["explain", "configmap"]).await;
    assert!(
        out.contains("ConfigMap holds configuration data for pods to consume."),
        "{out}"
    );
    assert!(out.contains("data\t<map[string]string>"), "{out}");
    let out = k.ok(&["explain", "pod.spec.containers.image"]).await;
    assert!(out.contains("Container image name."), "{out}");
    server.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_sees_a_changed_crd_schema() {
    let server = ApiServer::new();
    let http = server.serve_http().await.unwrap();
    let k = Kubectl::new(&http);
    let dir = http.kubeconfig().parent().unwrap().to_path_buf();
    k.ok(&["apply", "-f", &write(&dir, "crd.yaml", GIZMO_CRD)])
        .await;
    let out = k.ok(&["explain", "gizmo.spec"]).await;
    assert!(out.contains("How big the gizmo is."), "{out}");
    assert!(!out.contains("weight"), "{out}");
    // A new field and a new description: kubectl, with its cache, sees both.
    let changed = GIZMO_CRD.replace(
        "              size: {type: integer, description: How big the gizmo is.}\n",
        "              size: {type: integer, description: The gizmo's size in cm.}\n              weight: {type: number, description: How heavy.}\n",
    );
    k.ok(&["apply", "-f", &write(&dir, "crd.yaml", &changed)])
        .await;
    let out = k.ok(&["explain", "gizmo.spec"]).await;
    assert!(out.contains("The gizmo's size in cm."), "{out}");
    assert!(out.contains("weight\t<number>"), "{out}");
    assert!(!out.contains("How big the gizmo is."), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_validate_strict_refuses_unknown_fields() {
    let server = ApiServer::new();
    let http = server.serve_http().await.unwrap();
    let k = Kubectl::new(&http);
    let dir = http.kubeconfig().parent().unwrap().to_path_buf();
    k.ok(&["apply", "-f", &write(&dir, "crd.yaml", GIZMO_CRD)])
        .await;
    let gizmo = write(
        &dir,
        "gizmo.yaml",
        "apiVersion: example.com/v1\nkind: Gizmo\nmetadata: {name: g1, namespace: default}\nspec: {color: red, colour: blue}\n",
    );
    let cm = write(
        &dir,
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1, namespace: default}\ndata: {a: b}\ndatta: {c: d}\n",
    );
    for validate in ["--validate=strict", "--validate=true"] {
        let out = k.run(&["apply", validate, "-f", &gizmo]).await;
        assert_ne!(out.code, 0, "{}", out.stdout);
        assert!(
            out.stderr.contains(
                r#"Gizmo in version "v1" cannot be handled as a Gizmo: strict decoding error: unknown field "spec.colour""#
            ),
            "{}",
            out.stderr
        );
        let out = k.run(&["apply", validate, "-f", &cm]).await;
        assert_ne!(out.code, 0, "{}", out.stdout);
        assert!(
            out.stderr
                .contains(r#"strict decoding error: unknown field "datta""#),
            "{}",
            out.stderr
        );
    }
    // Nothing was created.
    let out = k.run(&["get", "gizmo", "g1"]).await;
    assert!(
        out.stderr.contains("NotFound") || out.stderr.contains("not found"),
        "{}",
        out.stderr
    );
    // Warn: created, with a warning; the unknown field is dropped.
    let out = k.run(&["apply", "--validate=warn", "-f", &gizmo]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains(r#"Warning: unknown field "spec.colour""#),
        "{}",
        out.stderr
    );
    let spec = k
        .ok(&["get", "gizmo", "g1", "-o", "jsonpath={.spec}"])
        .await;
    assert_eq!(
        serde_json::from_str::<Value>(&spec).unwrap(),
        serde_json::json!({"color": "red"})
    );
    // A mistyped field of a custom resource: the schema's 422.
    let mistyped = write(
        &dir,
        "mistyped.yaml",
        "apiVersion: example.com/v1\nkind: Gizmo\nmetadata: {name: g2, namespace: default}\nspec: {color: red, size: big}\n",
    );
    let out = k
        .run(&["apply", "--validate=strict", "-f", &mistyped])
        .await;
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("spec.size: Invalid value"),
        "{}",
        out.stderr
    );

    // An existing object: apply sends a strategic merge patch, checked too.
    let good = write(
        &dir,
        "good.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1, namespace: default}\ndata: {a: b}\n",
    );
    k.ok(&["apply", "-f", &good]).await;
    let out = k.run(&["apply", "--validate=strict", "-f", &cm]).await;
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stderr
            .contains(r#"strict decoding error: unknown field "datta""#),
        "{}",
        out.stderr
    );
    let out = k
        .run(&[
            "patch",
            "configmap",
            "c1",
            "--type",
            "merge",
            "-p",
            r#"{"datta":{"x":"y"}}"#,
        ])
        .await;
    // kubectl patch sends no fieldValidation: the server's default, Warn.
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(r#"Warning: unknown field "datta""#),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout.trim(), "configmap/c1 patched (no change)");
    // Without validation the field is dropped, as the real server drops it.
    k.ok(&["apply", "--validate=false", "-f", &cm]).await;
    let data = k.ok(&["get", "configmap", "c1", "-o", "json"]).await;
    let data: Value = serde_json::from_str(&data).unwrap();
    assert!(data.get("datta").is_none(), "{data}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_v2_is_json_and_refuses_protobuf_only() {
    let server = ApiServer::new();
    let http = server.serve_http().await.unwrap();
    let k = Kubectl::new(&http);
    let out = k.ok(&["get", "--raw", "/openapi/v2"]).await;
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["swagger"], "2.0");
    assert_eq!(
        doc["definitions"]["io.k8s.api.core.v1.ConfigMap"]["x-kubernetes-group-version-kind"],
        serde_json::json!([{"group": "", "kind": "ConfigMap", "version": "v1"}])
    );
    // client-go asks for protobuf only: the real server's 406, empty.
    let request = http::Request::get("/openapi/v2")
        .header(
            "accept",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        )
        .body(kube::client::Body::empty())
        .unwrap();
    let response = server.client().send(request).await.unwrap();
    assert_eq!(response.status(), 406);
    assert!(
        response
            .into_body()
            .collect_bytes()
            .await
            .unwrap()
            .is_empty()
    );
}

/// A ConfigMap named `name`, owned by `owner` (when given) through a
/// blocking reference, with `finalizers`.
fn owned_configmap(name: &str, owner: Option<(&str, &str)>, finalizers: &[&str]) -> String {
    let mut text = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n");
    if let Some((owner, uid)) = owner {
        text.push_str(&format!(
            "  ownerReferences:\n  - apiVersion: v1\n    kind: ConfigMap\n    name: {owner}\n    uid: {uid}\n    blockOwnerDeletion: true\n"
        ));
    }
    if !finalizers.is_empty() {
        text.push_str(&format!("  finalizers: [{}]\n", finalizers.join(", ")));
    }
    text
}

/// Polls `kubectl args` until its output satisfies `done`, for at most 10 s.
async fn eventually_kubectl(k: &Kubectl, args: &[&str], done: impl Fn(&Output) -> bool) {
    for _ in 0..100 {
        if done(&k.run(args).await) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last = k.run(args).await;
    panic!(
        "kubectl {args:?} never got there: {} / {}",
        last.stdout, last.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_cascade_and_server_dry_run_from_kubectl() {
    let server = ApiServer::new();
    let http = server.serve_http().await.unwrap();
    let k = Kubectl::new(&http);
    let dir = http.kubeconfig().parent().unwrap().to_path_buf();
    let create = async |name: &str, owner: Option<(&str, &str)>, finalizers: &[&str]| {
        let file = write(
            &dir,
            &format!("{name}.yaml"),
            &owned_configmap(name, owner, finalizers),
        );
        k.ok(&["create", "-f", &file]).await;
        k.ok(&["get", "cm", name, "-o", "jsonpath={.metadata.uid}"])
            .await
    };

    // --cascade=orphan: the owner goes, the dependent stays without its
    // owner reference.
    let uid = create("owner", None, &[]).await;
    create("child", Some(("owner", &uid)), &[]).await;
    let out = k.ok(&["delete", "cm", "owner", "--cascade=orphan"]).await;
    assert_eq!(out.trim(), r#"configmap "owner" deleted"#);
    eventually_kubectl(&k, &["get", "cm", "owner"], |o| o.code != 0).await;
    let refs = k
        .ok(&[
            "get",
            "cm",
            "child",
            "-o",
            "jsonpath={.metadata.ownerReferences}",
        ])
        .await;
    assert_eq!(refs, "", "the orphan keeps no reference to its owner");

    // --dry-run=server: answered as deleted, nothing changes, even for an
    // object a finalizer holds.
    let out = k.ok(&["delete", "cm", "child", "--dry-run=server"]).await;
    assert_eq!(out.trim(), r#"configmap "child" deleted (server dry run)"#);
    k.ok(&["get", "cm", "child"]).await;
    create("held", None, &["example.com/hold"]).await;
    let out = k
        .ok(&[
            "delete",
            "cm",
            "held",
            "--dry-run=server",
            "--cascade=foreground",
        ])
        .await;
    assert_eq!(out.trim(), r#"configmap "held" deleted (server dry run)"#);
    let held = k.ok(&["get", "cm", "held", "-o", "json"]).await;
    let held: Value = serde_json::from_str(&held).unwrap();
    assert!(
        held["metadata"].get("deletionTimestamp").is_none(),
        "{held}"
    );
    assert_eq!(
        held["metadata"]["finalizers"],
        serde_json::json!(["example.com/hold"])
    );

    // --cascade=foreground: the owner waits, with the foregroundDeletion
    // finalizer, until its blocking dependent is gone.
    let uid = create("boss", None, &[]).await;
    create("worker", Some(("boss", &uid)), &["example.com/hold"]).await;
    k.ok(&[
        "delete",
        "cm",
        "boss",
        "--cascade=foreground",
        "--wait=false",
    ])
    .await;
    let finalizers = k
        .ok(&["get", "cm", "boss", "-o", "jsonpath={.metadata.finalizers}"])
        .await;
    assert_eq!(finalizers, r#"["foregroundDeletion"]"#);
    let worker = k
        .ok(&[
            "get",
            "cm",
            "worker",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .await;
    assert!(!worker.is_empty(), "the dependent is being deleted");
    k.ok(&[
        "patch",
        "cm",
        "worker",
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ])
    .await;
    eventually_kubectl(&k, &["get", "cm", "boss"], |o| o.code != 0).await;
    eventually_kubectl(&k, &["get", "cm", "worker"], |o| o.code != 0).await;

    // An unknown --cascade value never reaches the server; a bad policy
    // sent as a query parameter is refused as the real server does.
    k.ok(&[
        "delete",
        "cm",
        "held",
        "--dry-run=server",
        "--cascade=background",
    ])
    .await;
    let out = k
        .run(&[
            "delete",
            "--raw",
            "/api/v1/namespaces/default/configmaps/held?propagationPolicy=Bogus",
        ])
        .await;
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("Unsupported value: \"Bogus\""),
        "{}",
        out.stderr
    );
    k.ok(&["get", "cm", "held"]).await;
    k.ok(&[
        "patch",
        "cm",
        "held",
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ])
    .await;
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
