#!/usr/bin/env bash
# Captures, for fsm-testkit/src/protobuf's decoder tests, the protobuf body
# that `kubectl create <generator>` sends (`-v=9` logs it, here against the
# server of $KUBECONFIG with --dry-run=server, so nothing is created) and
# the JSON of the same command with --dry-run=client -o json (what a JSON
# body would carry). Usage: KUBECONFIG=... scripts/capture-kubectl-protobuf.sh OUTDIR
set -euo pipefail
out=${1:?OUTDIR}
capture() {
  local name=$1; shift
  kubectl create "$@" --dry-run=server -v=9 2>&1 >/dev/null \
    | sed -n '/"Request Body"/,/^ >/p' | grep -E '^\s+[0-9a-f]{8}  ' \
    | cut -c12-60 | xxd -r -p > "$out/$name.pb"
  kubectl create "$@" --dry-run=client -o json > "$out/$name.json"
}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf 'hello\n' > "$tmp/file.txt"
openssl req -x509 -newkey rsa:1024 -nodes -keyout "$tmp/tls.key" -out "$tmp/tls.crt" -subj /CN=x -days 1 2>/dev/null
capture configmap configmap i15cap-cm --from-literal=a=b --from-file="$tmp/file.txt" -n default
capture secret-generic secret generic i15cap-sec --from-literal=user=admin --type=Opaque -n default
capture secret-tls secret tls i15cap-tls --cert="$tmp/tls.crt" --key="$tmp/tls.key" -n default
capture deployment deployment i15cap-dep --image=nginx:1.25 --replicas=2 --port=80 -n default
capture service-nodeport service nodeport i15cap-np --tcp=80:8080 --node-port=30080 -n default
capture job job i15cap-job --image=busybox -n default
capture role role i15cap-role --verb=get,list --resource=pods,configmaps --resource-name=x -n default
capture clusterrole-aggregation clusterrole i15cap-agg --aggregation-rule=rbac.example.com/aggregate=true
