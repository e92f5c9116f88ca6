//! The operator CLI: parsing of every subcommand, the RBAC it derives, the
//! CRD and diagram it prints, and `status` and `run` against the embedded
//! API server, or the real kube-apiserver named by
//! `FSM_REAL_APISERVER_KUBECONFIG`.

use crate::common;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use common::*;
use fsm_kube::ReconcilerOptions;
use fsm_kube::cli::rbac::{self, OperatorDescription, RbacObject, RbacScope};
use fsm_kube::cli::{
    Cli, Command, ConnectArgs, CrdArgs, DiagramArgs, DiagramFormat, Error, LeaderArgs, Operator,
    OutputFormat, PreflightArgs, RbacArgs, Rule, RunArgs, RunContext, RunOutcome, StatusArgs,
    StoreKind,
};
use fsm_kube::fsm_core::{BoxFuture, Fsm, HistoryEntry, RawRecord, StateRecord, Timestamp};
use fsm_kube::records::{PublishedMachine, ReadError, ResourceInfo, record_view};
use fsm_kube::store::{legacy_record_object_name, record_object_name_for};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::{Controller, watcher};
use kube::{CustomResourceExt, Resource};

fn parse(args: &[&str]) -> Command {
    Cli::try_parse_from(std::iter::once("widget-operator").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
        .command
}

/// A `run` function for subcommands that never run.
fn no_run(_: RunContext<WidgetState>) -> std::future::Ready<()> {
    std::future::ready(())
}

fn operator(store: StoreKind) -> Operator<WidgetState> {
    Operator::new("widget-operator", store)
}

async fn execute<A, R, Fut>(
    op: &Operator<WidgetState, A>,
    command: Command<A>,
    run: R,
) -> Result<String, Error>
where
    A: clap::Args + Clone + Send + Sync + 'static,
    R: FnMut(RunContext<WidgetState, A>) -> Fut + Send + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: RunOutcome,
{
    let mut out = Vec::new();
    op.execute(command, run, &mut out).await?;
    Ok(String::from_utf8(out).unwrap())
}

// ---------------------------------------------------------------- parsing

#[test]
fn run_parses_every_flag() {
    let command = parse(&[
        "run",
        "--kubeconfig",
        "/tmp/kc",
        "--context",
        "kind",
        "--namespace",
        "shop",
        "--metrics-addr",
        "0.0.0.0:9090",
        "--view-addr",
        "127.0.0.1:8091",
        "--leader-elect",
        "--lease-name",
        "widgets",
        "--lease-namespace",
        "ops",
        "--identity",
        "pod-1",
        "--lease-duration",
        "30",
    ]);
    assert_eq!(
        command,
        Command::Run(RunArgs {
            connect: ConnectArgs {
                kubeconfig: Some("/tmp/kc".into()),
                context: Some("kind".into()),
            },
            namespace: Some("shop".into()),
            http_addr: Some("0.0.0.0:9090".parse().unwrap()),
            view_addr: Some("127.0.0.1:8091".parse().unwrap()),
            view_guard: fsm_kube::cli::ViewGuardArgs::default(),
            leader: LeaderArgs {
                leader_elect: true,
                lease_name: Some("widgets".into()),
                lease_namespace: Some("ops".into()),
                identity: Some("pod-1".into()),
                lease_duration: 30,
            },
            shard: fsm_kube::cli::ShardArgs::default(),
            webhook: fsm_kube::cli::WebhookArgs::default(),
            operator: (),
        })
    );
}

#[test]
fn the_view_alone_binds_to_loopback() {
    let Command::Run(args) = parse(&["run", "--view-addr"]) else {
        panic!("not run");
    };
    assert_eq!(args.view_addr, Some("127.0.0.1:8090".parse().unwrap()));
    assert_eq!(args.view_guard, fsm_kube::cli::ViewGuardArgs::default());
    assert!(args.view_guard.allowed_hosts.is_empty());
    assert_eq!(args.view_guard.limits().max_streams, 64);
}

#[test]
fn the_views_hosts_and_caps_are_flags() {
    let Command::Run(args) = parse(&[
        "run",
        "--view-addr",
        "0.0.0.0:8090",
        "--view-allowed-host",
        "fsm.example.io",
        "--view-allowed-host",
        "db-operator-view.ops.svc",
        "--view-max-streams",
        "8",
        "--view-max-requests",
        "4",
    ]) else {
        panic!("not run");
    };
    assert_eq!(
        args.view_guard.allowed_hosts,
        ["fsm.example.io", "db-operator-view.ops.svc"]
    );
    let limits = args.view_guard.limits();
    assert_eq!((limits.max_streams, limits.max_requests), (8, 4));
    assert!(limits.max_connections >= 12);
}

#[test]
fn run_defaults_to_all_namespaces_without_election_or_metrics() {
    let Command::Run(args) = parse(&["run"]) else {
        panic!("not run");
    };
    assert_eq!(args.connect, ConnectArgs::default());
    assert!(!args.leader.leader_elect);
    assert_eq!(args.leader.lease_duration, 15);
    // The environment may set these two (WATCH_NAMESPACE, METRICS_ADDR).
    assert_eq!(args.namespace, std::env::var("WATCH_NAMESPACE").ok());
    assert_eq!(
        args.http_addr,
        std::env::var("METRICS_ADDR")
            .ok()
            .map(|a| a.parse().unwrap())
    );
}

#[test]
fn crd_diagram_rbac_and_status_parse() {
    assert_eq!(parse(&["crd"]), Command::Crd(CrdArgs::default()));
    assert_eq!(
        parse(&["crd", "--printer-columns"]),
        Command::Crd(CrdArgs {
            printer_columns: true,
            ..CrdArgs::default()
        })
    );
    assert_eq!(
        parse(&["diagram"]),
        Command::Diagram(DiagramArgs {
            format: DiagramFormat::Mermaid
        })
    );
    assert_eq!(
        parse(&["diagram", "--format", "dot"]),
        Command::Diagram(DiagramArgs {
            format: DiagramFormat::Dot
        })
    );
    assert_eq!(
        parse(&["diagram", "-f", "svg"]),
        Command::Diagram(DiagramArgs {
            format: DiagramFormat::Svg
        })
    );
    assert_eq!(
        parse(&[
            "rbac",
            "-n",
            "shop",
            "--leader-elect",
            "--lease-namespace",
            "ops",
            "--name",
            "w"
        ]),
        Command::Rbac(RbacArgs {
            namespace: Some("shop".into()),
            leader_elect: true,
            shards: false,
            view: false,
            view_access: false,
            lease_namespace: Some("ops".into()),
            lease_name: None,
            name: Some("w".into()),
        })
    );
    assert_eq!(
        parse(&["status", "w1", "-n", "shop", "-o", "json"]),
        Command::Status(StatusArgs {
            name: "w1".into(),
            namespace: Some("shop".into()),
            output: OutputFormat::Json,
            connect: ConnectArgs::default(),
        })
    );
    assert_eq!(
        parse(&["preflight"]),
        Command::Preflight(PreflightArgs::default())
    );
    assert_eq!(
        parse(&["preflight", "-n", "shop", "-o", "json"]),
        Command::Preflight(PreflightArgs {
            namespace: Some("shop".into()),
            output: OutputFormat::Json,
            connect: ConnectArgs::default(),
        })
    );
}

#[test]
fn usage_errors_are_refused() {
    let parse_err = |args: &[&str]| {
        Cli::<()>::try_parse_from(std::iter::once("op").chain(args.iter().copied())).unwrap_err()
    };
    assert_eq!(
        parse_err(&["status"]).kind(),
        clap::error::ErrorKind::MissingRequiredArgument
    );
    assert_eq!(
        parse_err(&["diagram", "--format", "png"]).kind(),
        clap::error::ErrorKind::InvalidValue
    );
    assert_eq!(
        parse_err(&["run", "--metrics-addr", "nine"]).kind(),
        clap::error::ErrorKind::ValueValidation
    );
    assert_eq!(
        parse_err(&["deploy"]).kind(),
        clap::error::ErrorKind::InvalidSubcommand
    );
}

// ---------------------------------------------------------------- rbac

fn rule(group: &str, resource: &str, verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(vec![resource.to_owned()]),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

fn description(store: StoreKind, needs_finalizer: bool) -> OperatorDescription {
    OperatorDescription {
        name: "db-operator".into(),
        resource: ResourceInfo {
            group: "example.io".into(),
            version: "v1".into(),
            kind: "Database".into(),
            plural: "databases".into(),
            namespaced: true,
        },
        store,
        needs_finalizer,
        extra_rules: Vec::new(),
    }
}

const RECORD_VERBS: [&str; 5] = ["list", "watch", "create", "update", "delete"];

fn resource_rules() -> Vec<PolicyRule> {
    vec![
        rule("example.io", "databases", &["list", "watch", "patch"]),
        rule("example.io", "databases/status", &["patch"]),
    ]
}

fn finalizer_rule() -> PolicyRule {
    rule("example.io", "databases/finalizers", &["update"])
}

fn events_rule() -> PolicyRule {
    rule("events.k8s.io", "events", &["create", "patch"])
}

#[test]
fn the_status_store_needs_only_the_resource_and_events() {
    let mut expected = resource_rules();
    expected.push(events_rule());
    assert_eq!(
        rbac::rules(&description(StoreKind::Status, false)).unwrap(),
        expected
    );
}

#[test]
fn a_finalizer_adds_update_on_the_finalizers_subresource() {
    let mut expected = resource_rules();
    expected.push(finalizer_rule());
    expected.push(events_rule());
    assert_eq!(
        rbac::rules(&description(StoreKind::Status, true)).unwrap(),
        expected
    );
    assert_eq!(
        rbac::rules(&description(StoreKind::Ephemeral, true)).unwrap(),
        expected
    );
}

#[test]
fn the_ephemeral_store_needs_nothing_beyond_the_status_for_conditions() {
    let mut expected = resource_rules();
    expected.push(events_rule());
    assert_eq!(
        rbac::rules(&description(StoreKind::Ephemeral, false)).unwrap(),
        expected
    );
}

#[test]
fn object_stores_need_their_kind_and_the_owners_finalizers() {
    for (store, resource) in [
        (StoreKind::ConfigMap, "configmaps"),
        (StoreKind::Secret, "secrets"),
    ] {
        // Owned record objects set blockOwnerDeletion, which needs update
        // on the owner's finalizers, finalizer or not.
        let mut expected = resource_rules();
        expected.push(finalizer_rule());
        expected.push(rule("", resource, &RECORD_VERBS));
        expected.push(events_rule());
        for needs_finalizer in [false, true] {
            assert_eq!(
                rbac::rules(&description(store, needs_finalizer)).unwrap(),
                expected,
                "{store:?}, finalizer {needs_finalizer}"
            );
        }
    }
}

#[test]
fn declared_rules_come_after_and_merge() {
    let mut op = description(StoreKind::Secret, false);
    op.extra_rules = vec![
        Rule::new(
            "apps",
            "deployments",
            ["watch", "get", "list", "create", "patch"],
        ),
        Rule::new("", "secrets", ["patch"]),
    ];
    let mut expected = resource_rules();
    expected.push(finalizer_rule());
    expected.push(rule(
        "",
        "secrets",
        &["list", "watch", "create", "update", "patch", "delete"],
    ));
    expected.push(events_rule());
    expected.push(rule(
        "apps",
        "deployments",
        &["get", "list", "watch", "create", "patch"],
    ));
    assert_eq!(rbac::rules(&op).unwrap(), expected);
}

#[test]
fn leader_election_gets_a_role_of_its_own_in_the_lease_namespace() {
    let op = description(StoreKind::ConfigMap, true);
    let cluster = rbac::manifests(&op, &RbacScope::default()).unwrap();
    assert_eq!(cluster.len(), 1);
    assert!(matches!(cluster[0], RbacObject::ClusterRole(_)));
    assert_eq!(cluster[0].name(), "db-operator");

    let scoped = rbac::manifests(
        &op,
        &RbacScope {
            namespace: Some("shop".into()),
            lease_namespace: Some("ops".into()),
            lease_name: None,
        },
    )
    .unwrap();
    assert_eq!(scoped.len(), 2);
    let RbacObject::Role(main) = &scoped[0] else {
        panic!("a Role with --namespace: {scoped:?}");
    };
    assert_eq!(main.metadata.namespace.as_deref(), Some("shop"));
    assert_eq!(scoped[0].rules(), rbac::rules(&op).unwrap());
    let RbacObject::Role(lease) = &scoped[1] else {
        panic!("a Role for the lease: {scoped:?}");
    };
    assert_eq!(
        lease.metadata.name.as_deref(),
        Some("db-operator-leader-election")
    );
    assert_eq!(lease.metadata.namespace.as_deref(), Some("ops"));
    // Read and renewed: the operator's own Lease only; created: any, since
    // RBAC cannot name what a create makes.
    let named = |name: &str| PolicyRule {
        resource_names: Some(vec![name.to_owned()]),
        ..rule("coordination.k8s.io", "leases", &["get", "update"])
    };
    assert_eq!(
        lease.rules.as_deref().unwrap(),
        [
            rule("coordination.k8s.io", "leases", &["create"]),
            named("db-operator-leader"),
        ]
    );

    // `run --lease-name` elsewhere: `rbac --lease-name` names it.
    let renamed = rbac::manifests(
        &op,
        &RbacScope {
            namespace: None,
            lease_namespace: Some("ops".into()),
            lease_name: Some("db-lock".into()),
        },
    )
    .unwrap();
    assert_eq!(renamed[1].rules()[1], named("db-lock"));
}

#[tokio::test]
async fn rbac_prints_yaml_derived_from_the_machine() {
    // WidgetState has a cleanup, hence a finalizer.
    let op =
        operator(StoreKind::Status).rule(Rule::new("", "configmaps", ["get", "create", "delete"]));
    assert!(op.description().needs_finalizer);
    assert_eq!(
        op.description().resource,
        ResourceInfo {
            group: "test.operator-fsm.io".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
            namespaced: true,
        }
    );
    let yaml = execute(
        &op,
        parse(&["rbac", "--leader-elect", "--lease-namespace", "ops"]),
        no_run,
    )
    .await
    .unwrap();
    let documents: Vec<serde_json::Value> = yaml
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_yaml_ng::from_str(d).unwrap())
        .collect();
    assert_eq!(documents.len(), 2, "{yaml}");
    assert_eq!(documents[0]["kind"], "ClusterRole");
    assert_eq!(documents[0]["apiVersion"], "rbac.authorization.k8s.io/v1");
    assert_eq!(documents[0]["metadata"]["name"], "widget-operator");
    let rules: Vec<PolicyRule> = serde_json::from_value(documents[0]["rules"].clone()).unwrap();
    assert_eq!(
        rules,
        [
            rule(
                "test.operator-fsm.io",
                "widgets",
                &["list", "watch", "patch"]
            ),
            rule("test.operator-fsm.io", "widgets/status", &["patch"]),
            rule("test.operator-fsm.io", "widgets/finalizers", &["update"]),
            rule("events.k8s.io", "events", &["create", "patch"]),
            rule("", "configmaps", &["get", "create", "delete"]),
        ]
    );
    assert_eq!(documents[1]["kind"], "Role");
    assert_eq!(documents[1]["metadata"]["namespace"], "ops");
    assert!(!yaml.contains('*'), "no wildcard anywhere: {yaml}");

    let refused = operator(StoreKind::Status).rule(Rule::new("", "*", ["get"]));
    assert!(matches!(
        execute(&refused, Command::Rbac(RbacArgs::default()), no_run).await,
        Err(Error::InvalidRule(_))
    ));
}

// ---------------------------------------------------------------- crd, diagram

#[tokio::test]
async fn crd_yaml_parses_back_as_the_crd_with_the_machine_published() {
    let yaml = execute(
        &operator(StoreKind::ConfigMap),
        Command::Crd(CrdArgs::default()),
        no_run,
    )
    .await
    .unwrap();
    assert!(yaml.starts_with("---\n"), "{yaml}");
    let mut crd: CustomResourceDefinition = serde_yaml_ng::from_str(&yaml).unwrap();
    let published = PublishedMachine::from_crd(&crd).unwrap().unwrap();
    assert_eq!(
        published,
        PublishedMachine {
            store: StoreKind::ConfigMap,
            graph: WidgetState::machine().graph(),
        }
    );
    crd.metadata.annotations = None;
    assert_eq!(crd, Widget::crd());
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("widgets.test.operator-fsm.io")
    );
}

