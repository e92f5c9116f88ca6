//! Sharded mode with in-process replicas, each with its own client, shard
//! Lease, controller and assigner (acting only in the replica holding
//! `widgets-sharder`), against the embedded API server or the real
//! kube-apiserver named by `FSM_REAL_APISERVER_KUBECONFIG`: every object
//! is labelled and completes once (100 widgets); a replica joining takes about a third,
//! each move drained (the old owner lets go) before the new label appears;
//! a replica stopped, or left to lapse, has its objects moved; a new
//! assigner moves none of the running replicas' objects.

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use fsm_kube::leader::run_while_leader_until;
use fsm_kube::shard::{Assigner, AssignerOptions, Ring, ShardGuard, ShardNames, run_shard_until};
use fsm_kube::{FsmMetrics, FsmReconciler, ReconcilerOptions, StatusStore};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{Controller, WatchStreamExt, watcher};
use prometheus_client::registry::Registry;

const OPERATOR: &str = "widgets";
const LEASE: Duration = Duration::from_secs(2);
const SHARD_LABEL: &str = "shard.operator-fsm.io/widgets";
const DRAIN_LABEL: &str = "drain.operator-fsm.io/widgets";

/// One in-process replica: its shard Lease and controller, and the
/// assigner under `widgets-sharder`, until stopped (or aborted: a crash).
struct Replica {
    task: tokio::task::JoinHandle<()>,
    stop: tokio::sync::watch::Sender<bool>,
    registry: Arc<Registry>,
}

impl Replica {
    fn start(env: &Env, shard: &'static str) -> Replica {
        let client = env.cluster.client();
        let ns = env.ns.clone();
        let names = ShardNames::new(OPERATOR).unwrap();
        let mut registry = Registry::default();
        let metrics = FsmMetrics::new(&mut registry);
        let guard = ShardGuard::new(names.clone(), shard)
            .unwrap()
            .with_metrics(metrics.clone());
        let assigner =
            Assigner::new::<Widget>(client.clone(), Some(&ns), &ns, names.clone(), LEASE)
                .options(AssignerOptions {
                    tick: Duration::from_millis(200),
                    ..AssignerOptions::default()
                })
                .metrics(metrics);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let until = move || {
            let mut stopped = stopped.clone();
            async move {
                let _ = stopped.wait_for(|s| *s).await;
            }
        };
        let ctx = ctx(&client);
        let task = tokio::spawn(async move {
            let assigner_lease = names.assigner_lease();
            let assigning = run_while_leader_until(
                client.clone(),
                &ns,
                &assigner_lease,
                shard,
                LEASE,
                move |leadership| assigner.clone().run(leadership),
                until(),
            );
            let replica = run_shard_until(
                client.clone(),
                &ns,
                guard,
                LEASE,
                |leadership, guard| {
                    let fsm =
                        FsmReconciler::<WidgetState>::builder(client.clone(), StatusStore::new())
                            .options(
                                ReconcilerOptions::default()
                                    .poll_interval(Duration::from_secs(3600))
                                    .error_requeue(Duration::from_millis(100))
                                    .events(false),
                            )
                            .leadership(leadership)
                            .shard(guard.clone())
                            .build();
                    let widgets: Api<Widget> = Api::namespaced(client.clone(), &ns);
                    let ctx = ctx.clone();
                    async move {
                        Controller::new(widgets, guard.watcher_config())
                            .run(fsm.reconcile(), fsm.error_policy(), ctx)
                            .for_each(|_| async {})
                            .await;
                    }
                },
                until(),
            );
            let (assigned, replicated) = tokio::join!(assigning, replica);
            assigned.unwrap();
            replicated.unwrap();
        });
        Replica {
            task,
            stop,
            registry: Arc::new(registry),
        }
    }

    /// What this replica's `/metrics` would serve.
    fn metrics(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        text
    }

    /// SIGTERM: stop acting, give the Leases up, return.
    async fn stop(self) {
        self.stop.send(true).unwrap();
        self.task.await.unwrap();
    }

