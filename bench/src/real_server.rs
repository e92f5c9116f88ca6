//! A fresh real kube-apiserver 1.20 (with etcd and the controller-manager's
//! garbage collector, namespace and service-account controllers) for one
//! benchmark run, through `scripts/real-apiserver/start` and `stop`, with
//! the operator's requests audited under a user of its own
//! ([`OPERATOR_USER`], see [`crate::audit`]).
//!
//! The instance lives in a directory of the driver's own
//! (`FSM_REAL_APISERVER_DIR`), so it never meets another instance on the
//! machine; its `bin/` is a link to the shared build when it has none.

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
    /// `start` failed: its status and what it said.
    #[error("scripts/real-apiserver/start failed ({0}): {1}")]
    Start(std::process::ExitStatus, String),
    /// No kube-apiserver binaries to run.
    #[error("no kube-apiserver build in {0}: run scripts/real-apiserver/build")]
    NoBuild(PathBuf),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RealServerError {
    let what = what.into();
    move |source| RealServerError::Io { what, source }
}

/// The workspace's `scripts/real-apiserver/NAME`.
fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scripts/real-apiserver")
        .join(name)
}

/// A running instance; dropping it stops it and removes its state.
#[derive(Debug)]
pub struct RealServer {
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
        stop(dir);
        let output = tokio::process::Command::new(script("start"))
            .env("FSM_REAL_APISERVER_DIR", dir)
            .env("FSM_REAL_APISERVER_AUDIT_USER", OPERATOR_USER)
            .output()
            .await
            .map_err(io("running scripts/real-apiserver/start"))?;
        let said = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        if !output.status.success() {
            return Err(RealServerError::Start(output.status, said));
        }
        // "[real-apiserver] ready in …s: …"
        eprintln!("{said}");
        let run = dir.join("run");
        Ok(RealServer {
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
        stop(&self.dir);
    }
}

/// Runs `scripts/real-apiserver/stop` for `dir` (nothing when nothing runs).
fn stop(dir: &Path) {
    let status = std::process::Command::new(script("stop"))
        .env("FSM_REAL_APISERVER_DIR", dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    if let Err(error) = status {
        tracing::warn!(%error, dir = %dir.display(), "could not stop the real kube-apiserver");
    }
}