#[tokio::test]
async fn printer_columns_read_the_status_record() {
    let op = operator(StoreKind::Status);
    let yaml = execute(&op, parse(&["crd", "--printer-columns"]), no_run)
        .await
        .unwrap();
    let crd: CustomResourceDefinition = serde_yaml_ng::from_str(&yaml).unwrap();
    let columns: Vec<(String, String)> = crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.clone(), c.json_path.clone()))
        .collect();
    let expected = [
        ("State", ".status.fsm.state"),
        ("Attempt", ".status.fsm.attempt"),
        ("In-State", ".status.fsm.enteredAt"),
        ("Age", ".metadata.creationTimestamp"),
    ]
    .map(|(n, p)| (n.to_owned(), p.to_owned()));
    assert_eq!(columns, expected);
    let refused = execute(
        &operator(StoreKind::Secret),
        parse(&["crd", "--printer-columns"]),
        no_run,
    )
    .await;
    assert!(
        matches!(
            refused,
            Err(Error::PrinterColumnsNeedStatusStore(StoreKind::Secret))
        ),
        "{refused:?}"
    );
}

#[tokio::test]
async fn the_diagram_is_the_machines() {
    let op = operator(StoreKind::Status);
    let mermaid = execute(&op, parse(&["diagram"]), no_run).await.unwrap();
    assert_eq!(mermaid, WidgetState::mermaid());
    assert!(mermaid.contains("Pending --> Configuring"), "{mermaid}");
    let dot = execute(&op, parse(&["diagram", "--format", "dot"]), no_run)
        .await
        .unwrap();
    assert_eq!(dot, WidgetState::dot());
    let svg = execute(&op, parse(&["diagram", "--format", "svg"]), no_run)
        .await
        .unwrap();
    assert_eq!(svg, WidgetState::machine().graph().svg(None));
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(svg.contains(r#"data-state="Configuring""#), "{svg}");
}

// ---------------------------------------------------------------- status

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// A record in `Configuring` after two transitions and a failed attempt.
fn record() -> StateRecord {
    let mut record = StateRecord::new(
        &WidgetState::Configuring {
            config_map: "w1-config".into(),
        },
        t("2026-01-01T00:00:10Z"),
    )
    .unwrap();
    record.attempt = 2;
    record.next_attempt_at = Some(t("2026-01-01T00:01:40Z"));
    record.last_error = Some("connection refused".into());
    record.observed_generation = Some(1);
    record.transitions = 2;
    record.history = vec![
        HistoryEntry {
            seq: 1,
            from: None,
            to: "Pending".into(),
            at: t("2026-01-01T00:00:00Z"),
            reason: None,
        },
        HistoryEntry {
            seq: 2,
            from: Some("Pending".into()),
            to: "Configuring".into(),
            at: t("2026-01-01T00:00:10Z"),
            reason: None,
        },
    ];
    record
}

#[test]
fn the_text_shows_state_attempt_time_in_state_error_and_history() {
    let location = record_view::Location {
        kind: "Widget".into(),
        namespace: Some("default".into()),
        name: "w1".into(),
        record: ".status.fsm".into(),
    };
    let text = record_view::render_text(&location, &record(), t("2026-01-01T00:01:30Z"));
    assert_eq!(
        text,
        "Widget default/w1 (record in .status.fsm)
State:        Configuring {\"config_map\":\"w1-config\"}
Entered:      2026-01-01T00:00:10Z (1m20s ago)
Attempt:      2, next at 2026-01-01T00:01:40Z (in 10s)
Last error:   connection refused
Generation:   1
Transitions:  2
History:
  #1   2026-01-01T00:00:00Z  → Pending
  #2   2026-01-01T00:00:10Z  Pending → Configuring
"
    );
}

fn status_args(env: &Env, name: &str, output: OutputFormat) -> StatusArgs {
    StatusArgs {
        name: name.into(),
        namespace: Some(env.ns.clone()),
        output,
        connect: ConnectArgs::default(),
    }
}

fn spec() -> WidgetSpec {
    WidgetSpec::colored("blue")
}

/// A kubeconfig for `env`'s server: the real server's own, or one written
/// for the embedded server served over loopback HTTP (up while the
/// returned server lives).
async fn kubeconfig_of(env: &Env) -> (Option<fsm_testkit::HttpServer>, String) {
    match (env.embedded(), env.cluster.kubeconfig()) {
        (Some(server), _) => {
            let http = server.serve_http().await.unwrap();
            let path = http.kubeconfig().to_str().unwrap().to_owned();
            (Some(http), path)
        }
        (None, Some(path)) => (None, path.to_str().unwrap().to_owned()),
        (None, None) => panic!("a real cluster without a kubeconfig"),
    }
}

async fn put_status_record(env: &Env, name: &str, fsm: serde_json::Value) {
    let api: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "status": { "fsm": fsm } })),
    )
    .await
    .unwrap();
}

