//! The Lease loop: acquire the Lease when it is free or expired, renew it
//! while held, and move this replica's [`Leadership`] deadline with every
//! renewal that succeeded.
//!
//! Expiry of another replica's hold is judged on this process's monotonic
//! clock, from when this replica last saw the Lease *change* (as client-go
//! does), never from the timestamps written in it: clocks of different
//! machines need not agree, only run at about the same rate.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use tokio::time::Instant;

use super::leadership::DeadlineSender;
use super::{LeaderError, LeaseTiming};

/// What one look at the Lease found.
#[derive(Debug, PartialEq)]
enum Attempt {
    /// This replica holds it (acquired or renewed just now).
    Leading,
    /// Another replica holds it; look again after `retry_in`.
    Following { holder: String, retry_in: Duration },
}

/// The parts of a Lease whose change shows its holder is alive.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Fingerprint {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    acquire_time: Option<MicroTime>,
    transitions: Option<i32>,
    duration_seconds: Option<i32>,
}

impl Fingerprint {
    pub(crate) fn of(spec: &LeaseSpec) -> Fingerprint {
        Fingerprint {
            holder: spec.holder_identity.clone(),
            renew_time: spec.renew_time.clone(),
            acquire_time: spec.acquire_time.clone(),
            transitions: spec.lease_transitions,
            duration_seconds: spec.lease_duration_seconds,
        }
    }
}

/// When this replica last saw the Lease change.
#[derive(Debug)]
struct Seen {
    fingerprint: Fingerprint,
    at: Instant,
}

/// Keeps one replica's side of one Lease.
pub(crate) struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timing: LeaseTiming,
    seen: Option<Seen>,
    /// Labels the Lease carries (a shard Lease's ring label); kept on
    /// every write.
    labels: BTreeMap<String, String>,
}

impl Elector {
    pub(crate) fn new(api: Api<Lease>, name: &str, identity: &str, timing: LeaseTiming) -> Self {
        Elector {
            api,
            name: name.to_owned(),
            identity: identity.to_owned(),
            timing,
            seen: None,
            labels: BTreeMap::new(),
        }
    }

    /// Writes `labels` on the Lease when creating or renewing it.
    pub(crate) fn with_labels(mut self, labels: BTreeMap<String, String>) -> Self {
        self.labels = labels;
        self
    }

