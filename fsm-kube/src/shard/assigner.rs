//! The assigner: labels every object with its shard, draining a move from
//! a live owner before handing it over. It runs in every replica and acts
//! only in the one holding the `<operator>-sharder` Lease.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde_json::json;
use tokio::time::Instant;

use super::ShardNames;
use super::live::{LeaseObserver, ShardHealth};
use super::plan::{Move, ObjectView, decide, ring_of};
use super::ring::DEFAULT_VIRTUAL_NODES;
use crate::leader::Leadership;
use crate::metrics::FsmMetrics;

/// How the assigner paces itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssignerOptions {
    /// How often it looks at the shard Leases and the objects. Default 1 s.
    pub tick: Duration,
    /// At most this many label writes per look. Default 500.
    pub max_writes_per_tick: usize,
    /// At most this many writes in flight at once. Default 8.
    pub concurrency: usize,
    /// Virtual nodes per shard on the ring. Default
    /// [`DEFAULT_VIRTUAL_NODES`]; every assigner of an operator must use
    /// the same number.
    pub virtual_nodes: usize,
}

impl Default for AssignerOptions {
    fn default() -> Self {
        AssignerOptions {
            tick: Duration::from_secs(1),
            max_writes_per_tick: 500,
            concurrency: 8,
            virtual_nodes: DEFAULT_VIRTUAL_NODES,
        }
    }
}

/// Assigns the objects of one kind to the live shards of one operator.
///
/// ```no_run
/// # async fn demo<K>(client: kube::Client) -> Result<(), Box<dyn std::error::Error>>
/// # where K: kube::Resource<DynamicType = ()> {
/// use std::time::Duration;
/// use fsm_kube::leader::run_while_leader;
/// use fsm_kube::shard::{Assigner, ShardNames};
///
/// let names = ShardNames::new("db-operator")?;
/// let assigner = Assigner::new::<K>(client.clone(), None, "ops", names.clone(), Duration::from_secs(15));
/// run_while_leader(client, "ops", &names.assigner_lease(), "db-operator-0",
///     Duration::from_secs(15), move |leadership| assigner.clone().run(leadership)).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Assigner {
    client: Client,
    resource: ApiResource,
    namespace: Option<String>,
    leases: Api<Lease>,
    names: ShardNames,
    lease_duration: Duration,
    options: AssignerOptions,
    metrics: Option<FsmMetrics>,
}