/// The metadata of a record object named `record_object` owned by widget
/// `owner`.
async fn owned_by(env: &Env, owner: &str, record_object: String) -> ObjectMeta {
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    let widget = widgets.get(owner).await.unwrap();
    ObjectMeta {
        name: Some(record_object),
        owner_references: Some(vec![widget.controller_owner_ref(&()).unwrap()]),
        ..ObjectMeta::default()
    }
}

async fn put_configmap_record_as(env: &Env, metadata: ObjectMeta, text: &str) {
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let cm = ConfigMap {
        metadata,
        data: Some(BTreeMap::from([("record".to_owned(), text.to_owned())])),
        ..ConfigMap::default()
    };
    api.create(&PostParams::default(), &cm).await.unwrap();
}

async fn put_configmap_record(env: &Env, name: &str, text: &str) {
    let metadata = owned_by(env, name, record_object_name_for::<WidgetState>(name)).await;
    put_configmap_record_as(env, metadata, text).await;
}

#[tokio::test]
async fn status_reads_the_status_store() {
    let env = env().await;
    let client = env.client.clone();
    let op = operator(StoreKind::Status);
    create_widget(&env, "w1", spec()).await;

    let missing = op
        .status(&client, &status_args(&env, "w1", OutputFormat::Text))
        .await;
    assert!(
        matches!(missing, Err(Error::Read(ReadError::NoRecord(_)))),
        "{missing:?}"
    );
    let absent = op
        .status(&client, &status_args(&env, "nope", OutputFormat::Text))
        .await;
    assert!(
        matches!(absent, Err(Error::Read(ReadError::NotFound(_)))),
        "{absent:?}"
    );

    put_status_record(&env, "w1", serde_json::to_value(record()).unwrap()).await;
    let text = op
        .status(&client, &status_args(&env, "w1", OutputFormat::Text))
        .await
        .unwrap();
    let ns = &env.ns;
    assert!(
        text.starts_with(&format!("Widget {ns}/w1 (record in .status.fsm)\nState:        Configuring {{\"config_map\":\"w1-config\"}}\nEntered:      2026-01-01T00:00:10Z (")),
        "{text}"
    );
    assert!(
        text.contains("Last error:   connection refused\n"),
        "{text}"
    );
    assert!(
        text.contains("  #2   2026-01-01T00:00:10Z  Pending → Configuring\n"),
        "{text}"
    );

    let json = op
        .status(&client, &status_args(&env, "w1", OutputFormat::Json))
        .await
        .unwrap();
    let read: StateRecord = serde_json::from_str(&json).unwrap();
    assert_eq!(read, record());
}