    /// SIGKILL: nothing given up; the Leases lapse.
    async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// Every (shard label, drain label) each widget carried, in order.
type History = Arc<Mutex<HashMap<String, Vec<(Option<String>, Option<String>)>>>>;

fn record_label_history(env: &Env) -> (History, tokio::task::JoinHandle<()>) {
    let history = History::default();
    let widgets: Api<Widget> = Api::namespaced(env.cluster.client(), &env.ns);
    let writer = history.clone();
    let task = tokio::spawn(
        watcher(widgets, watcher::Config::default())
            .applied_objects()
            .for_each(move |widget| {
                if let Ok(widget) = widget {
                    let labels = widget.labels();
                    let seen = (
                        labels.get(SHARD_LABEL).cloned(),
                        labels.get(DRAIN_LABEL).cloned(),
                    );
                    let mut history = writer.lock().unwrap();
                    let entries = history.entry(widget.name_any()).or_default();
                    if entries.last() != Some(&seen) {
                        entries.push(seen);
                    }
                }
                async {}
            }),
    );
    (history, task)
}

/// The widgets' shard labels, once every widget is labelled as `ring`
/// says and none is being drained.
async fn settled_on(env: &Env, shards: &[&str]) -> BTreeMap<String, String> {
    let ring = Ring::new(shards.iter().copied());
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    eventually(
        &format!("every widget labelled for its shard of {shards:?}"),
        || {
            let (widgets, ring) = (widgets.clone(), ring.clone());
            async move {
                let list = widgets.list(&Default::default()).await.ok()?;
                let mut labels = BTreeMap::new();
                for widget in list {
                    let shard = widget.labels().get(SHARD_LABEL)?;
                    if widget.labels().contains_key(DRAIN_LABEL)
                        || Some(shard.as_str()) != ring.owner(widget.uid().as_deref()?)
                    {
                        return None;
                    }
                    labels.insert(widget.name_any(), shard.clone());
                }
                Some(labels)
            }
        },
    )
    .await
}

async fn holder(env: &Env, lease: &str) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.ns);
    leases.get_opt(lease).await.ok()??.spec?.holder_identity
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_the_objects_and_moves_are_drained_first() {
    let env = env().await;
    let (history, watching) = record_label_history(&env);
    let a = Replica::start(&env, "widgets-shard-a");
    let b = Replica::start(&env, "widgets-shard-b");
    const N: usize = 100;
    let names: Vec<String> = (0..N).map(|i| format!("w{i:03}")).collect();
    futures::stream::iter(&names)
        .for_each_concurrent(8, |name| async {
            create_widget(&env, name, WidgetSpec::colored("blue")).await;
        })
        .await;
    futures::stream::iter(&names)
        .for_each_concurrent(8, |name| async {
            wait_for_status_state(&env, name, "Ready").await;
        })
        .await;
    let two = settled_on(&env, &["widgets-shard-a", "widgets-shard-b"]).await;
    let per_shard = |labels: &BTreeMap<String, String>, shard: &str| {
        labels.values().filter(|s| *s == shard).count()
    };
    assert!(per_shard(&two, "widgets-shard-a") > 0 && per_shard(&two, "widgets-shard-b") > 0);

    // A third replica joins: only objects going to it move, about a third,
    // and each is let go by its owner before it is labelled for c.
    let c = Replica::start(&env, "widgets-shard-c");
    let three = settled_on(
        &env,
        &["widgets-shard-a", "widgets-shard-b", "widgets-shard-c"],
    )
    .await;
    let moved: BTreeSet<&String> = two
        .iter()
        .filter(|(name, shard)| three.get(*name) != Some(*shard))
        .map(|(name, _)| name)
        .collect();
    assert!(moved.iter().all(|name| three[*name] == "widgets-shard-c"));
    assert!(
        (N / 6..=N / 2).contains(&moved.len()),
        "{} of {N} moved on a join to 3 shards",
        moved.len()
    );
    {
        let history = history.lock().unwrap();
        for name in &moved {
            let entries = &history[*name];
            let at_c = entries
                .iter()
                .position(|(shard, _)| shard.as_deref() == Some("widgets-shard-c"))
                .unwrap();
            let owner = two[*name].clone();
            // ..., (owner, drain=c), (none, none), (c, none): drained,
            // released, then handed over.
            assert!(at_c >= 2, "{name}: {entries:?}");
            assert_eq!(entries[at_c - 1], (None, None), "{name}: {entries:?}");
            assert_eq!(
                entries[at_c - 2],
                (Some(owner), Some("widgets-shard-c".to_owned())),
                "{name}: {entries:?}"
            );
        }
    }

    // c stops gracefully: its Lease is given up and its objects go back at
    // once, without a drain (c no longer acts).
    c.stop().await;
    assert_eq!(holder(&env, "widgets-shard-c").await, None);
    settled_on(&env, &["widgets-shard-a", "widgets-shard-b"]).await;

    // b crashes: its Lease lapses, and its objects move to a.
    b.kill().await;
    settled_on(&env, &["widgets-shard-a"]).await;
    create_widget(&env, "late", WidgetSpec::colored("green")).await;
    wait_for_status_state(&env, "late", "Ready").await;

    // a, the only replica left, runs the assigner and says so; it counts
    // its shard's objects, the moves, and the objects it let go of to c;
    // its ring has a alone (b's Lease lapsed, c's was given up).
    let line = |name: &str, labels: &str, value: usize| {
        format!("operator_fsm_{name}{{operator=\"widgets\"{labels}}} {value}")
    };
    eventually("a's metrics to count every object in its shard", || {
        let text = a.metrics();
        let want = [
            line("shard_assigner_active", "", 1),
            line("shard_objects", ",shard=\"widgets-shard-a\"", N + 1),
            line("shard_ring_member", ",shard=\"widgets-shard-a\"", 1),
            line("shard_ring_member", ",shard=\"widgets-shard-b\"", 0),
            line("shard_ring_member", ",shard=\"widgets-shard-c\"", 0),
        ];
        async move {
            want.iter()
                .all(|l| text.lines().any(|t| t == l))
                .then_some(())
        }
    })
    .await;
    let text = a.metrics();
    assert!(
        text.contains(
            "operator_fsm_shard_releases_total{operator=\"widgets\",shard=\"widgets-shard-a\"}"
        ),
        "{text}"
    );
    assert!(
        text.contains("operator_fsm_shard_moves_total{operator=\"widgets\"}"),
        "{text}"
    );

    // Through every move, each transition was committed once.
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    for widget in widgets.list(&Default::default()).await.unwrap() {
        let record = widget
            .status
            .and_then(|s| s.fsm)
            .unwrap()
            .record::<WidgetState>()
            .unwrap();
        let seqs: Vec<u64> = record.history.iter().map(|h| h.seq).collect();
        assert_eq!(seqs, [1, 2, 3], "{}", widget.metadata.name.unwrap());
    }
    a.stop().await;
    watching.abort();
}

