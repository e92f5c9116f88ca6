//! A fresh real kube-apiserver 1.20 for one benchmark run, with the
//! operator's requests audited under a user of its own ([`OPERATOR_USER`],
//! see [`crate::audit`]), in one of two flavors ([`Flavor`]):
//!
//! - [`Flavor::Apiserver`]: etcd, the API server and the controller-manager's
//!   garbage collector, namespace and service-account controllers, through
//!   `scripts/real-apiserver/start` and `stop`; no nodes, so the driver
//!   simulates rollouts. The instance lives in a directory of the driver's
//!   own (`FSM_REAL_APISERVER_DIR`), so it never meets another instance on
//!   the machine; its `bin/` is a link to the shared build when it has
//!   none.
//! - [`Flavor::Cluster`]: the one-node cluster of `scripts/real-cluster`
//!   (all the controllers, a scheduler, a kubelet on containerd), where the
//!   Deployments' pods really run. There is one per machine: the run stops
//!   the one in its directory (`FSM_REAL_CLUSTER_DIR`) and starts it afresh
//!   with the audit user; the Go binaries come from
//!   `FSM_REAL_APISERVER_DIR` as the scripts find it in the environment.

use std::path::{Path, PathBuf};

/// The user the operator authenticates as, whose requests the audit log
/// records (and no one else's).
pub const OPERATOR_USER: &str = "bench-operator";

/// What went wrong starting or stopping the server.
#[derive(Debug, thiserror::Error)]
pub enum RealServerError {
    /// A script could not be run, or a file not read.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// `start` failed: which script, its status and what it said.
    #[error("{0} failed ({1}): {2}")]
    Start(String, std::process::ExitStatus, String),
    /// No kube-apiserver binaries to run.
    #[error("no kube-apiserver build in {0}: run scripts/real-apiserver/build")]
    NoBuild(PathBuf),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RealServerError {
    let what = what.into();
    move |source| RealServerError::Io { what, source }
}

/// Which scripts start the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// `scripts/real-apiserver`: the API server without nodes.
    Apiserver,
    /// `scripts/real-cluster`: the one-node cluster (root only).
    Cluster,
}

impl Flavor {
    /// The scripts' directory under `scripts/`.
    pub fn scripts(self) -> &'static str {
        match self {
            Flavor::Apiserver => "real-apiserver",
            Flavor::Cluster => "real-cluster",
        }
    }

    /// The variable that names the instance's directory.
    pub fn dir_var(self) -> &'static str {
        match self {
            Flavor::Apiserver => "FSM_REAL_APISERVER_DIR",
            Flavor::Cluster => "FSM_REAL_CLUSTER_DIR",
        }
    }

    /// The variable that names the audited user.
    pub fn audit_var(self) -> &'static str {
        match self {
            Flavor::Apiserver => "FSM_REAL_APISERVER_AUDIT_USER",
            Flavor::Cluster => "FSM_REAL_CLUSTER_AUDIT_USER",
        }
    }

    /// The workspace's `scripts/<flavor>/NAME`.
    pub fn script(self, name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../scripts")
            .join(self.scripts())
            .join(name)
    }
}

/// A running instance; dropping it stops it and removes its state.
#[derive(Debug)]
pub struct RealServer {
    flavor: Flavor,
    dir: PathBuf,
    /// The administrator's kubeconfig (the driver and the simulation).
    pub admin_kubeconfig: PathBuf,
    /// The operator's kubeconfig ([`OPERATOR_USER`]).
    pub operator_kubeconfig: PathBuf,
    /// The audit log of the operator's requests.
    pub audit_log: PathBuf,
}

impl RealServer {
    /// Starts a fresh instance in `dir` (stopping one left there by an
    /// interrupted run first). Without a `dir/bin`, links it to the build
    /// in `shared_build` (the directory `scripts/real-apiserver/build`
    /// filled, which has `bin/`).
    ///
    /// # Errors
    /// [`RealServerError`] when the scripts fail.
    pub async fn start(dir: &Path, shared_build: &Path) -> Result<RealServer, RealServerError> {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        let bin = dir.join("bin");
        if !bin.exists() {
            let shared = shared_build.join("bin");
            if !shared.join("kube-apiserver").exists() {
                return Err(RealServerError::NoBuild(shared_build.to_owned()));
            }
            let shared = std::fs::canonicalize(&shared).map_err(io("resolving the build"))?;
            std::os::unix::fs::symlink(&shared, &bin)
                .map_err(io(format!("linking {}", bin.display())))?;
        }
        Self::start_flavor(Flavor::Apiserver, dir).await
    }