#[tokio::test]
async fn status_reads_the_configmap_store_through_the_command_line() {
    let env = env().await;
    let (_http, kubeconfig) = kubeconfig_of(&env).await;
    create_widget(&env, "w2", spec()).await;
    put_configmap_record(&env, "w2", &serde_json::to_string(&record()).unwrap()).await;

    let out = execute(
        &operator(StoreKind::ConfigMap),
        parse(&[
            "status",
            "w2",
            "--kubeconfig",
            &kubeconfig,
            "-n",
            &env.ns,
            "-o",
            "json",
        ]),
        no_run,
    )
    .await
    .unwrap();
    let read: StateRecord = serde_json::from_str(&out).unwrap();
    assert_eq!(read, record());

    let text = execute(
        &operator(StoreKind::ConfigMap),
        parse(&["status", "w2", "-n", &env.ns, "--kubeconfig", &kubeconfig]),
        no_run,
    )
    .await
    .unwrap();
    let ns = &env.ns;
    assert!(
        text.starts_with(&format!(
            "Widget {ns}/w2 (record in ConfigMap {ns}/{})\nState:        Configuring",
            record_object_name_for::<WidgetState>("w2")
        )),
        "{text}"
    );
}

#[tokio::test]
async fn status_reads_the_secret_store() {
    let env = env().await;
    let client = env.client.clone();
    create_widget(&env, "w3", spec()).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &env.ns);
    let secret = Secret {
        metadata: owned_by(&env, "w3", record_object_name_for::<WidgetState>("w3")).await,
        string_data: Some(BTreeMap::from([(
            "record".to_owned(),
            serde_json::to_string(&record()).unwrap(),
        )])),
        ..Secret::default()
    };
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let json = operator(StoreKind::Secret)
        .status(&client, &status_args(&env, "w3", OutputFormat::Json))
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<StateRecord>(&json).unwrap(),
        record()
    );

    // The ConfigMap store finds no record object for it.
    let none = operator(StoreKind::ConfigMap)
        .status(&client, &status_args(&env, "w3", OutputFormat::Text))
        .await;
    assert!(
        matches!(none, Err(Error::Read(ReadError::NoRecord(_)))),
        "{none:?}"
    );
}