/// The assigner moves to another replica (its holder stopped): the new one
/// starts knowing no shard Lease, and sees each renewed one after another.
/// Until then it moves none of their objects; only the stopped replica's
/// objects move (at once: its Lease was given up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_assigner_moves_only_the_stopped_replicas_objects() {
    let env = env().await;
    let shards = ["widgets-shard-a", "widgets-shard-b", "widgets-shard-c"];
    // Started a third of a renewal apart, so that the new assigner sees
    // the survivors' Leases renewed at different looks.
    let mut replicas: Vec<(&str, Replica)> = Vec::new();
    for shard in shards {
        replicas.push((shard, Replica::start(&env, shard)));
        tokio::time::sleep(LEASE / 9).await;
    }
    const N: usize = 60;
    let names: Vec<String> = (0..N).map(|i| format!("f{i:02}")).collect();
    futures::stream::iter(&names)
        .for_each_concurrent(8, |name| async {
            create_widget(&env, name, WidgetSpec::colored("blue")).await;
        })
        .await;
    let before = settled_on(&env, &shards).await;
    let (history, watching) = record_label_history(&env);
    // The history starts with each widget's labels now.
    eventually("the label history to hold every widget", || {
        let seen = history.lock().unwrap().len();
        async move { (seen == N).then_some(()) }
    })
    .await;

    let assigner = holder(&env, "widgets-sharder")
        .await
        .expect("a replica runs the assigner");
    let at = replicas
        .iter()
        .position(|(shard, _)| *shard == assigner)
        .expect("the assigner is one of the replicas");
    let (stopped, replica) = replicas.remove(at);
    replica.stop().await;
    let survivors: Vec<&str> = replicas.iter().map(|(shard, _)| *shard).collect();
    let after = settled_on(&env, &survivors).await;
    let new_assigner = holder(&env, "widgets-sharder").await;
    assert!(
        new_assigner
            .as_deref()
            .is_some_and(|h| survivors.contains(&h)),
        "{new_assigner:?} runs the assigner"
    );

    watching.abort();
    let history = history.lock().unwrap().clone();
    for (name, shard) in &before {
        let entries = &history[name];
        if shard == stopped {
            assert_ne!(after[name], stopped, "{name}: {entries:?}");
        } else {
            // A survivor's widget: never drained, never relabelled.
            assert_eq!(
                entries,
                &vec![(Some(shard.clone()), None)],
                "{name} of {shard}, a replica that kept running"
            );
        }
    }
    assert!(before.values().any(|s| s == stopped) && before.values().any(|s| s != stopped));
    for (_, replica) in replicas {
        replica.stop().await;
    }
}

