//! `manifests`: the deploy manifests parse back as the objects a cluster
//! needs, consistent with each other (the binding names the printed roles
//! and the ServiceAccount the pods run as, the budget selects the pods, the
//! container's arguments are a `run` command line the operator accepts),
//! and `kubectl` applies them: to the embedded API server for real
//! (server-side apply), and to the real kube-apiserver named by
//! `FSM_REAL_APISERVER_KUBECONFIG` as a server-side dry run, with the
//! `policy/v1beta1` budget its version (1.20) serves.

use crate::common;

use std::process::Stdio;

use clap::Parser;
use common::*;
use fsm_kube::cli::{Cli, Command, ManifestsArgs, Operator, PdbApiVersion, Rule, StoreKind};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::Api;
use serde::Deserialize;
use serde_yaml_ng::Value;

fn operator() -> Operator<WidgetState> {
    Operator::new("widget-operator", StoreKind::ConfigMap).rule(Rule::new(
        "apps",
        "deployments",
        ["get", "list", "watch", "create", "patch"],
    ))
}

fn manifests_args(args: &[&str]) -> ManifestsArgs {
    let line = ["widget-operator", "manifests"].iter().chain(args);
    match operator().parse_from(line).unwrap().command {
        Command::Manifests(args) => args,
        other => panic!("{other:?}"),
    }
}

fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|document| Value::deserialize(document).unwrap())
        .collect()
}

fn kind_and_name(document: &Value) -> (String, String) {
    let kind = document["kind"].as_str().unwrap().to_owned();
    let name = document["metadata"]["name"].as_str().unwrap().to_owned();
    (kind, name)
}

#[test]
fn the_flags_have_defaults_but_the_image_and_namespace() {
    let args = manifests_args(&["--image", "example.io/w:1", "-n", "ops"]);
    assert_eq!(args.replicas, 2);
    assert_eq!(args.http_port, 8080);
    assert_eq!(args.pdb_api_version, PdbApiVersion::V1);
    assert_eq!(args.watch_namespace, None);
    let line = |args: &[&str]| {
        Cli::<()>::try_parse_from(["widget-operator", "manifests"].iter().chain(args)).map(|_| ())
    };
    assert!(line(&["-n", "ops"]).is_err(), "--image is required");
    assert!(line(&["--image", "i"]).is_err(), "--namespace is required");
    assert!(line(&["--image", "i", "-n", "ops", "--replicas", "0"]).is_err());
    let old = manifests_args(&[
        "--image",
        "i",
        "-n",
        "ops",
        "--metrics-port",
        "9090",
        "--pdb-api-version",
        "policy/v1beta1",
        "--arg",
        "--cloud-url=http://cloud",
    ]);
    assert_eq!(old.http_port, 9090);
    assert_eq!(old.pdb_api_version, PdbApiVersion::V1beta1);
    assert_eq!(old.run_args, ["--cloud-url=http://cloud"]);
}

