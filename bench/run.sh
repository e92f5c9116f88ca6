#!/usr/bin/env bash
# Runs the end-to-end benchmark: operator-fsm, a hand-written kube-rs
# operator and kopf, side by side. Arguments go to the driver, e.g.
#   bench/run.sh --n 100,1000
#   bench/run.sh --n 100,1000 --impls deps,hand-deps   # the dependents workload
#     # (fsm-kube's dependents, and the same written by hand with kube-rs)
#   bench/run.sh --n 100,1000 --server embedded,real
#     # also against a real kube-apiserver 1.20, a fresh one per run
#     # (scripts/real-apiserver/build first; the driver's instance lives in
#     # target/bench-real-apiserver unless --real-apiserver-dir says)
# See docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

# kopf and the kubernetes client, in a virtual environment of our own.
venv=target/bench-venv
if ! "$venv/bin/python" -c 'import kopf, kubernetes' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet kopf kubernetes
fi

cargo build --release -p fsm-testkit --bin fsm-apiserver \
    -p bench --bin bench --bin bench-fsm-operator --bin bench-hand-operator \
    --bin bench-dependents-operator --bin bench-hand-dependents-operator

# The driver kills its children when a run ends; on an interrupted run the
# trap ends its whole process group (the driver, the server, the operator)
# and stops a real kube-apiserver it started in its default directory (the
# scripts start those daemons in sessions of their own).
setsid "$CARGO_TARGET_DIR/release/bench" --python "$venv/bin/python" "$@" &
driver=$!
stop_all() {
    kill -- -"$driver" 2>/dev/null || true
    if [[ -d target/bench-real-apiserver/run ]]; then
        FSM_REAL_APISERVER_DIR=$PWD/target/bench-real-apiserver scripts/real-apiserver/stop || true
    fi
}
trap stop_all INT TERM EXIT
wait "$driver"
