#!/usr/bin/env bash
# Runs the end-to-end benchmark: operator-fsm, a hand-written kube-rs
# operator and kopf, side by side. Arguments go to the driver, e.g.
#   bench/run.sh --n 100,1000
#   bench/run.sh --n 100,1000 --impls deps   # the dependents workload
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
    --bin bench-dependents-operator

# The driver kills its children when a run ends; on an interrupted run the
# trap ends its whole process group (the driver, the server, the operator).
setsid "$CARGO_TARGET_DIR/release/bench" --python "$venv/bin/python" "$@" &
driver=$!
trap 'kill -- -"$driver" 2>/dev/null || true' INT TERM EXIT
wait "$driver"
