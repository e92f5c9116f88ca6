# Shared settings of the real-apiserver scripts; sourced, not run.
#
# Everything lives under one cache directory (default: target/real-apiserver
# of the workspace; override with FSM_REAL_APISERVER_DIR):
#   apt/       a private apt configuration with the release's deb-src line
#   src/       the downloaded Debian source package and its unpacked tree
#   gocache/   Go's build cache
#   bin/       the built kube-apiserver and kube-controller-manager (reused)
#   run/       the running cluster: etcd data, certificates, logs, PIDs,
#              the kubeconfig

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${FSM_REAL_APISERVER_DIR:-$ROOT/target/real-apiserver}"
BIN="$CACHE/bin"
RUN="$CACHE/run"
GO_ROOT=/usr/lib/go-1.19

log() { echo "[real-apiserver] $*" >&2; }
die() { log "error: $*"; exit 1; }