    /// Starts the one-node cluster in `dir` afresh (`scripts/real-cluster`;
    /// stopping the one running there first, so its state starts empty),
    /// with the audit user. Root only, as the scripts are.
    ///
    /// # Errors
    /// [`RealServerError`] when the scripts fail.
    pub async fn start_cluster(dir: &Path) -> Result<RealServer, RealServerError> {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        Self::start_flavor(Flavor::Cluster, dir).await
    }

    async fn start_flavor(flavor: Flavor, dir: &Path) -> Result<RealServer, RealServerError> {
        stop(flavor, dir);
        let start = flavor.script("start");
        let output = tokio::process::Command::new(&start)
            .env(flavor.dir_var(), dir)
            .env(flavor.audit_var(), OPERATOR_USER)
            .output()
            .await
            .map_err(io(format!("running {}", start.display())))?;
        let said = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        if !output.status.success() {
            return Err(RealServerError::Start(
                start.display().to_string(),
                output.status,
                said,
            ));
        }
        // "[real-apiserver] ready in …s: …" (the cluster's: each step)
        eprintln!("{said}");
        let run = dir.join("run");
        Ok(RealServer {
            flavor,
            dir: dir.to_owned(),
            admin_kubeconfig: run.join("kubeconfig"),
            operator_kubeconfig: run.join(format!("{OPERATOR_USER}.kubeconfig")),
            audit_log: run.join("audit.log"),
        })
    }

    /// The PIDs of kube-apiserver and etcd (whose CPU is the server's).
    ///
    /// # Errors
    /// A PID file missing or malformed.
    pub fn server_pids(&self) -> Result<Vec<u32>, RealServerError> {
        ["kube-apiserver", "etcd"]
            .iter()
            .map(|name| {
                let path = self.dir.join("run").join(format!("{name}.pid"));
                let text = std::fs::read_to_string(&path)
                    .map_err(io(format!("reading {}", path.display())))?;
                text.trim().parse().map_err(|_| RealServerError::Io {
                    what: format!("reading {}", path.display()),
                    source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not a PID"),
                })
            })
            .collect()
    }
}

impl Drop for RealServer {
    fn drop(&mut self) {
        stop(self.flavor, &self.dir);
    }
}

/// Runs the flavor's `stop` for `dir` (nothing when nothing runs).
fn stop(flavor: Flavor, dir: &Path) {
    let status = std::process::Command::new(flavor.script("stop"))
        .env(flavor.dir_var(), dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    if let Err(error) = status {
        tracing::warn!(%error, dir = %dir.display(), scripts = flavor.scripts(), "could not stop the real kube-apiserver");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each flavor's scripts exist, and its `start` reads the variables
    /// the driver sets, and writes the files the driver reads, where it
    /// looks for them.
    #[test]
    fn each_flavor_names_its_scripts_and_their_variables() {
        for flavor in [Flavor::Apiserver, Flavor::Cluster] {
            for name in ["start", "stop"] {
                assert!(flavor.script(name).is_file(), "{flavor:?}: no {name}");
            }
            let start = std::fs::read_to_string(flavor.script("start")).expect("start");
            let common = std::fs::read_to_string(flavor.script("common.sh")).expect("common.sh");
            let both = format!("{common}{start}");
            // The operator's kubeconfig is $RUN/$AUDIT_USER.kubeconfig in
            // both (the cluster's `credential` writes $RUN/$1.kubeconfig).
            for needed in [flavor.dir_var(), flavor.audit_var(), "$RUN/audit.log"] {
                assert!(
                    both.contains(needed),
                    "{flavor:?}: {needed} not in its scripts"
                );
            }
        }
        assert_ne!(Flavor::Apiserver.dir_var(), Flavor::Cluster.dir_var());
    }
}