    /// Runs until the API server refuses access for good; moves `hold`.
    pub(crate) async fn run(&mut self, hold: &DeadlineSender) -> Result<(), LeaderError> {
        let mut leading = false;
        loop {
            let sent = Instant::now();
            // While leading, an attempt may take no longer than the hold
            // has left: a renewal stuck in the network must not keep a
            // replica acting past its deadline.
            let budget = hold
                .deadline()
                .filter(|deadline| *deadline > sent)
                .map_or(self.timing.renew_every, |deadline| deadline - sent);
            let attempt = tokio::time::timeout(budget, self.try_acquire_or_renew()).await;
            let wait = match attempt {
                Ok(Ok(Attempt::Leading)) => {
                    hold.hold_until(sent + self.timing.trusted_for);
                    if !leading {
                        tracing::info!(lease = %self.name, identity = %self.identity, "acquired the Lease");
                        leading = true;
                    }
                    self.timing.renew_every
                }
                Ok(Ok(Attempt::Following { holder, retry_in })) => {
                    if leading {
                        tracing::warn!(lease = %self.name, identity = %self.identity, %holder, "the Lease is held by another replica now");
                        leading = false;
                    }
                    hold.release();
                    retry_in
                }
                Ok(Err(error)) if is_forbidden(&error) => {
                    hold.release();
                    return Err(LeaderError::Forbidden {
                        name: self.name.clone(),
                        source: error,
                    });
                }
                Ok(Err(error)) => {
                    tracing::warn!(lease = %self.name, identity = %self.identity, %error, "could not read or write the Lease; trying again");
                    if hold.deadline().is_some_and(|d| d <= Instant::now()) {
                        hold.release();
                        leading = false;
                    }
                    self.timing.renew_every / 2
                }
                Err(_) => {
                    if leading {
                        tracing::warn!(lease = %self.name, identity = %self.identity, "no renewal within the trusted time; stepping down");
                        leading = false;
                    }
                    hold.release();
                    Duration::ZERO
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// One look at the Lease: create it, renew it, take it over when its
    /// holder's time is up, or follow.
    async fn try_acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        let Some(lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    labels: (!self.labels.is_empty()).then(|| self.labels.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.spec_for_me(&LeaseSpec::default())),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Attempt::Leading),
                Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(self.lost_race()),
                Err(error) => Err(error),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        if holder.as_deref() != Some(self.identity.as_str()) {
            let expires_in = self.foreign_expiry(&spec);
            if let Some(holder) = holder
                && !expires_in.is_zero()
            {
                return Ok(Attempt::Following {
                    holder,
                    retry_in: expires_in.min(self.timing.renew_every),
                });
            }
        }
        // Ours, free, or expired: written conditionally on the version just
        // read, so of two replicas taking it over at once one wins.
        let mut next = lease;
        next.spec = Some(self.spec_for_me(&spec));
        if !self.labels.is_empty() {
            next.metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .extend(self.labels.clone());
        }
        match self
            .api
            .replace(&self.name, &PostParams::default(), &next)
            .await
        {
            Ok(_) => Ok(Attempt::Leading),
            Err(kube::Error::Api(status)) if status.is_conflict() => Ok(self.lost_race()),
            Err(error) => Err(error),
        }
    }

    /// Gives the Lease up, if this replica holds it: the holder is cleared
    /// (conditionally on the version read), so that another replica takes
    /// it at its next look instead of waiting out the duration. The caller
    /// has stopped acting first.
    pub(crate) async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.renew_time = Some(MicroTime(jiff::Timestamp::now()));
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(()),
            // Someone wrote in between: it is not ours to clear any more.
            Err(kube::Error::Api(status)) if status.is_conflict() => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Someone else wrote the Lease first: follow, and look again soon.
    fn lost_race(&self) -> Attempt {
        Attempt::Following {
            holder: "another replica".to_owned(),
            retry_in: self.timing.renew_every / 4,
        }
    }

    /// How long until another holder's time is up, as this replica sees
    /// it: the Lease's duration after it was last seen to change.
    fn foreign_expiry(&mut self, spec: &LeaseSpec) -> Duration {
        let now = Instant::now();
        let fingerprint = Fingerprint::of(spec);
        let since = match &self.seen {
            Some(seen) if seen.fingerprint == fingerprint => seen.at,
            _ => {
                self.seen = Some(Seen {
                    fingerprint,
                    at: now,
                });
                now
            }
        };
        let duration = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.timing.duration, Duration::from_secs);
        (since + duration).saturating_duration_since(now)
    }

    /// The Lease's spec with this replica as holder, renewed now.
    fn spec_for_me(&self, previous: &LeaseSpec) -> LeaseSpec {
        let now = MicroTime(jiff::Timestamp::now());
        let renewing = previous.holder_identity.as_deref() == Some(self.identity.as_str());
        let had_holder = previous
            .holder_identity
            .as_deref()
            .is_some_and(|h| !h.is_empty());
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.timing.duration_seconds()),
            acquire_time: if renewing {
                previous.acquire_time.clone()
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(
                previous.lease_transitions.unwrap_or(0) + i32::from(!renewing && had_holder),
            ),
            ..previous.clone()
        }
    }
}

/// Access refused: retrying cannot help, the operator's RBAC is wrong.
fn is_forbidden(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 401 || status.code == 403)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leader::Leadership;
    use fsm_testkit::ApiServer;
    use fsm_testkit::faults::Fault;

    fn timing() -> LeaseTiming {
        LeaseTiming::new(Duration::from_secs(2))
    }

    fn elector(server: &ApiServer, identity: &str) -> Elector {
        Elector::new(
            Api::namespaced(server.client(), "default"),
            "op-leader",
            identity,
            timing(),
        )
    }

    #[tokio::test]
    async fn the_first_replica_creates_the_lease_and_renews_it() {
        let server = ApiServer::new();
        let mut a = elector(&server, "a");
        assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
        let first = a.api.get("op-leader").await.unwrap().spec.unwrap();
        assert_eq!(first.holder_identity.as_deref(), Some("a"));
        assert_eq!(first.lease_duration_seconds, Some(2));
        assert_eq!(first.lease_transitions, Some(0));
        assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
        let renewed = a.api.get("op-leader").await.unwrap().spec.unwrap();
        assert_eq!(renewed.acquire_time, first.acquire_time);
        assert!(renewed.renew_time > first.renew_time);
    }

