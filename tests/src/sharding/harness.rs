//! The proof's and the benchmark's harness: the embedded API server (in
//! this process, served over HTTP to the replicas, its request log kept
//! whole), the [ledger](super::ledger), `shard-operator` replica processes
//! started, SIGTERMed and SIGKILLed by name, and their figures (CPU time
//! and peak RSS from `/proc`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use fsm_testkit::{ApiServer, HttpServer, ServerConfig};
use futures::{StreamExt, TryStreamExt};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use kube::{CustomResourceExt, ResourceExt};

use super::ledger::{Ledger, now_us};
use super::machine::{DONE, OPERATOR, Order, OrderSpec};

/// The namespace of the objects and the Leases.
pub const NS: &str = "default";

/// The label naming an object's shard (the sharding contract).
#[must_use]
pub fn shard_label() -> String {
    format!("shard.operator-fsm.io/{OPERATOR}")
}

/// The label asking an object's owner to let it go.
#[must_use]
pub fn drain_label() -> String {
    format!("drain.operator-fsm.io/{OPERATOR}")
}

/// How the replicas split the work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Election {
    /// `run --shards --shard-lease NAME`: each replica owns a shard.
    Sharded,
    /// `run --leader-elect`: one replica does all the work, the others wait.
    Leader,
}

impl Election {
    /// From `PROOF_ELECTION` (`leader` or `sharded`, the default).
    #[must_use]
    pub fn from_env() -> Election {
        match std::env::var("PROOF_ELECTION").as_deref() {
            Ok("leader") => Election::Leader,
            _ => Election::Sharded,
        }
    }
}

/// A numeric knob from the environment.
///
/// # Panics
/// When the variable is set but not a number (a mistyped knob must not run
/// the default silently).
#[must_use]
pub fn knob(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// A replica's figures when it stopped (or when read).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures {
    /// User + system CPU time, seconds.
    pub cpu_s: f64,
    /// Peak resident set size (`VmHWM`), KiB.
    pub peak_rss_kib: u64,
}

/// CPU time and peak RSS of process `pid`, from `/proc`; `None` once it
/// has exited. CPU ticks are `USER_HZ` (100 on Linux).
#[must_use]
pub fn figures(pid: u32) -> Option<Figures> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // After the name: state is field 3 of proc(5), utime 14, stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let peak_rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())?;
    Some(Figures {
        cpu_s: (utime + stime) as f64 / 100.0,
        peak_rss_kib,
    })
}

/// How a replica stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// SIGKILL.
    Killed,
    /// SIGTERM, then it exited by itself.
    Terminated,
}

/// A stopped replica.
#[derive(Clone, Debug)]
pub struct Stopped {
    /// How.
    pub how: Stop,
    /// When it was gone (reaped), microseconds since the epoch.
    pub at_us: i64,
    /// Its figures just before the signal.
    pub figures: Figures,
    /// Its exit status.
    pub status: Option<std::process::ExitStatus>,
}

struct Replica {
    name: String,
    child: Child,
    /// Where it serves `/metrics`.
    http: SocketAddr,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server, the ledger and the replicas of one run. Everything stops
/// when it is dropped (replicas are SIGKILLed and reaped).
pub struct Harness {
    /// The embedded server (its request log).
    pub server: ApiServer,
    http: HttpServer,
    /// A client of the server (in-process).
    pub client: kube::Client,
    /// The ledger.
    pub ledger: Ledger,
    ledger_url: String,
    ledger_task: tokio::task::JoinHandle<()>,
    operator: PathBuf,
    log: PathBuf,
    election: Election,
    lease_secs: u64,
    work_ms: u64,
    running: Vec<Replica>,
    /// The replicas stopped so far, by name.
    pub stopped: BTreeMap<String, Stopped>,
    created: usize,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.running.clear();
        self.ledger_task.abort();
    }
}

impl Harness {
    /// Starts the server (keeping every request record), the ledger, and
    /// installs the `Order` CRD. `operator` is the `shard-operator`
    /// binary; its replicas' stderr goes to `log`.
    ///
    /// # Panics
    /// When any of it cannot start.
    pub async fn start(
        operator: &Path,
        log: &Path,
        election: Election,
        lease_secs: u64,
        work_ms: u64,
    ) -> Harness {
        let server = ApiServer::with_config(ServerConfig {
            request_log_size: 50_000_000,
            ..ServerConfig::default()
        });
        let http = server.serve_http().await.expect("the server listens");
        let client = server.client();
        install_crd(&client, &Order::crd()).await;
        let ledger = Ledger::default();
        let (ledger_url, ledger_task) = ledger.serve().await.expect("the ledger listens");
        Harness {
            server,
            http,
            client,
            ledger,
            ledger_url,
            ledger_task,
            operator: operator.to_owned(),
            log: log.to_owned(),
            election,
            lease_secs,
            work_ms,
            running: Vec::new(),
            stopped: BTreeMap::new(),
            created: 0,
        }
    }