#[tokio::test]
async fn status_reads_a_legacy_record_of_the_object_and_no_stale_one() {
    let env = env().await;
    let client = env.client.clone();
    let op = operator(StoreKind::ConfigMap);
    let ns = &env.ns;
    let text = serde_json::to_string(&record()).unwrap();

    // Written by an older release, under `<name>-fsm`: read there.
    create_widget(&env, "legacy", spec()).await;
    let metadata = owned_by(&env, "legacy", legacy_record_object_name("legacy")).await;
    put_configmap_record_as(&env, metadata, &text).await;
    let (_, location) = fsm_kube::records::record_view::fetch(
        &client,
        &ResourceInfo::of::<Widget>(),
        "WidgetState",
        StoreKind::ConfigMap,
        Some(ns),
        "legacy",
    )
    .await
    .unwrap();
    assert_eq!(location.record, format!("ConfigMap {ns}/legacy-fsm"));
    let json = op
        .status(&client, &status_args(&env, "legacy", OutputFormat::Json))
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<StateRecord>(&json).unwrap(),
        record()
    );

    // Records of another object of the same name (deleted, re-created),
    // under either name, are no record of this one.
    create_widget(&env, "reborn", spec()).await;
    let mut stale = owned_by(
        &env,
        "legacy",
        record_object_name_for::<WidgetState>("reborn"),
    )
    .await;
    stale.labels = Some(BTreeMap::from([(
        fsm_kube::store::OWNER_UID_LABEL.to_owned(),
        "0a1b2c3d-0000-0000-0000-000000000000".to_owned(),
    )]));
    stale.owner_references = None;
    put_configmap_record_as(&env, stale, &text).await;
    let stale_legacy = owned_by(&env, "legacy", legacy_record_object_name("reborn")).await;
    put_configmap_record_as(&env, stale_legacy, &text).await;
    let none = op
        .status(&client, &status_args(&env, "reborn", OutputFormat::Text))
        .await;
    assert!(
        matches!(none, Err(Error::Read(ReadError::NoRecord(_)))),
        "{none:?}"
    );
}

#[tokio::test]
async fn a_corrupt_record_is_an_error_naming_the_problem() {
    let env = env().await;
    let client = env.client.clone();

    create_widget(&env, "bad-json", spec()).await;
    put_configmap_record(&env, "bad-json", "{not json").await;
    let error = operator(StoreKind::ConfigMap)
        .status(&client, &status_args(&env, "bad-json", OutputFormat::Text))
        .await
        .unwrap_err();
    let Error::Read(ReadError::CorruptRecord {
        location,
        error: decode,
    }) = &error
    else {
        panic!("{error:?}");
    };
    let ns = &env.ns;
    let record_object = record_object_name_for::<WidgetState>("bad-json");
    assert_eq!(location.record, format!("ConfigMap {ns}/{record_object}"));
    assert!(
        matches!(decode, fsm_kube::fsm_core::DecodeError::Malformed(_)),
        "{decode:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with(&format!("Widget {ns}/bad-json (record in ConfigMap {ns}/{record_object}): the record cannot be decoded: the stored record is malformed")),
        "{error}"
    );

    create_widget(&env, "renamed", spec()).await;
    let mut stale = serde_json::to_value(record()).unwrap();
    stale["state"] = "Provisioning".into();
    put_status_record(&env, "renamed", stale).await;
    let error = operator(StoreKind::Status)
        .status(&client, &status_args(&env, "renamed", OutputFormat::Json))
        .await
        .unwrap_err();
    assert!(
        error.to_string().ends_with(
            "the stored record names state Provisioning, which machine WidgetState does not have"
        ),
        "{error}"
    );
    // What the runtime would say too.
    let raw = RawRecord::Json(serde_json::json!({"schemaVersion": 1, "state": "Provisioning"}));
    assert!(record_view::decode::<WidgetState>(&raw).is_err());
}

#[tokio::test]
async fn the_ephemeral_store_has_nothing_to_read() {
    let env = env().await;
    let client = env.client.clone();
    create_widget(&env, "w4", spec()).await;
    let result = operator(StoreKind::Ephemeral)
        .status(&client, &status_args(&env, "w4", OutputFormat::Text))
        .await;
    assert!(
        matches!(result, Err(Error::Read(ReadError::MemoryStore))),
        "{result:?}"
    );
}

// ---------------------------------------------------------------- run

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_hands_the_controller_a_client_and_returns_when_it_does() {
    let env = env().await;
    let (_http, kubeconfig) = kubeconfig_of(&env).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let command = parse(&["run", "--kubeconfig", &kubeconfig, "-n", &env.ns]);
    let run = move |run: RunContext<WidgetState>| {
        let tx = tx.clone();
        async move {
            let widgets = run.api::<Widget>().list(&Default::default()).await.unwrap();
            tx.send((run.namespace.clone(), widgets.items.len()))
                .unwrap();
        }
    };
    tokio::time::timeout(
        Duration::from_secs(20),
        execute(&operator(StoreKind::Status), command, run),
    )
    .await
    .expect("run returns when the controller does")
    .unwrap();
    assert_eq!(rx.recv().await, Some((Some(env.ns.clone()), 0)));
}

