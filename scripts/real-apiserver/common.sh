# Shared settings and helpers of the real-apiserver scripts (and of
# scripts/real-cluster, which builds in the same cache); sourced, not run.
#
# Everything lives under one cache directory (default: target/real-apiserver
# of the workspace; override with FSM_REAL_APISERVER_DIR):
#   apt/       a private apt configuration with the release's deb-src line
#   src/       the downloaded Debian source package and its unpacked tree
#   gocache/   Go's build cache
#   bin/       the built kube-apiserver and kube-controller-manager (reused),
#              and whatever more `build cmd/NAME...` was asked for
#   run/       the running cluster: etcd data, certificates, logs, PIDs,
#              the kubeconfig

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${FSM_REAL_APISERVER_DIR:-$ROOT/target/real-apiserver}"
BIN="$CACHE/bin"
RUN="$CACHE/run"
GO_ROOT=/usr/lib/go-1.19

log() { echo "[${LOG_TAG:-real-apiserver}] $*" >&2; }
die() { log "error: $*"; exit 1; }

# Installs the Debian packages named that are missing, from the system's own
# apt lists (updated once if they are too old to have them).
ensure_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null ||
    { apt-get update >/dev/null && apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
}

# A free TCP port on 127.0.0.1, not among those in $taken (the caller adds
# each port it keeps: this runs in a subshell). Picked below the kernel's
# ephemeral range (32768 and up), where outgoing connections take their
# local ports, and free in every socket state, not only unused by listeners.
taken=()
free_port() {
  local p
  for _ in $(seq 100); do
    p=$(shuf -i 15000-32000 -n 1)
    [[ " ${taken[*]} " == *" $p "* ]] && continue
    if ! ss -Htan "sport = :$p" | grep -q .; then
      echo "$p"
      return
    fi
  done
  die "no free port found"
}

# Start a daemon in its own session, logging to $RUN/NAME.log, PID to NAME.pid.
daemon() {
  local name=$1
  shift
  setsid "$@" >"$RUN/$name.log" 2>&1 </dev/null &
  echo $! >"$RUN/$name.pid"
}

# Wait (bounded) until a command succeeds, or fail with the daemon's log.
wait_for() {
  local what=$1 name=$2 seconds=$3
  shift 3
  for _ in $(seq $((seconds * 4))); do
    "$@" >/dev/null 2>&1 && return 0
    kill -0 "$(cat "$RUN/$name.pid")" 2>/dev/null ||
      { tail -n 30 "$RUN/$name.log" >&2; die "$name exited while waiting for $what"; }
    sleep 0.25
  done
  tail -n 30 "$RUN/$name.log" >&2
  die "timed out after ${seconds}s waiting for $what"
}