/// `run --shards` of the operator CLI: the replica holds its shard Lease
/// (labelled for the ring), runs the assigner, and reconciles the objects
/// labelled for it with the reconciler and watch `RunContext` gives it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_shards_holds_a_shard_lease_and_reconciles_its_objects() {
    use clap::Parser;
    use fsm_kube::cli::{Cli, Operator, RunContext, StoreKind};

    let env = env().await;
    let served;
    let kubeconfig = match env.cluster.kubeconfig() {
        Some(path) => path.to_owned(),
        None => {
            served = env.embedded().unwrap().serve_http().await.unwrap();
            served.kubeconfig().to_owned()
        }
    };
    let kubeconfig = kubeconfig.to_str().unwrap().to_owned();
    let cli = Cli::<()>::try_parse_from([
        "widgets-operator",
        "run",
        "--kubeconfig",
        &kubeconfig,
        "--namespace",
        &env.ns,
        "--lease-namespace",
        &env.ns,
        "--lease-duration",
        "2",
        "--shards",
        "--shard-lease",
        "widgets-cli",
    ])
    .unwrap();
    let run = |context: RunContext<WidgetState>| async move {
        assert_eq!(
            context.shard.as_ref().map(|s| s.shard()),
            Some("widgets-cli")
        );
        let fsm = context.reconciler();
        Controller::new(context.api::<Widget>(), context.watcher_config())
            .run(fsm.reconcile(), fsm.error_policy(), ctx(&context.client))
            .for_each(|_| async {})
            .await;
    };
    let operator = tokio::spawn(async move {
        let mut out = Vec::new();
        Operator::<WidgetState>::new(OPERATOR, StoreKind::Status)
            .execute(cli.command, run, &mut out)
            .await
    });
    create_widget(&env, "cli", WidgetSpec::colored("blue")).await;
    let widget = wait_for_status_state(&env, "cli", "Ready").await;
    assert_eq!(
        widget.labels().get(SHARD_LABEL).map(String::as_str),
        Some("widgets-cli")
    );
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.ns);
    let lease = leases.get("widgets-cli").await.unwrap();
    assert_eq!(
        lease
            .labels()
            .get("operator-fsm.io/shard-ring")
            .map(String::as_str),
        Some(OPERATOR)
    );
    assert_eq!(
        holder(&env, "widgets-sharder").await.as_deref(),
        Some("widgets-cli")
    );
    operator.abort();
}

/// The reconciler's own check, with a controller watching every widget
/// (`watcher::Config::default()`): a widget of another shard, or of none,
/// runs nothing; a drained one runs nothing and is let go (both labels
/// removed); only the widget labelled for this shard is reconciled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconciler_refuses_other_shards_and_lets_drained_objects_go() {
    let env = env().await;
    let names = ShardNames::new(OPERATOR).unwrap();
    let guard = ShardGuard::new(names, "widgets-shard-me").unwrap();
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    let labelled = |name: &str, labels: &[(&str, &str)]| {
        let mut widget = Widget::new(name, WidgetSpec::colored("blue"));
        widget.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        widget
    };
    for widget in [
        labelled("mine", &[(SHARD_LABEL, "widgets-shard-me")]),
        labelled("theirs", &[(SHARD_LABEL, "widgets-shard-other")]),
        labelled("nobodys", &[]),
        labelled(
            "drained",
            &[
                (SHARD_LABEL, "widgets-shard-me"),
                (DRAIN_LABEL, "widgets-shard-other"),
            ],
        ),
    ] {
        widgets.create(&Default::default(), &widget).await.unwrap();
    }
    let ctx = ctx(&env.client);
    let fsm = FsmReconciler::<WidgetState>::builder(env.client.clone(), StatusStore::new())
        .options(ReconcilerOptions::default().events(false))
        .shard(guard)
        .build();
    let controller = tokio::spawn(
        Controller::new(widgets.clone(), watcher::Config::default())
            .run(fsm.reconcile(), fsm.error_policy(), ctx.clone())
            .for_each(|_| async {}),
    );
    wait_for_status_state(&env, "mine", "Ready").await;
    let drained = eventually("the drained widget let go", || {
        let widgets = widgets.clone();
        async move {
            let widget = widgets.get("drained").await.ok()?;
            (!widget.labels().contains_key(SHARD_LABEL)).then_some(widget)
        }
    })
    .await;
    assert!(!drained.labels().contains_key(DRAIN_LABEL));
    for name in ["theirs", "nobodys", "drained"] {
        let widget = widgets.get(name).await.unwrap();
        assert!(widget.status.is_none(), "{name} was reconciled: {widget:?}");
        assert!(
            !ctx.log().iter().any(|l| l.ends_with(&format!(":{name}"))),
            "{name}: {:?}",
            ctx.log()
        );
    }
    controller.abort();
}