fn free_local_addr() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_the_machines_metrics_while_the_controller_runs() {
    let env = env().await;
    let (_http, kubeconfig) = kubeconfig_of(&env).await;
    let metrics_addr = free_local_addr();
    let command = parse(&[
        "run",
        "--kubeconfig",
        &kubeconfig,
        "--metrics-addr",
        &metrics_addr,
    ]);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let run = move |run: RunContext<WidgetState>| {
        let tx = tx.clone();
        async move {
            // What a controller does: count into the metrics it was given.
            run.metrics
                .set_state("WidgetState", "uid-1", Some("Pending"));
            tx.send(run.namespace.clone()).unwrap();
            std::future::pending::<()>().await;
        }
    };
    let operator_task =
        tokio::spawn(async move { execute(&operator(StoreKind::Status), command, run).await });
    let started = tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("the controller starts");
    assert_eq!(started, Some(None), "all namespaces");

    let body = eventually("metrics", || {
        let addr = metrics_addr.clone();
        async move {
            tokio::task::spawn_blocking(move || http_get(&addr, "/metrics"))
                .await
                .ok()?
        }
    })
    .await;
    assert!(
        body.contains("operator_fsm_objects{machine=\"WidgetState\",state=\"Pending\"} 1"),
        "{body}"
    );
    assert!(!operator_task.is_finished());
    operator_task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_leader_election_takes_the_configured_lease_then_runs() {
    // Embedded server only: the request log shows which Lease requests the
    // CLI made (where, as whom); a real server cannot say.
    let server = server().await;
    let http = server.serve_http().await.unwrap();
    let kubeconfig = http.kubeconfig().to_str().unwrap().to_owned();
    let command = parse(&[
        "run",
        "--kubeconfig",
        &kubeconfig,
        "--leader-elect",
        "--lease-name",
        "widgets",
        "--lease-namespace",
        "ops",
        "--identity",
        "replica-1",
    ]);
    let namespaces: Api<Namespace> = Api::all(server.client());
    let ops = Namespace {
        metadata: ObjectMeta {
            name: Some("ops".into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces
        .create(&PostParams::default(), &ops)
        .await
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<bool>();
    let run = move |context: RunContext<WidgetState>| {
        let tx = tx.clone();
        async move {
            // The run function is given the hold, and the reconciler it
            // builds checks it without being told.
            let held = context.leadership.as_ref().is_some_and(|l| l.is_held());
            let fenced = context
                .reconciler()
                .leadership()
                .is_some_and(|l| l.is_held());
            let _ = tx.send(held && fenced);
            std::future::pending::<()>().await;
        }
    };
    let operator_task =
        tokio::spawn(async move { execute(&operator(StoreKind::Status), command, run).await });
    let leases: Api<Lease> = Api::namespaced(server.client(), "ops");
    eventually("the Lease in ops", || {
        let leases = leases.clone();
        async move { leases.get_opt("widgets").await.ok()?.map(|_| ()) }
    })
    .await;
    let requests: Vec<_> = server
        .request_log()
        .records()
        .into_iter()
        .filter(|r| r.resource == "leases")
        .collect();
    for request in &requests {
        assert_eq!(request.group, "coordination.k8s.io", "{request:?}");
        assert_eq!(request.namespace.as_deref(), Some("ops"), "{request:?}");
        assert!(
            request.name.is_none() || request.name.as_deref() == Some("widgets"),
            "{request:?}"
        );
    }
    // The replica creates the Lease, so the controller starts, as this
    // replica holds it.
    let held = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("the controller started once the Lease was held")
        .expect("the run function reported");
    assert!(
        held,
        "the run function and its reconciler were given a leadership that is held"
    );
    let lease = leases.get("widgets").await.unwrap();
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("replica-1")
    );
    operator_task.abort();
}

/// A bare HTTP/1.0 GET, returning the body of a 200.
fn http_get(addr: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200")
        .then(|| body.to_owned())
        .or_else(|| head.starts_with("HTTP/1.1 200").then(|| body.to_owned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_the_web_view_of_the_watched_namespace() {
    let env = env().await;
    let (_http, kubeconfig) = kubeconfig_of(&env).await;
    create_widget(&env, "w-view", spec()).await;
    let view_addr = free_local_addr();
    let command = parse(&[
        "run",
        "--kubeconfig",
        &kubeconfig,
        "-n",
        &env.ns,
        "--view-addr",
        &view_addr,
    ]);
    // No controller: the widget has no record, which the view says.
    let run = |_: RunContext<WidgetState>| std::future::pending::<()>();
    let operator_task =
        tokio::spawn(async move { execute(&operator(StoreKind::Status), command, run).await });
    let rows = eventually("the view's row of w-view", || {
        let addr = view_addr.clone();
        async move {
            let body = tokio::task::spawn_blocking(move || http_get(&addr, "/api/objects"))
                .await
                .ok()??;
            let rows: serde_json::Value = serde_json::from_str(&body).ok()?;
            (rows.as_array()?.len() == 1).then_some(rows)
        }
    })
    .await;
    assert_eq!(rows[0]["kind"], "Widget");
    assert_eq!(rows[0]["name"], "w-view");
    assert_eq!(rows[0]["namespace"], env.ns.as_str());
    assert_eq!(rows[0]["problem"], "no record yet");
    assert!(!operator_task.is_finished());
    operator_task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_fails_when_the_metrics_address_is_taken() {
    let env = env().await;
    let (_http, kubeconfig) = kubeconfig_of(&env).await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let command = parse(&["run", "--kubeconfig", &kubeconfig, "--metrics-addr", &addr]);
    let run = |_: RunContext<WidgetState>| std::future::pending::<()>();
    let result = tokio::time::timeout(
        Duration::from_secs(20),
        execute(&operator(StoreKind::Status), command, run),
    )
    .await
    .expect("a metrics endpoint that cannot bind stops run");
    assert!(matches!(result, Err(Error::Metrics { .. })), "{result:?}");
}

#[test]
fn the_command_line_is_named_after_the_operator() {
    let op = operator(StoreKind::Status).version("1.2.3");
    let mut command = op.command();
    let help = command.render_help().to_string();
    assert!(help.contains("Usage: widget-operator <COMMAND>"), "{help}");
    for line in [
        "run              Run the operator's controller(s)",
        "crd              Print the CustomResourceDefinition of the operator's resource (YAML)",
        "rbac             Print the least ClusterRole (or Role) the operator needs (YAML)",
        "manifests        Print everything a cluster needs to run the operator (YAML)",
        "diagram          Print the state machine's diagram",
        "status           Show an object's current state, attempt, last error and history",
        "preflight        Say which stored records this build can run, before an upgrade or a rollback",
        "migrate-storage  Rewrite every object of the resource at the storage version",
    ] {
        assert!(help.contains(line), "{line}\n{help}");
    }
    let version = op.parse_from(["widget-operator", "--version"]).unwrap_err();
    assert_eq!(version.kind(), clap::error::ErrorKind::DisplayVersion);
    assert_eq!(version.to_string(), "widget-operator 1.2.3\n");
    assert_eq!(
        op.parse_from(["widget-operator", "crd"]).unwrap().command,
        Command::Crd(CrdArgs::default())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reads_what_the_runtime_wrote() {
    let env = env().await;
    let client = env.client.clone();
    for (store, name) in [
        (StoreKind::Status, "live"),
        (StoreKind::ConfigMap, "live-cm"),
    ] {
        let controller = match store {
            StoreKind::Status => run_controller(&env, fsm_kube::StatusStore::new(), ctx(&client)),
            _ => run_controller(
                &env,
                fsm_kube::ConfigMapStore::new(client.clone()),
                ctx(&client),
            ),
        };
        create_widget(&env, name, spec()).await;
        let op = operator(store);
        let text = eventually(&format!("{name} Ready through status"), || {
            let (op, client, env) = (&op, &client, &env);
            async move {
                let text = op
                    .status(client, &status_args(env, name, OutputFormat::Text))
                    .await
                    .ok()?;
                text.contains("\nState:        Ready ").then_some(text)
            }
        })
        .await;
        assert!(text.contains("Pending → Configuring"), "{store:?}: {text}");
        assert!(text.contains("Configuring → Ready"), "{store:?}: {text}");
        assert!(text.contains("\nAttempt:      0\n"), "{store:?}: {text}");
        controller.abort();
    }
}

#[tokio::test]
async fn a_role_for_an_object_store_warns_about_its_cluster_wide_watch() {
    let args = parse(&["rbac", "-n", "shop"]);
    let cm = execute(&operator(StoreKind::ConfigMap), args.clone(), no_run)
        .await
        .unwrap();
    assert!(
        cm.starts_with("# Caveat: the ConfigMap store watches"),
        "{cm}"
    );
    let documents: Vec<serde_json::Value> = cm
        .split("---\n")
        .filter(|d| !d.trim().is_empty() && !d.trim_start().starts_with('#'))
        .map(|d| serde_yaml_ng::from_str(d).unwrap())
        .collect();
    assert_eq!(documents[0]["kind"], "Role");
    let status = execute(&operator(StoreKind::Status), args, no_run)
        .await
        .unwrap();
    assert!(status.starts_with("---\n"), "{status}");
}

// ---------------------------------------------------------------- the reconciler of run

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_contexts_reconciler_keeps_records_where_the_operator_declares() {
    // The store is named once, in Operator::new: the reconciler `run`
    // builds keeps records there, so `status` finds them.
    let env = env().await;
    let (_http, kubeconfig) = kubeconfig_of(&env).await;
    let command = parse(&["run", "--kubeconfig", &kubeconfig, "-n", &env.ns]);
    let options = ReconcilerOptions::default()
        .poll_interval(Duration::from_secs(3600))
        .error_requeue(Duration::from_millis(100))
        .field_manager("widget-operator");
    let op = operator(StoreKind::ConfigMap).reconciler_options(options.clone());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let client = env.client.clone();
    let run = move |run: RunContext<WidgetState>| {
        let (tx, ctx) = (tx.clone(), ctx(&client));
        async move {
            let fsm = run.reconciler();
            let _ = tx.send((
                fsm.options().clone(),
                fsm.has_metrics(),
                fsm.leadership().is_some(),
            ));
            Controller::new(run.api::<Widget>(), watcher::Config::default())
                .run(fsm.reconcile(), fsm.error_policy(), ctx)
                .for_each(|_| async {})
                .await;
        }
    };
    let operator_task = tokio::spawn(async move { execute(&op, command, run).await });
    let (given, metrics, leadership) = tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("the controller starts")
        .expect("the main function reported");
    assert_eq!(
        given, options,
        "the operator's options reach the reconciler"
    );
    assert!(metrics, "the reconciler counts into the served metrics");
    assert!(!leadership, "no lease fence without --leader-elect");

    create_widget(&env, "declared", spec()).await;
    let op = operator(StoreKind::ConfigMap);
    let text = eventually("declared Ready through status", || {
        let (op, client, env) = (&op, &env.client, &env);
        async move {
            let text = op
                .status(client, &status_args(env, "declared", OutputFormat::Text))
                .await
                .ok()?;
            text.contains("\nState:        Ready ").then_some(text)
        }
    })
    .await;
    assert!(text.contains("ConfigMap"), "{text}");
    assert_eq!(
        object_store_state::<ConfigMap>(&env, "declared")
            .await
            .as_deref(),
        Some("Ready")
    );
    let widget: Widget = Api::namespaced(env.client.clone(), &env.ns)
        .get("declared")
        .await
        .unwrap();
    assert!(
        widget.status.and_then(|s| s.fsm).is_none(),
        "no record in the status with the ConfigMap store"
    );
    operator_task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_of_another_kind_than_declared_makes_run_fail() {
    let env = env().await;
    let (_http, kubeconfig) = kubeconfig_of(&env).await;
    let command = parse(&["run", "--kubeconfig", &kubeconfig, "-n", &env.ns]);
    let run = |run: RunContext<WidgetState>| async move {
        let _fsm = run.reconciler_with_store(fsm_kube::ConfigMapStore::new(run.client.clone()))?;
        // Not reached: the operator declares the status store.
        std::future::pending::<()>().await;
        Ok::<(), Error>(())
    };
    let result = tokio::time::timeout(
        Duration::from_secs(20),
        execute(&operator(StoreKind::Status), command, run),
    )
    .await
    .expect("run returns the main function's error");
    let Err(Error::Controller(error)) = result else {
        panic!("{result:?}");
    };
    let mismatch = error.downcast_ref::<Error>().expect("the CLI's error");
    assert!(
        matches!(
            mismatch,
            Error::StoreMismatch {
                declared: StoreKind::Status,
                given_kind: Some(StoreKind::ConfigMap),
                ..
            }
        ),
        "{mismatch:?}"
    );
    let message = mismatch.to_string();
    assert!(
        message.starts_with(
            "the operator declares the Status store, but its reconciler was given fsm_kube::"
        ) && message.contains("ObjectStore<")
            && message.ends_with("(the ConfigMap store)"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_of_the_declared_kind_is_accepted() {
    let env = env().await;
    let (_http, kubeconfig) = kubeconfig_of(&env).await;
    let command = parse(&["run", "--kubeconfig", &kubeconfig, "-n", &env.ns]);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let run = move |run: RunContext<WidgetState>| {
        let tx = tx.clone();
        async move {
            // Ephemeral: the plain in-memory store, or one that derives.
            let derive = Arc::new(
                |_: Arc<Widget>| -> BoxFuture<'static, Option<WidgetState>> {
                    Box::pin(async { None })
                },
            );
            let results = [
                run.reconciler_with_store(fsm_kube::fsm_core::EphemeralStore::new())
                    .map(drop),
                run.reconciler_with_store(fsm_kube::DerivingStore::<WidgetState>::new(derive))
                    .map(drop),
                run.reconciler_with_store(fsm_kube::SecretStore::new(run.client.clone()))
                    .map(drop),
            ];
            let _ = tx.send(results.map(|r| r.map_err(|e| e.to_string())));
        }
    };
    tokio::time::timeout(
        Duration::from_secs(20),
        execute(&operator(StoreKind::Ephemeral), command, run),
    )
    .await
    .expect("run returns")
    .unwrap();
    let [plain, deriving, secret] = rx.recv().await.unwrap();
    assert_eq!(plain, Ok(()));
    assert_eq!(deriving, Ok(()));
    assert!(
        secret.as_ref().is_err_and(
            |e| e.contains("declares the Ephemeral store") && e.ends_with("(the Secret store)")
        ),
        "{secret:?}"
    );
}

// ---------------------------------------------------------------- the operator's own flags

/// An operator's own flags of `run`.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
struct WidgetArgs {
    /// The colour new widgets are painted.
    #[arg(long, value_name = "COLOR", default_value = "blue")]
    paint: String,
    /// The widget factory's URL.
    #[arg(long, value_name = "URL", env = "WIDGET_OPERATOR_TEST_FACTORY_URL")]
    factory_url: Option<String>,
}

fn widget_operator_with_args() -> Operator<WidgetState, WidgetArgs> {
    operator(StoreKind::Status).with_args::<WidgetArgs>()
}

#[test]
fn the_operators_flags_are_in_the_help_of_run() {
    let op = widget_operator_with_args();
    op.command().debug_assert();
    let mut command = op.command();
    let run = command.find_subcommand_mut("run").unwrap();
    let help = run.render_help().to_string();
    for line in [
        "--paint <COLOR>",
        "The colour new widgets are painted",
        "[default: blue]",
        "--factory-url <URL>",
        "The widget factory's URL",
        "[env: WIDGET_OPERATOR_TEST_FACTORY_URL=",
        "--leader-elect",
    ] {
        assert!(help.contains(line), "{line}\n{help}");
    }
    // The other subcommands do not take them.
    let error = op
        .parse_from(["widget-operator", "crd", "--paint", "red"])
        .unwrap_err();
    assert_eq!(error.kind(), clap::error::ErrorKind::UnknownArgument);
}

/// Set in the child process of
/// `the_operators_flags_reach_the_main_function` (a test cannot set an
/// environment variable in its own process without `unsafe`).
const FLAGS_CHILD: &str = "WIDGET_OPERATOR_TEST_FLAGS_CHILD";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_flags_reach_the_main_function() {
    if std::env::var_os(FLAGS_CHILD).is_some() {
        // The child: `run` with a flag, and another from its environment
        // variable; prints what the main function was given.
        let server = server().await;
        let http = server.serve_http().await.unwrap();
        let kubeconfig = http.kubeconfig().to_str().unwrap().to_owned();
        let op = widget_operator_with_args();
        let cli = op
            .parse_from([
                "widget-operator",
                "run",
                "--kubeconfig",
                &kubeconfig,
                "--paint",
                "red",
            ])
            .unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let run = move |run: RunContext<WidgetState, WidgetArgs>| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(run.args.clone());
            }
        };
        tokio::time::timeout(Duration::from_secs(20), execute(&op, cli.command, run))
            .await
            .expect("run returns when the main function does")
            .unwrap();
        println!("main function given: {:?}", rx.recv().await.unwrap());
        return;
    }
    // The test's name in this binary: its module path without the crate.
    let module = module_path!().split_once("::").map_or("", |(_, path)| path);
    let test = format!("{module}::the_operators_flags_reach_the_main_function");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(FLAGS_CHILD, "1")
        .env("WIDGET_OPERATOR_TEST_FACTORY_URL", "http://factory:8080")
        .env_remove("FSM_REAL_APISERVER_KUBECONFIG");
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::task::spawn_blocking(move || child.output()),
    )
    .await
    .expect("the child test ends")
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected = WidgetArgs {
        paint: "red".into(),
        factory_url: Some("http://factory:8080".into()),
    };
    assert!(
        stdout.contains(&format!("main function given: {expected:?}")),
        "{stdout}"
    );
    // Without the flag nor the variable: the default, and nothing.
    let Command::Run(args) = widget_operator_with_args()
        .parse_from(["widget-operator", "run"])
        .unwrap()
        .command
    else {
        panic!("not run");
    };
    assert_eq!(
        args.operator,
        WidgetArgs {
            paint: "blue".into(),
            factory_url: None,
        }
    );
}

/// Flags that reuse `run`'s names.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
struct ClashingArgs {
    /// Clashes with `--namespace` (the same id and long name).
    #[arg(long)]
    namespace: Option<String>,
    /// Clashes with `-n` only.
    #[arg(short = 'n', long = "replicas")]
    replicas: Option<u32>,
}

#[test]
fn operator_flags_that_reuse_runs_names_are_a_usage_error() {
    let op = operator(StoreKind::Status).with_args::<ClashingArgs>();
    let error = op
        .parse_from(["widget-operator", "run", "--replicas", "3"])
        .unwrap_err();
    assert_eq!(error.kind(), clap::error::ErrorKind::ArgumentConflict);
    assert!(error.use_stderr());
    let message = error.to_string();
    assert!(
        message.contains(
            "the operator's own flags of `widget-operator run` reuse the name `namespace`, `--namespace`, `-n`, which `run` has already"
        ),
        "{message}"
    );
    // Flags that do not clash parse.
    widget_operator_with_args()
        .parse_from(["widget-operator", "run", "--paint", "red"])
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_reconciler_options_reach_the_engine() {
    // `max_transitions`, set once on the operator, lets one reconcile of
    // the reconciler `run` builds chain Pending → Configuring → Ready; with
    // the default, one reconcile starts the machine and commits one
    // transition.
    let env = env().await;
    let (_http, kubeconfig) = kubeconfig_of(&env).await;
    for (name, options, expected) in [
        (
            "chained",
            ReconcilerOptions::default().max_transitions(5),
            "Ready",
        ),
        ("one-step", ReconcilerOptions::default(), "Configuring"),
    ] {
        create_widget(&env, name, spec()).await;
        let command = parse(&["run", "--kubeconfig", &kubeconfig, "-n", &env.ns]);
        let op = operator(StoreKind::Status).reconciler_options(options);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let client = env.client.clone();
        let run = move |run: RunContext<WidgetState>| {
            let (tx, ctx) = (tx.clone(), ctx(&client));
            async move {
                let fsm = run.reconciler();
                let widget = run.api::<Widget>().get(name).await.unwrap();
                let action = fsm.reconcile_object(Arc::new(widget), ctx).await;
                let _ = tx.send(action.map(drop).map_err(|e| e.to_string()));
            }
        };
        tokio::time::timeout(Duration::from_secs(20), execute(&op, command, run))
            .await
            .expect("run returns after one reconcile")
            .unwrap();
        assert_eq!(rx.recv().await, Some(Ok(())), "{name}");
        let widget: Widget = Api::namespaced(env.client.clone(), &env.ns)
            .get(name)
            .await
            .unwrap();
        let state = widget
            .status
            .and_then(|s| s.fsm)
            .and_then(|f| f.state_name());
        assert_eq!(state.as_deref(), Some(expected), "{name}");
    }
}
