//! The replica's side: run handlers only for objects labelled for this
//! shard, let an object go when the assigner asks (the drain label), and
//! refuse a cached copy from before it let the object go.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use serde_json::json;

use super::ShardNames;
use crate::metrics::FsmMetrics;

/// What the guard says of one reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The object is this shard's: reconcile it.
    Run,
    /// The assigner asked this shard to let the object go: run nothing,
    /// remove the shard and drain labels.
    Release,
    /// Not this shard's: run nothing.
    Refuse(Refusal),
}

/// Why a reconcile was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The object is labelled for another shard, or for none.
    NotMine {
        /// Its shard label.
        labelled: Option<String>,
    },
    /// A copy from before this shard let the object go (its epoch is not
    /// newer than the one released).
    Stale {
        /// The copy's epoch.
        epoch: u64,
        /// The epoch released.
        released: u64,
    },
}

/// One replica's shard: the label its objects carry, the selector its
/// watch should use, and the check the reconciler makes before running
/// anything.
///
/// ```
/// use fsm_kube::shard::{ShardGuard, ShardNames};
///
/// let guard = ShardGuard::new(ShardNames::new("db-operator").unwrap(), "db-operator-shard-0").unwrap();
/// assert_eq!(guard.selector(), "shard.operator-fsm.io/db-operator=db-operator-shard-0");
/// // Give the Controller `guard.watcher_config()`; a Controller watching
/// // everything stays safe, as the reconciler refuses other shards' objects.
/// let _config = guard.watcher_config();
/// ```
#[derive(Clone)]
pub struct ShardGuard {
    names: Arc<ShardNames>,
    shard: Arc<str>,
    /// UID -> the greatest epoch this shard let go of.
    released: Arc<Mutex<HashMap<String, u64>>>,
    metrics: Option<FsmMetrics>,
}

impl std::fmt::Debug for ShardGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardGuard")
            .field("operator", &self.names.operator())
            .field("shard", &self.shard)
            .finish_non_exhaustive()
    }
}

impl ShardGuard {
    /// The guard of shard `shard` (this replica's shard Lease name).
    ///
    /// # Errors
    /// [`ShardError::InvalidName`](super::ShardError::InvalidName) when
    /// `shard` cannot be a label value.
    pub fn new(names: ShardNames, shard: &str) -> Result<ShardGuard, super::ShardError> {
        names.check_shard(shard)?;
        Ok(ShardGuard {
            names: Arc::new(names),
            shard: Arc::from(shard),
            released: Arc::default(),
            metrics: None,
        })
    }