impl std::fmt::Debug for Assigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assigner")
            .field("operator", &self.names.operator())
            .field("kind", &self.resource.kind)
            .field("namespace", &self.namespace)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Assigner {
    /// The assigner of kind `K`'s objects (in `namespace`, or all) to the
    /// shard Leases of `names` in `lease_namespace`; a shard whose Lease
    /// has not changed for `lease_duration` (or its own duration) is dead.
    pub fn new<K: Resource<DynamicType = ()>>(
        client: Client,
        namespace: Option<&str>,
        lease_namespace: &str,
        names: ShardNames,
        lease_duration: Duration,
    ) -> Assigner {
        Assigner {
            leases: Api::namespaced(client.clone(), lease_namespace),
            client,
            resource: ApiResource::erase::<K>(&()),
            namespace: namespace.map(str::to_owned),
            names,
            lease_duration,
            options: AssignerOptions::default(),
            metrics: None,
        }
    }

    /// Replaces the options.
    #[must_use]
    pub fn options(mut self, options: AssignerOptions) -> Self {
        self.options = options;
        self
    }

    /// Reports objects per shard, moves and drains in `metrics`.
    #[must_use]
    pub fn metrics(mut self, metrics: FsmMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The objects' API, metadata only.
    fn objects(&self, namespace: Option<&str>) -> Api<PartialObjectMeta<DynamicObject>> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &self.resource),
            None => Api::all_with(self.client.clone(), &self.resource),
        }
    }

    /// Runs while `leadership` (of the `<operator>-sharder` Lease) is
    /// held: watches the objects' metadata, and at every tick looks at
    /// the shard Leases and writes what [`decide`] says. Never returns;
    /// abort it (as [`crate::leader::run_while_leader`] does when the
    /// hold lapses).
    pub async fn run(self, leadership: Leadership) {
        let writer = reflector::store::Writer::new(self.resource.clone());
        let reader = writer.as_reader();
        let watch = watcher::watcher(
            self.objects(self.namespace.as_deref()),
            watcher::Config::default(),
        )
        .default_backoff();
        let driver = tokio::spawn(reflector::reflector(writer, watch).for_each(|event| {
            if let Err(error) = event {
                tracing::warn!(%error, "sharding: watching the objects failed; retrying");
            }
            std::future::ready(())
        }));
        let _driver = AbortOnDrop(driver);
        let _active = self
            .metrics
            .clone()
            .map(|m| Active::new(m, self.names.operator()));
        if reader.wait_until_ready().await.is_err() {
            return;
        }
        tracing::info!(
            operator = self.names.operator(),
            "sharding: assigning objects to shards"
        );
        let mut observer = LeaseObserver::default();
        let mut reported = Reported::default();
        loop {
            if leadership.is_held() {
                self.pass(&reader, &mut observer, &mut reported, &leadership)
                    .await;
            }
            tokio::time::sleep(self.options.tick).await;
        }
    }

    /// One look: the Leases' health, the ring, and the writes.
    async fn pass(
        &self,
        reader: &Store<PartialObjectMeta<DynamicObject>>,
        observer: &mut LeaseObserver,
        reported: &mut Reported,
        leadership: &Leadership,
    ) {
        let params = ListParams::default().labels(&self.names.ring_selector());
        let leases = match self.leases.list(&params).await {
            Ok(list) => list.items,
            Err(error) => {
                tracing::warn!(%error, "sharding: cannot list the shard Leases; trying again");
                return;
            }
        };
        let health = observer.observe(&leases, Instant::now(), self.lease_duration);
        let ring = ring_of(&health, self.options.virtual_nodes);
        self.report_ring(&health, &mut reported.ring);
        let objects = reader.state();
        self.report_counts(&objects, &mut reported.counts);
        if ring.is_empty() {
            return;
        }
        let moves: Vec<_> = objects
            .iter()
            .filter_map(|object| {
                let decided = decide(&self.view(object), &ring, &health)?;
                Some((object.clone(), decided))
            })
            .take(self.options.max_writes_per_tick)
            .collect();
        futures::stream::iter(moves)
            .map(|(object, decided)| self.write(object, decided, leadership))
            .buffer_unordered(self.options.concurrency.max(1))
            .collect::<Vec<()>>()
            .await;
    }

    fn view(&self, object: &PartialObjectMeta<DynamicObject>) -> ObjectView {
        let meta = &object.metadata;
        let label = |key: &str| meta.labels.as_ref().and_then(|l| l.get(key)).cloned();
        let epoch = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(self.names.epoch_annotation()))
            .and_then(|e| e.parse().ok())
            .unwrap_or(0);
        ObjectView {
            uid: meta.uid.clone().unwrap_or_default(),
            shard: label(self.names.shard_label()),
            drain: label(self.names.drain_label()),
            epoch,
        }
    }

    /// Writes one move, conditionally on the version the decision was
    /// made from; a conflict is left for the next look.
    async fn write(
        &self,
        object: Arc<PartialObjectMeta<DynamicObject>>,
        decided: Move,
        leadership: &Leadership,
    ) {
        if !leadership.is_held() {
            return;
        }
        let meta = &object.metadata;
        let (shard, drain) = (self.names.shard_label(), self.names.drain_label());
        let metadata = match &decided {
            Move::Assign { to, epoch, .. } => json!({
                "labels": { shard: to, drain: null },
                "annotations": { self.names.epoch_annotation(): epoch.to_string() },
            }),
            Move::Drain { to, .. } => json!({ "labels": { drain: to } }),
            Move::CancelDrain => json!({ "labels": { drain: null } }),
        };
        let mut body = json!({ "metadata": metadata });
        body["metadata"]["resourceVersion"] = json!(meta.resource_version);
        let name = meta.name.clone().unwrap_or_default();
        let api = self.objects(meta.namespace.as_deref());
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => self.written(&name, meta.namespace.as_deref(), &decided),
            Err(kube::Error::Api(status)) if status.is_conflict() || status.is_not_found() => {
                tracing::debug!(object = %name, "sharding: the object changed; decided again at the next look");
            }
            Err(error) => {
                tracing::warn!(object = %name, %error, "sharding: label write failed; trying again at the next look");
            }
        }
    }

    /// Logs and counts a write that succeeded.
    fn written(&self, name: &str, namespace: Option<&str>, decided: &Move) {
        let operator = self.names.operator();
        let namespace = namespace.unwrap_or_default();
        match decided {
            Move::Assign { from, to, epoch } => {
                if *epoch > 1 {
                    tracing::info!(object = name, namespace, from = from.as_deref().unwrap_or("(released)"), to = %to, epoch, "sharding: moved");
                    if let Some(metrics) = &self.metrics {
                        metrics.count_shard_move(operator);
                    }
                } else {
                    tracing::debug!(object = name, namespace, to = %to, "sharding: assigned");
                }
            }
            Move::Drain { from, to } => {
                tracing::info!(object = name, namespace, from = %from, to = %to, "sharding: draining");
                if let Some(metrics) = &self.metrics {
                    metrics.count_shard_drain(operator);
                }
            }
            Move::CancelDrain => {
                tracing::info!(
                    object = name,
                    namespace,
                    "sharding: drain cancelled; the owner keeps it"
                );
            }
        }
    }

    /// Reports which shards are members of the ring (given new objects),
    /// and forgets those whose Lease is gone.
    fn report_ring(&self, health: &BTreeMap<String, ShardHealth>, reported: &mut BTreeSet<String>) {
        let Some(metrics) = &self.metrics else {
            return;
        };
        let operator = self.names.operator();
        for gone in reported.iter().filter(|s| !health.contains_key(*s)) {
            metrics.remove_shard_ring_member(operator, gone);
        }
        for (shard, state) in health {
            metrics.set_shard_ring_member(operator, shard, *state == ShardHealth::Member);
        }
        *reported = health.keys().cloned().collect();
    }

    /// Reports the objects per shard label (`""`: unassigned).
    fn report_counts(
        &self,
        objects: &[Arc<PartialObjectMeta<DynamicObject>>],
        reported: &mut BTreeSet<String>,
    ) {
        let Some(metrics) = &self.metrics else {
            return;
        };
        let mut counts: BTreeMap<String, i64> = BTreeMap::new();
        for object in objects {
            let shard = object
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(self.names.shard_label()))
                .cloned()
                .unwrap_or_default();
            *counts.entry(shard).or_insert(0) += 1;
        }
        for gone in reported.iter().filter(|s| !counts.contains_key(*s)) {
            metrics.set_shard_objects(self.names.operator(), gone, 0);
        }
        for (shard, count) in &counts {
            metrics.set_shard_objects(self.names.operator(), shard, *count);
        }
        reported.extend(counts.into_keys());
    }
}

/// The metric labels the assigner has reported, so that it can zero or
/// drop those that went away.
#[derive(Default)]
struct Reported {
    /// Shard labels of `shard_objects`.
    counts: BTreeSet<String>,
    /// Shards of `shard_ring_member`.
    ring: BTreeSet<String>,
}

/// Marks this replica's assigner active in the metrics while it lives.
struct Active {
    metrics: FsmMetrics,
    operator: String,
}

impl Active {
    fn new(metrics: FsmMetrics, operator: &str) -> Active {
        metrics.set_shard_assigner_active(operator, true);
        Active {
            metrics,
            operator: operator.to_owned(),
        }
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.metrics
            .set_shard_assigner_active(&self.operator, false);
    }
}

/// A spawned task that is aborted when this handle is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