    #[tokio::test]
    async fn another_replica_follows_until_the_lease_stops_changing_for_its_duration() {
        let server = ApiServer::new();
        let mut a = elector(&server, "a");
        let mut b = elector(&server, "b");
        a.try_acquire_or_renew().await.unwrap();
        let Attempt::Following { holder, retry_in } = b.try_acquire_or_renew().await.unwrap()
        else {
            panic!("b took a fresh lease");
        };
        assert_eq!(holder, "a");
        assert!(retry_in <= timing().renew_every, "{retry_in:?}");
        // a keeps renewing: b keeps following.
        a.try_acquire_or_renew().await.unwrap();
        assert!(matches!(
            b.try_acquire_or_renew().await.unwrap(),
            Attempt::Following { .. }
        ));
        // a stops; once b has seen no change for the duration, b takes it.
        let since = Instant::now();
        let taken = loop {
            match b.try_acquire_or_renew().await.unwrap() {
                Attempt::Leading => break Instant::now(),
                Attempt::Following { retry_in, .. } => tokio::time::sleep(retry_in).await,
            }
        };
        assert!(
            taken - since >= Duration::from_millis(1500),
            "{:?}",
            taken - since
        );
        let spec = b.api.get("op-leader").await.unwrap().spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("b"));
        assert_eq!(spec.lease_transitions, Some(1));
        // a comes back: it follows now.
        assert!(matches!(
            a.try_acquire_or_renew().await.unwrap(),
            Attempt::Following { holder, .. } if holder == "b"
        ));
    }

    #[tokio::test]
    async fn of_two_replicas_taking_a_free_lease_at_once_one_wins() {
        let server = ApiServer::new();
        let mut a = elector(&server, "a");
        a.try_acquire_or_renew().await.unwrap();
        // Released by its holder: free for anyone.
        let mut lease = a.api.get("op-leader").await.unwrap();
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
        }
        a.api
            .replace("op-leader", &PostParams::default(), &lease)
            .await
            .unwrap();
        let mut b = elector(&server, "b");
        let mut c = elector(&server, "c");
        let (rb, rc) = tokio::join!(b.try_acquire_or_renew(), c.try_acquire_or_renew());
        let leaders = [rb.unwrap(), rc.unwrap()]
            .into_iter()
            .filter(|a| *a == Attempt::Leading)
            .count();
        assert_eq!(leaders, 1);
    }

    #[tokio::test]
    async fn the_running_elector_holds_and_a_stopped_one_lapses() {
        let server = ApiServer::new();
        let (hold, leadership) = Leadership::channel("a");
        let mut a = elector(&server, "a");
        let task = tokio::spawn(async move { a.run(&hold).await });
        let mut watcher = leadership.clone();
        while !watcher.is_held() {
            assert!(watcher.changed().await);
        }
        let remaining = leadership.remaining().unwrap();
        assert!(remaining <= timing().trusted_for, "{remaining:?}");
        task.abort();
        // Nobody renews: the hold lapses by the clock alone.
        tokio::time::sleep(timing().trusted_for).await;
        assert!(!leadership.is_held());
    }

    #[tokio::test]
    async fn a_released_lease_is_taken_at_once() {
        let server = ApiServer::new();
        let mut a = elector(&server, "a");
        let mut b = elector(&server, "b");
        a.try_acquire_or_renew().await.unwrap();
        assert!(matches!(
            b.try_acquire_or_renew().await.unwrap(),
            Attempt::Following { .. }
        ));
        a.release().await.unwrap();
        let spec = a.api.get("op-leader").await.unwrap().spec.unwrap();
        assert_eq!(spec.holder_identity, None);
        // No waiting out the duration.
        assert_eq!(b.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
        // Releasing a Lease held by another replica changes nothing.
        a.release().await.unwrap();
        let spec = b.api.get("op-leader").await.unwrap().spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    }

    #[tokio::test]
    async fn refused_access_is_an_error_not_a_retry() {
        let server = ApiServer::new();
        server.faults().add(Fault::error(403).resource("leases"));
        let (hold, _leadership) = Leadership::channel("a");
        let error = elector(&server, "a").run(&hold).await.unwrap_err();
        assert!(error.to_string().contains("op-leader"), "{error}");
    }
}