    /// Counts released objects in `metrics`.
    #[must_use]
    pub fn with_metrics(mut self, metrics: FsmMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// This replica's shard.
    #[must_use]
    pub fn shard(&self) -> &str {
        &self.shard
    }

    /// The names in use.
    #[must_use]
    pub fn names(&self) -> &ShardNames {
        &self.names
    }

    /// The label selector of this shard's objects.
    #[must_use]
    pub fn selector(&self) -> String {
        self.names.shard_selector(&self.shard)
    }

    /// A watcher configuration selecting this shard's objects.
    #[must_use]
    pub fn watcher_config(&self) -> watcher::Config {
        watcher::Config::default().labels(&self.selector())
    }

    /// The verdict on a reconcile of an object with metadata `meta`.
    #[must_use]
    pub fn verdict(&self, meta: &ObjectMeta) -> Verdict {
        let label = |key: &str| meta.labels.as_ref().and_then(|l| l.get(key));
        let labelled = label(self.names.shard_label());
        if labelled.map(String::as_str) != Some(&*self.shard) {
            return Verdict::Refuse(Refusal::NotMine {
                labelled: labelled.cloned(),
            });
        }
        let epoch = self.epoch_of(meta);
        if let Some(uid) = &meta.uid {
            let mut released = self.lock();
            match released.get(uid).copied() {
                Some(gone) if gone >= epoch => {
                    return Verdict::Refuse(Refusal::Stale {
                        epoch,
                        released: gone,
                    });
                }
                // Assigned to this shard again since: forget the release.
                Some(_) => {
                    released.remove(uid);
                }
                None => {}
            }
        }
        if label(self.names.drain_label()).is_some() {
            Verdict::Release
        } else {
            Verdict::Run
        }
    }

    /// Screens a reconcile of `object`: `None` to go on; `Some(())` when
    /// the reconciler must stop here (refused, or let go just now).
    ///
    /// # Errors
    /// The API's, when letting the object go failed (409 when it changed
    /// meanwhile: look again).
    pub async fn screen<K>(&self, client: &Client, object: &K) -> Result<Option<()>, kube::Error>
    where
        K: Resource<DynamicType = ()>,
    {
        match self.verdict(object.meta()) {
            Verdict::Run => Ok(None),
            Verdict::Refuse(refusal) => {
                tracing::debug!(shard = %self.shard, ?refusal, "not this shard's object; nothing run");
                Ok(Some(()))
            }
            Verdict::Release => {
                self.release(client, object).await?;
                Ok(Some(()))
            }
        }
    }

    /// Removes the shard and drain labels, conditionally on the version
    /// read, and remembers the epoch let go of.
    async fn release<K>(&self, client: &Client, object: &K) -> Result<(), kube::Error>
    where
        K: Resource<DynamicType = ()>,
    {
        let resource = ApiResource::erase::<K>(&());
        let api: Api<DynamicObject> = match object.meta().namespace.as_deref() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let body = json!({
            "metadata": {
                "resourceVersion": object.meta().resource_version,
                "labels": {
                    self.names.shard_label(): null,
                    self.names.drain_label(): null,
                },
            }
        });
        let name = object.meta().name.clone().unwrap_or_default();
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await?;
        let epoch = self.epoch_of(object.meta());
        if let Some(uid) = &object.meta().uid {
            let mut released = self.lock();
            let entry = released.entry(uid.clone()).or_insert(epoch);
            *entry = (*entry).max(epoch);
        }
        if let Some(metrics) = &self.metrics {
            metrics.count_shard_release(self.names.operator(), &self.shard);
        }
        tracing::info!(
            shard = %self.shard,
            object = %name,
            namespace = object.meta().namespace.as_deref().unwrap_or_default(),
            epoch,
            "drained: this shard let the object go"
        );
        Ok(())
    }

    /// The object's assignment epoch; 0 when absent. An unreadable value
    /// is reported and counts as 0 (the assigner writes a readable one at
    /// its next assignment).
    fn epoch_of(&self, meta: &ObjectMeta) -> u64 {
        let Some(value) = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(self.names.epoch_annotation()))
        else {
            return 0;
        };
        value.parse().unwrap_or_else(|_| {
            tracing::warn!(
                annotation = self.names.epoch_annotation(),
                %value,
                object = meta.name.as_deref().unwrap_or_default(),
                "unreadable shard epoch; counted as 0"
            );
            0
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        self.released.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn guard() -> ShardGuard {
        ShardGuard::new(ShardNames::new("op").unwrap(), "me").unwrap()
    }

    fn meta(shard: Option<&str>, drain: Option<&str>, epoch: Option<&str>) -> ObjectMeta {
        let mut labels = BTreeMap::new();
        if let Some(s) = shard {
            labels.insert("shard.operator-fsm.io/op".to_owned(), s.to_owned());
        }
        if let Some(d) = drain {
            labels.insert("drain.operator-fsm.io/op".to_owned(), d.to_owned());
        }
        ObjectMeta {
            name: Some("w".into()),
            uid: Some("uid-1".into()),
            labels: Some(labels),
            annotations: epoch.map(|e| {
                BTreeMap::from([("epoch.shard.operator-fsm.io/op".to_owned(), e.to_owned())])
            }),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn only_objects_labelled_for_this_shard_run() {
        let g = guard();
        assert_eq!(g.verdict(&meta(Some("me"), None, Some("1"))), Verdict::Run);
        assert_eq!(
            g.verdict(&meta(Some("other"), None, Some("1"))),
            Verdict::Refuse(Refusal::NotMine {
                labelled: Some("other".into())
            })
        );
        assert_eq!(
            g.verdict(&meta(None, None, None)),
            Verdict::Refuse(Refusal::NotMine { labelled: None })
        );
        assert_eq!(
            g.verdict(&meta(Some("me"), Some("other"), Some("1"))),
            Verdict::Release
        );
        // An unreadable epoch counts as 0, not as a failure.
        assert_eq!(g.verdict(&meta(Some("me"), None, Some("x"))), Verdict::Run);
    }

    #[test]
    fn a_stale_copy_after_a_release_is_refused_and_a_reassignment_runs() {
        let g = guard();
        // As `release` records it once the patch succeeded.
        g.lock().insert("uid-1".into(), 3);
        // The cache still holds the copy labelled for this shard, epoch 3
        // (or older): refused.
        for stale in ["3", "2"] {
            assert!(matches!(
                g.verdict(&meta(Some("me"), None, Some(stale))),
                Verdict::Refuse(Refusal::Stale { released: 3, .. })
            ));
        }
        // Assigned here again (epoch 5): it runs, and the release is
        // forgotten.
        assert_eq!(g.verdict(&meta(Some("me"), None, Some("5"))), Verdict::Run);
        assert!(g.lock().is_empty());
    }
}