    /// How the replicas split the work.
    #[must_use]
    pub fn election(&self) -> Election {
        self.election
    }

    /// The running replicas' names.
    #[must_use]
    pub fn running(&self) -> Vec<String> {
        self.running.iter().map(|r| r.name.clone()).collect()
    }

    /// Starts replica `name` (its shard Lease's name, or its identity in
    /// the leader Lease).
    ///
    /// # Panics
    /// When the process cannot start.
    pub fn start_replica(&mut self, name: &str) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("the operators' log file");
        let lease_secs = self.lease_secs.to_string();
        // A port free now (the operator binds it a moment later).
        let http = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free local port");
        let mut command = Command::new(&self.operator);
        command
            .args(["run", "--kubeconfig"])
            .arg(self.http.kubeconfig())
            .args([
                "-n",
                NS,
                "--lease-namespace",
                NS,
                "--lease-duration",
                &lease_secs,
            ])
            .args(["--ledger-url", &self.ledger_url, "--replica", name])
            .args(["--work-ms", &self.work_ms.to_string()])
            .args(["--http-addr", &http.to_string()])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        match self.election {
            Election::Sharded => command.args(["--shards", "--shard-lease", name]),
            Election::Leader => command.args(["--leader-elect", "--identity", name]),
        };
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.operator.display()));
        self.running.push(Replica {
            name: name.to_owned(),
            child,
            http,
        });
    }

    /// The running replica `name`'s figures now.
    #[must_use]
    pub fn figures(&self, name: &str) -> Option<Figures> {
        self.running
            .iter()
            .find(|r| r.name == name)
            .and_then(|r| figures(r.child.id()))
    }

    fn take(&mut self, name: &str) -> Replica {
        let at = self
            .running
            .iter()
            .position(|r| r.name == name)
            .unwrap_or_else(|| panic!("the replica {name} is not running"));
        self.running.remove(at)
    }

    /// SIGKILLs replica `name` and reaps it.
    ///
    /// # Panics
    /// When it is not running.
    pub fn kill(&mut self, name: &str) -> Stopped {
        let mut replica = self.take(name);
        let figures = figures(replica.child.id()).unwrap_or_default();
        let _ = replica.child.kill();
        let status = replica.child.wait().ok();
        let stopped = Stopped {
            how: Stop::Killed,
            at_us: now_us(),
            figures,
            status,
        };
        self.stopped.insert(name.to_owned(), stopped.clone());
        stopped
    }

    /// SIGTERMs replica `name` and waits (at most `bound`) until it exits
    /// by itself.
    ///
    /// # Panics
    /// When it is not running or does not exit in time.
    pub async fn terminate(&mut self, name: &str, bound: Duration) -> Stopped {
        let mut replica = self.take(name);
        let figures = figures(replica.child.id()).unwrap_or_default();
        let sent = Command::new("kill")
            .args(["-TERM", &replica.child.id().to_string()])
            .status()
            .expect("kill(1)");
        assert!(sent.success(), "kill -TERM {name}: {sent}");
        let deadline = Instant::now() + bound;
        let status = loop {
            if let Ok(Some(status)) = replica.child.try_wait() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "{name} did not exit within {bound:?} of SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let stopped = Stopped {
            how: Stop::Terminated,
            at_us: now_us(),
            figures,
            status: Some(status),
        };
        self.stopped.insert(name.to_owned(), stopped.clone());
        stopped
    }

    /// Waits (at most `bound`) until every running replica holds its
    /// shard Lease (sharded), or one of them holds the leader Lease.
    ///
    /// # Errors
    /// What was still missing at the deadline.
    pub async fn wait_leases(&self, bound: Duration) -> Result<(), String> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), NS);
        let running = self.running();
        let deadline = Instant::now() + bound;
        loop {
            let held: BTreeSet<String> = leases
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .into_iter()
                .filter(|l| {
                    l.spec
                        .as_ref()
                        .and_then(|s| s.holder_identity.as_ref())
                        .is_some_and(|h| !h.is_empty())
                })
                .map(|l| match self.election {
                    Election::Sharded => l.name_any(),
                    Election::Leader => l.spec.and_then(|s| s.holder_identity).unwrap_or_default(),
                })
                .collect();
            let missing: Vec<&String> = match self.election {
                Election::Sharded => running.iter().filter(|r| !held.contains(*r)).collect(),
                Election::Leader if running.iter().any(|r| held.contains(r)) => Vec::new(),
                Election::Leader => running.iter().collect(),
            };
            if missing.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("no Lease held for {missing:?} (held: {held:?})"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The active assigner's ring, from the `/metrics` of the running
    /// replica that runs it: each shard Lease it sees and whether it gives
    /// that shard new objects. `None` while no running replica says it
    /// runs the assigner.
    pub async fn ring(&self) -> Option<BTreeMap<String, bool>> {
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        for replica in &self.running {
            let Ok(uri) = format!("http://{}/metrics", replica.http).parse::<http::Uri>() else {
                continue;
            };
            let Ok(response) = client.get(uri).await else {
                continue;
            };
            let Ok(body) = response.into_body().collect().await else {
                continue;
            };
            let text = String::from_utf8_lossy(&body.to_bytes()).into_owned();
            if let Some(ring) = parse_ring(&text) {
                return Some(ring);
            }
        }
        None
    }

    /// Waits (at most `bound`) until the active assigner gives new objects
    /// to every running replica and to no other (sharded runs; at once
    /// otherwise). A shard Lease joins the ring once the assigner has seen
    /// it renewed, so a steady wave created before that would be shared
    /// by fewer replicas than are running.
    ///
    /// # Errors
    /// The ring seen last.
    pub async fn wait_ring(&self, bound: Duration) -> Result<(), String> {
        if self.election == Election::Leader {
            return Ok(());
        }
        let running: BTreeSet<String> = self.running().into_iter().collect();
        let deadline = Instant::now() + bound;
        loop {
            let ring = self.ring().await;
            let members: Option<BTreeSet<String>> = ring.as_ref().map(|r| {
                r.iter()
                    .filter(|(_, member)| **member)
                    .map(|(shard, _)| shard.clone())
                    .collect()
            });
            if members.as_ref() == Some(&running) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "the assigner's ring is not {running:?} after {bound:?}: {ring:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Creates the next `count` Orders (`order-00000`, ...), 16 at a time;
    /// their names.
    ///
    /// # Panics
    /// When the server refuses one.
    pub async fn create_orders(&mut self, count: usize) -> BTreeSet<String> {
        let api: Api<Order> = Api::namespaced(self.client.clone(), NS);
        let names: Vec<String> = (self.created..self.created + count)
            .map(|i| format!("order-{i:05}"))
            .collect();
        self.created += count;
        futures::stream::iter(names.clone())
            .map(|name| {
                let api = api.clone();
                async move {
                    let order = Order::new(
                        &name,
                        OrderSpec {
                            item: format!("item of {name}"),
                        },
                    );
                    api.create(&PostParams::default(), &order).await
                }
            })
            .buffer_unordered(16)
            .try_for_each(|_| async { Ok(()) })
            .await
            .expect("the Orders are created");
        names.into_iter().collect()
    }

    /// All Orders.
    ///
    /// # Errors
    /// The server's.
    pub async fn orders(&self) -> Result<Vec<Order>, kube::Error> {
        let api: Api<Order> = Api::namespaced(self.client.clone(), NS);
        Ok(api.list(&ListParams::default()).await?.items)
    }

    /// Waits (at most `bound`) until every Order rests in `Done`.
    ///
    /// # Errors
    /// How many were not done at the deadline, and a few of them.
    pub async fn wait_done(&self, bound: Duration) -> Result<(), String> {
        let deadline = Instant::now() + bound;
        loop {
            let orders = self.orders().await.map_err(|e| e.to_string())?;
            let waiting: Vec<String> = orders
                .iter()
                .filter(|o| {
                    !o.record().is_some_and(|r| {
                        r.state == DONE && !r.is_unwinding() && r.next_attempt_at.is_none()
                    })
                })
                .map(|o| {
                    format!(
                        "{} ({:?})",
                        o.name_any(),
                        o.record().map(|r| (r.state, r.last_error))
                    )
                })
                .collect();
            if waiting.is_empty() && orders.len() == self.created {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} of {} Orders not done after {bound:?}: {:?}",
                    waiting.len(),
                    orders.len(),
                    &waiting[..waiting.len().min(10)]
                ));
            }
            // A list of every Order is not cheap for the server (in this
            // process) at thousands of Orders: look less often then.
            tokio::time::sleep(poll_interval(self.created)).await;
        }
    }

    /// Waits (at most `bound`) until the ledger has received `ends` end
    /// reports in all.
    pub async fn wait_ends(&self, ends: usize, bound: Duration) {
        let deadline = Instant::now() + bound;
        while self.ledger.ends() < ends && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Objects per shard label (sharded runs): label value → count, and
    /// the objects with no label or a drain label (key `""` and
    /// `"draining"`).
    ///
    /// # Errors
    /// The server's.
    pub async fn owners(&self) -> Result<BTreeMap<String, usize>, kube::Error> {
        let (shard, drain) = (shard_label(), drain_label());
        let mut owners = BTreeMap::new();
        for order in self.orders().await? {
            let labels = order.labels();
            let key = if labels.contains_key(&drain) {
                "draining".to_owned()
            } else {
                labels.get(&shard).cloned().unwrap_or_default()
            };
            *owners.entry(key).or_default() += 1;
        }
        Ok(owners)
    }

    /// Waits (at most `bound`) until every Order is labelled for a running
    /// replica, none is draining, and every running replica owns some
    /// (the assigner counts it in the ring) — sharded runs; at once
    /// otherwise.
    ///
    /// # Errors
    /// The owners seen last.
    pub async fn wait_settled(&self, bound: Duration) -> Result<(), String> {
        if self.election == Election::Leader {
            return Ok(());
        }
        let running: BTreeSet<String> = self.running().into_iter().collect();
        let deadline = Instant::now() + bound;
        loop {
            let owners = self.owners().await.map_err(|e| e.to_string())?;
            // Every Order with a live owner, and every live replica a
            // member of the ring (it owns some of the Orders).
            let all_owned = owners.keys().all(|o| running.contains(o));
            let all_members = owners.is_empty() || running.iter().all(|r| owners.contains_key(r));
            if all_owned && all_members {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "not settled on {running:?} after {bound:?}: {owners:?}"
                ));
            }
            tokio::time::sleep(poll_interval(self.created)).await;
        }
    }

    /// Orders labelled for `replica` that are not done yet: the workflows
    /// it holds in flight.
    ///
    /// # Errors
    /// The server's.
    pub async fn in_flight(&self, replica: &str) -> Result<usize, kube::Error> {
        let shard = shard_label();
        Ok(self
            .orders()
            .await?
            .iter()
            .filter(|o| match self.election {
                Election::Sharded => o.labels().get(&shard).map(String::as_str) == Some(replica),
                Election::Leader => true,
            })
            .filter(|o| o.record().is_none_or(|r| r.state != DONE))
            .count())
    }

    /// Fails when an operator process printed a panic.
    ///
    /// # Errors
    /// The log.
    pub fn check_no_panic(&self) -> Result<(), String> {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        if log.contains("panicked") {
            return Err(format!("an operator process panicked:\n{log}"));
        }
        Ok(())
    }
}

