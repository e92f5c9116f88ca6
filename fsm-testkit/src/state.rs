//! The state a server's requests share (the cluster, the request log, the
//! injected faults) and the settings it is built from. Everything that
//! serves or drives the server depends on it; it depends on none of them.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::cluster::Cluster;
use crate::faults::Faults;
use crate::log::RequestLog;

/// Settings of an [`ApiServer`](crate::ApiServer).
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// How many changes the watch history keeps; a watch from an older
    /// `resourceVersion` gets `410 Expired`.
    pub history_limit: usize,
    /// How many events a watcher may fall behind before its watch is closed.
    pub watch_buffer: usize,
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// How long a watch without `timeoutSeconds` lasts.
    pub default_watch_timeout: Duration,
    /// How many request records the log keeps (counts cover all requests).
    pub request_log_size: usize,
    /// Seed of uids and generated names (fixed seeds give reproducible names).
    pub seed: u64,
    /// How long after a namespace is deleted the namespace controller
    /// empties and removes it (meanwhile it is `Terminating` and refuses new
    /// content, as on a real cluster).
    pub namespace_controller_delay: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            history_limit: 10_000,
            watch_buffer: 16_384,
            bookmark_interval: Duration::from_secs(10),
            default_watch_timeout: Duration::from_secs(1800),
            request_log_size: 10_000,
            seed: jiff::Timestamp::now().as_nanosecond().unsigned_abs() as u64,
            namespace_controller_delay: Duration::from_millis(500),
        }
    }
}

/// The state every request shares: what the server's handlers, the fault
/// injection and the simulated controllers act on.
#[derive(Debug)]
pub struct Shared {
    cluster: Mutex<Cluster>,
    /// The request log.
    pub log: RequestLog,
    /// The settings.
    pub config: ServerConfig,
    /// Injected faults.
    pub faults: Faults,
}

impl Shared {
    /// The state of a new server with `config`: the built-in resources and
    /// namespaces, an empty log, no faults.
    #[must_use]
    pub fn new(config: ServerConfig) -> Self {
        let cluster = Cluster::new(config.history_limit, config.watch_buffer, config.seed);
        Self {
            cluster: Mutex::new(cluster),
            log: RequestLog::new(config.request_log_size),
            faults: Faults::new(config.seed),
            config,
        }
    }

    /// The cluster, locked. Verbs are synchronous, so the lock is never held
    /// across an await.
    pub fn cluster(&self) -> MutexGuard<'_, Cluster> {
        // Library code does not panic under this lock; recover if a test did.
        self.cluster.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