/// `--view-port` starts the web view in the pods and grants what it
/// reads: the same roles as `rbac --view`.
#[test]
fn a_view_port_gets_the_view_and_the_roles_rbac_view_prints() {
    let yaml = operator()
        .manifests(&manifests_args(&[
            "--image",
            "example.io/w:1",
            "-n",
            "ops",
            "--view-port",
            "8090",
        ]))
        .unwrap();
    let documents = documents(&yaml);
    let rbac = operator()
        .rbac(&fsm_kube::cli::RbacArgs {
            leader_elect: true,
            lease_namespace: Some("ops".into()),
            view: true,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(documents[2..4], self::documents(&rbac)[..]);
    let rules = serde_json::to_string(&documents[2]["rules"]).unwrap();
    assert!(rules.contains(r#""apiGroups":["events.k8s.io"],"resources":["events"],"verbs":["list","create","patch"]"#), "{rules}");
    let deployment: Deployment = serde_yaml_ng::from_value(documents[6].clone()).unwrap();
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    let container = &pod.containers[0];
    let args = container.args.clone().unwrap_or_default();
    // On the pod's loopback: `kubectl port-forward` reaches it, nothing
    // else does (no container port, no Service).
    let at = args.iter().position(|a| a == "--view-addr").unwrap();
    assert_eq!(args[at + 1], "127.0.0.1:8090");
    let ports = container.ports.clone().unwrap_or_default();
    assert!(ports.iter().all(|p| p.name.as_deref() != Some("view")));
    assert_eq!(documents.len(), 8, "{yaml}");
}

/// `--view-expose` listens on every interface, and adds the view's
/// Service and a NetworkPolicy admitting only the labelled clients to it.
#[test]
fn an_exposed_view_gets_a_service_and_a_network_policy() {
    let yaml = operator()
        .manifests(&manifests_args(&[
            "--image",
            "example.io/w:1",
            "-n",
            "ops",
            "--view-port",
            "8090",
            "--view-expose",
            "--view-allowed-host",
            "fsm.example.io",
        ]))
        .unwrap();
    let documents = documents(&yaml);
    let kinds: Vec<(String, String)> = documents.iter().map(kind_and_name).collect();
    // The view checks bearer tokens: a ClusterRole to review them, bound
    // to the operator, after its other roles.
    let owned = |kind: &str, name: &str| (kind.to_owned(), name.to_owned());
    assert_eq!(
        kinds[4..8],
        [
            owned("ClusterRole", "widget-operator-view-access"),
            owned("ClusterRoleBinding", "widget-operator"),
            owned("RoleBinding", "widget-operator-leader-election"),
            owned("ClusterRoleBinding", "widget-operator-view-access"),
        ]
    );
    assert_eq!(
        kinds[10..],
        [
            owned("Service", "widget-operator-view"),
            owned("NetworkPolicy", "widget-operator-view"),
        ]
    );
    let deployment: Deployment = serde_yaml_ng::from_value(documents[8].clone()).unwrap();
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    let container = &pod.containers[0];
    let args = container.args.clone().unwrap_or_default();
    let at = args.iter().position(|a| a == "--view-addr").unwrap();
    assert_eq!(args[at + 1], "0.0.0.0:8090");
    let at = args.iter().position(|a| a == "--view-auth").unwrap();
    assert_eq!(args[at + 1], "kubernetes");
    assert!(
        args.contains(&"widget-operator-view.ops.svc".to_owned()),
        "{args:?}"
    );
    assert!(args.contains(&"fsm.example.io".to_owned()), "{args:?}");
    assert!(
        container
            .ports
            .iter()
            .flatten()
            .any(|p| p.name.as_deref() == Some("view") && p.container_port == 8090)
    );
    let policy: k8s_openapi::api::networking::v1::NetworkPolicy =
        serde_yaml_ng::from_value(documents[11].clone()).unwrap();
    let spec = policy.spec.unwrap();
    assert_eq!(spec.policy_types, Some(vec!["Ingress".to_owned()]));
    let rules = spec.ingress.unwrap();
    let view = &rules[0];
    let from = view.from.as_ref().unwrap();
    assert_eq!(
        from[0]
            .pod_selector
            .as_ref()
            .unwrap()
            .match_labels
            .as_ref()
            .unwrap()[fsm_kube::cli::manifests::VIEW_CLIENT_LABEL],
        "widget-operator"
    );
    // Without --view-expose, no --view-allowed-host.
    let refused = Cli::<()>::try_parse_from([
        "op",
        "manifests",
        "--image",
        "i",
        "-n",
        "ops",
        "--view-expose",
    ]);
    assert!(refused.is_err(), "--view-expose without --view-port");
}

#[test]
fn the_manifests_are_everything_a_cluster_needs_in_order() {
    let yaml = operator()
        .manifests(&manifests_args(&["--image", "example.io/w:1", "-n", "ops"]))
        .unwrap();
    let documents = documents(&yaml);
    let kinds: Vec<_> = documents.iter().map(kind_and_name).collect();
    let expected = [
        ("CustomResourceDefinition", "widgets.test.operator-fsm.io"),
        ("ServiceAccount", "widget-operator"),
        ("ClusterRole", "widget-operator"),
        ("Role", "widget-operator-leader-election"),
        ("ClusterRoleBinding", "widget-operator"),
        ("RoleBinding", "widget-operator-leader-election"),
        ("Deployment", "widget-operator"),
        ("PodDisruptionBudget", "widget-operator"),
    ]
    .map(|(kind, name)| (kind.to_owned(), name.to_owned()));
    assert_eq!(kinds, expected);

    // The CRD is what `crd` prints: the machine published on it, which
    // `kubectl fsm` needs (seen missing on the real cluster, issue 37).
    let crd = operator().crd(&fsm_kube::cli::CrdArgs::default()).unwrap();
    assert_eq!(documents[0], self::documents(&crd)[0]);
    assert!(
        documents[0]["metadata"]["annotations"]["operator-fsm.io/machine"].is_string(),
        "{:?}",
        documents[0]["metadata"]
    );

    // The RBAC is `rbac`'s, with leader election in the operator's namespace.
    let rbac = operator()
        .rbac(&fsm_kube::cli::RbacArgs {
            leader_elect: true,
            lease_namespace: Some("ops".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(documents[2..4], self::documents(&rbac)[..]);

    // Each binding gives its role to the ServiceAccount the pods run as.
    let deployment: Deployment = serde_yaml_ng::from_value(documents[6].clone()).unwrap();
    let pod = deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("widget-operator"));
    let cluster_binding: ClusterRoleBinding =
        serde_yaml_ng::from_value(documents[4].clone()).unwrap();
    assert_eq!(
        (
            cluster_binding.role_ref.kind.as_str(),
            cluster_binding.role_ref.name.as_str()
        ),
        ("ClusterRole", "widget-operator")
    );
    let lease_binding: RoleBinding = serde_yaml_ng::from_value(documents[5].clone()).unwrap();
    assert_eq!(lease_binding.metadata.namespace.as_deref(), Some("ops"));
    assert_eq!(
        lease_binding.role_ref.name,
        "widget-operator-leader-election"
    );
    for subjects in [&cluster_binding.subjects, &lease_binding.subjects] {
        let subject = &subjects.as_ref().unwrap()[0];
        assert_eq!(
            (
                subject.kind.as_str(),
                subject.name.as_str(),
                subject.namespace.as_deref()
            ),
            ("ServiceAccount", "widget-operator", Some("ops"))
        );
    }
    let _: ServiceAccount = serde_yaml_ng::from_value(documents[1].clone()).unwrap();
    let _: ClusterRole = serde_yaml_ng::from_value(documents[2].clone()).unwrap();
    let _: Role = serde_yaml_ng::from_value(documents[3].clone()).unwrap();

    // The Deployment: two replicas, non-root, read-only, probes on the
    // health endpoints of the port it serves, requests set.
    let spec = deployment.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(2));
    let security = pod.security_context.as_ref().unwrap();
    assert_eq!(security.run_as_non_root, Some(true));
    assert_eq!(security.run_as_user, Some(65532));
    let container = &pod.containers[0];
    assert_eq!(container.image.as_deref(), Some("example.io/w:1"));
    let container_security = container.security_context.as_ref().unwrap();
    assert_eq!(container_security.read_only_root_filesystem, Some(true));
    assert_eq!(container_security.allow_privilege_escalation, Some(false));
    let port = &container.ports.as_ref().unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.container_port),
        (Some("http"), 8080)
    );
    let probe_path = |probe: &Option<k8s_openapi::api::core::v1::Probe>| {
        let get = probe.as_ref().unwrap().http_get.as_ref().unwrap();
        (get.path.clone().unwrap(), get.port.clone())
    };
    let http = k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("http".into());
    assert_eq!(
        probe_path(&container.liveness_probe),
        ("/healthz".into(), http.clone())
    );
    assert_eq!(
        probe_path(&container.readiness_probe),
        ("/readyz".into(), http)
    );
    let requests = container
        .resources
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap();
    assert!(requests.contains_key("cpu") && requests.contains_key("memory"));

    // Its arguments are a `run` the operator's own command line accepts:
    // leader election on, the HTTP endpoint on the probed port.
    let args = container.args.clone().unwrap();
    let run = match operator()
        .parse_from(std::iter::once("widget-operator".to_owned()).chain(args))
        .unwrap()
        .command
    {
        Command::Run(run) => run,
        other => panic!("{other:?}"),
    };
    assert!(run.leader.leader_elect);
    assert_eq!(run.http_addr, Some("0.0.0.0:8080".parse().unwrap()));
    let env: Vec<_> = container
        .env
        .iter()
        .flatten()
        .map(|e| e.name.as_str())
        .collect();
    assert!(
        env.contains(&"POD_NAME") && env.contains(&"POD_NAMESPACE"),
        "{env:?}"
    );

    // The budget selects exactly the Deployment's pods.
    let budget: PodDisruptionBudget = serde_yaml_ng::from_value(documents[7].clone()).unwrap();
    let budget = budget.spec.unwrap();
    assert_eq!(budget.selector.as_ref(), Some(&spec.selector));
    assert_eq!(
        spec.selector
            .match_labels
            .as_ref()
            .unwrap()
            .get("app.kubernetes.io/name"),
        spec.template
            .metadata
            .as_ref()
            .unwrap()
            .labels
            .as_ref()
            .unwrap()
            .get("app.kubernetes.io/name")
    );
}

#[test]
fn admission_by_webhook_adds_its_configuration_the_operators_user_and_the_webhook() {
    // The widgets' machine declares no rule: `auto` deploys no admission.
    let plain = operator()
        .manifests(&manifests_args(&["--image", "example.io/w:1", "-n", "ops"]))
        .unwrap();
    assert!(!plain.contains("ValidatingWebhookConfiguration"), "{plain}");
    assert!(!plain.contains("--webhook-addr"), "{plain}");

    let yaml = operator()
        .manifests(&manifests_args(&[
            "--image",
            "example.io/w:1",
            "-n",
            "ops",
            "--admission",
            "webhook",
        ]))
        .unwrap();
    let documents = documents(&yaml);
    let find = |kind: &str| {
        documents
            .iter()
            .find(|d| d["kind"].as_str() == Some(kind))
            .unwrap_or_else(|| panic!("no {kind} in\n{yaml}"))
    };
    let configuration = find("ValidatingWebhookConfiguration");
    let webhook = &configuration["webhooks"][0];
    assert_eq!(
        webhook["clientConfig"]["service"]["name"].as_str(),
        Some("widget-operator-webhook")
    );
    assert_eq!(
        webhook["clientConfig"]["service"]["path"].as_str(),
        Some("/validate")
    );
    assert_eq!(webhook["failurePolicy"].as_str(), Some("Fail"));
    let secret = find("Secret");
    let bundle = webhook["clientConfig"]["caBundle"].as_str().unwrap_or("");
    assert!(!bundle.is_empty(), "{yaml}");
    assert!(secret["stringData"]["ca.crt"].as_str().is_some());
    // The CRD has one version: no conversion.
    let crd = find("CustomResourceDefinition");
    assert!(crd["spec"]["conversion"].is_null(), "{yaml}");
    let deployment = find("Deployment");
    let args: Vec<&str> = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let at = args.iter().position(|a| *a == "--operator-user").unwrap();
    assert_eq!(args[at + 1], "system:serviceaccount:ops:widget-operator");
    assert!(args.contains(&"--webhook-addr"));
    // The arguments are a `run` line the operator accepts.
    let line = std::iter::once("widget-operator").chain(args.iter().copied());
    assert!(matches!(
        operator().parse_from(line).unwrap().command,
        Command::Run(_)
    ));
}

#[test]
fn admission_by_cel_needs_the_status_store() {
    let error = operator()
        .manifests(&manifests_args(&[
            "--image",
            "example.io/w:1",
            "-n",
            "ops",
            "--admission",
            "cel",
        ]))
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("--admission cel reads the state from .status.fsm")
    );
    let status = Operator::<WidgetState>::new("widget-operator", StoreKind::Status);
    let line = [
        "widget-operator",
        "manifests",
        "--image",
        "example.io/w:1",
        "-n",
        "ops",
        "--admission",
        "cel",
    ];
    let Command::Manifests(args) = status.parse_from(line).unwrap().command else {
        panic!("not manifests");
    };
    let yaml = status.manifests(&args).unwrap();
    let documents = documents(&yaml);
    let kinds: Vec<&str> = documents
        .iter()
        .filter_map(|d| d["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"ValidatingAdmissionPolicy"), "{kinds:?}");
    assert!(
        kinds.contains(&"ValidatingAdmissionPolicyBinding"),
        "{kinds:?}"
    );
    assert!(
        !kinds.contains(&"ValidatingWebhookConfiguration"),
        "{kinds:?}"
    );
    let policy = documents
        .iter()
        .find(|d| d["kind"].as_str() == Some("ValidatingAdmissionPolicy"))
        .unwrap();
    let expressions: Vec<&str> = policy["spec"]["validations"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|v| v["expression"].as_str())
        .collect();
    assert!(
        expressions[0].contains("'system:serviceaccount:ops:widget-operator'"),
        "{expressions:?}"
    );
}

#[test]
fn watching_one_namespace_grants_a_role_there_and_runs_there() {
    let yaml = operator()
        .manifests(&manifests_args(&[
            "--image",
            "i",
            "-n",
            "ops",
            "--watch-namespace",
            "shop",
        ]))
        .unwrap();
    let documents = documents(&yaml);
    let role = documents
        .iter()
        .find(|d| kind_and_name(d) == ("Role".into(), "widget-operator".into()))
        .expect("a Role instead of the ClusterRole");
    assert_eq!(role["metadata"]["namespace"].as_str(), Some("shop"));
    let binding = documents
        .iter()
        .find(|d| kind_and_name(d) == ("RoleBinding".into(), "widget-operator".into()))
        .expect("bound by a RoleBinding");
    assert_eq!(binding["metadata"]["namespace"].as_str(), Some("shop"));
    assert!(!documents.iter().any(|d| d["kind"] == "ClusterRole"));
    let args = &documents
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .unwrap()["spec"]["template"]["spec"]["containers"][0]["args"];
    let args: Vec<&str> = args
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        args.windows(2).any(|w| w == ["--namespace", "shop"]),
        "{args:?}"
    );
}

/// Runs `kubectl --kubeconfig K ARGS` with `stdin`; its status and output.
async fn kubectl(kubeconfig: &str, args: &[&str], stdin: &str) -> (bool, String) {
    let mut command = std::process::Command::new("kubectl");
    command.arg("--kubeconfig").arg(kubeconfig).args(args);
    let stdin = stdin.to_owned();
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl is installed");
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.as_bytes()).unwrap();
        drop(input);
        let output = child.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_the_manifests() {
    let env = env().await;
    match (env.embedded(), env.cluster.kubeconfig()) {
        (Some(server), _) => {
            let http = server.serve_http().await.unwrap();
            let kubeconfig = http.kubeconfig().to_str().unwrap().to_owned();
            let yaml = operator()
                .manifests(&manifests_args(&[
                    "--image",
                    "example.io/w:1",
                    "-n",
                    &env.ns,
                ]))
                .unwrap();
            let exposed = operator()
                .manifests(&manifests_args(&[
                    "--image",
                    "example.io/w:1",
                    "-n",
                    &env.ns,
                    "--view-port",
                    "8090",
                    "--view-expose",
                ]))
                .unwrap();
            // The CRD is there already (created by the test's setup, not by
            // an apply): take its fields over.
            let (ok, out) = kubectl(
                &kubeconfig,
                &["apply", "--server-side", "--force-conflicts", "-f", "-"],
                &yaml,
            )
            .await;
            assert!(ok, "{out}");
            assert_eq!(out.lines().count(), 8, "{out}");
            assert!(
                out.lines().all(|l| l.ends_with(" serverside-applied")),
                "{out}"
            );
            let deployment = Api::<Deployment>::namespaced(env.client.clone(), &env.ns)
                .get("widget-operator")
                .await
                .unwrap();
            assert_eq!(deployment.spec.unwrap().replicas, Some(2));
            Api::<PodDisruptionBudget>::namespaced(env.client.clone(), &env.ns)
                .get("widget-operator")
                .await
                .unwrap();
            Api::<ClusterRoleBinding>::all(env.client.clone())
                .get("widget-operator")
                .await
                .unwrap();
            let (ok, out) = kubectl(
                &kubeconfig,
                &["apply", "--server-side", "--force-conflicts", "-f", "-"],
                &exposed,
            )
            .await;
            assert!(ok, "{out}");
            assert_eq!(out.lines().count(), 12, "{out}");
            Api::<k8s_openapi::api::networking::v1::NetworkPolicy>::namespaced(
                env.client.clone(),
                &env.ns,
            )
            .get("widget-operator-view")
            .await
            .unwrap();
        }
        (None, Some(kubeconfig)) => {
            // kube-apiserver 1.20 serves PodDisruptionBudgets as
            // policy/v1beta1 only (policy/v1 came with 1.21).
            let yaml = operator()
                .manifests(&manifests_args(&[
                    "--image",
                    "example.io/w:1",
                    "-n",
                    &env.ns,
                    "--pdb-api-version",
                    "policy/v1beta1",
                ]))
                .unwrap();
            let (ok, out) = kubectl(
                kubeconfig.to_str().unwrap(),
                &["apply", "--dry-run=server", "-f", "-"],
                &yaml,
            )
            .await;
            assert!(ok, "{out}");
            assert_eq!(
                out.lines()
                    .filter(|l| l.ends_with("(server dry run)"))
                    .count(),
                8,
                "{out}"
            );
            let exposed = operator()
                .manifests(&manifests_args(&[
                    "--image",
                    "example.io/w:1",
                    "-n",
                    &env.ns,
                    "--pdb-api-version",
                    "policy/v1beta1",
                    "--view-port",
                    "8090",
                    "--view-expose",
                ]))
                .unwrap();
            let (ok, out) = kubectl(
                kubeconfig.to_str().unwrap(),
                &["apply", "--dry-run=server", "-f", "-"],
                &exposed,
            )
            .await;
            assert!(ok, "{out}");
            assert_eq!(
                out.lines()
                    .filter(|l| l.ends_with("(server dry run)"))
                    .count(),
                12,
                "{out}"
            );
        }
        (None, None) => panic!("a real cluster without a kubeconfig"),
    }
}