/// How often to list every Order while waiting: every half second, plus
/// half a second per thousand Orders.
fn poll_interval(orders: usize) -> Duration {
    Duration::from_millis(500 + orders as u64 / 2)
}

/// Installs `crd` and waits (at most 30 s) until its resource lists.
///
/// # Panics
/// When the server refuses it or does not serve it in time.
pub async fn install_crd(client: &kube::Client, crd: &CustomResourceDefinition) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.create(&PostParams::default(), crd)
        .await
        .expect("the CRD is created");
    let orders: Api<Order> = Api::namespaced(client.clone(), NS);
    let deadline = Instant::now() + Duration::from_secs(30);
    while orders.list(&ListParams::default().limit(1)).await.is_err() {
        assert!(Instant::now() < deadline, "the Order CRD is not served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The ring in a replica's `/metrics` text, if it runs the assigner:
/// `operator_fsm_shard_ring_member{operator, shard}` by shard, `true` for
/// 1.
fn parse_ring(text: &str) -> Option<BTreeMap<String, bool>> {
    let operator = format!("operator=\"{OPERATOR}\"");
    let active = format!("operator_fsm_shard_assigner_active{{{operator}}} 1");
    if !text.lines().any(|l| l == active) {
        return None;
    }
    let prefix = format!("operator_fsm_shard_ring_member{{{operator},shard=\"");
    Some(
        text.lines()
            .filter_map(|l| l.strip_prefix(&prefix))
            .filter_map(|rest| {
                let (shard, value) = rest.split_once("\"} ")?;
                Some((shard.to_owned(), value.trim() == "1"))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_is_read_from_the_active_assigner_only() {
        let active = format!(
            "# HELP x\n\
             operator_fsm_shard_assigner_active{{operator=\"{OPERATOR}\"}} 1\n\
             operator_fsm_shard_ring_member{{operator=\"{OPERATOR}\",shard=\"replica-1\"}} 1\n\
             operator_fsm_shard_ring_member{{operator=\"{OPERATOR}\",shard=\"replica-2\"}} 0\n"
        );
        let ring = parse_ring(&active).expect("the active assigner's ring");
        assert_eq!(
            ring,
            BTreeMap::from([
                ("replica-1".to_owned(), true),
                ("replica-2".to_owned(), false)
            ])
        );
        let idle = active.replace(
            "_active{operator=\"shard-proof\"} 1",
            "_active{operator=\"shard-proof\"} 0",
        );
        assert_ne!(idle, active);
        assert_eq!(parse_ring(&idle), None);
    }
}
