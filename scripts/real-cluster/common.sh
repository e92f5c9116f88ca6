# Shared settings of the real-cluster scripts; sourced, not run.
#
# The binaries are built by scripts/real-apiserver/build, in its cache
# (FSM_REAL_APISERVER_DIR, default target/real-apiserver): one Debian source
# tree and one Go cache for the control plane and the node. Its helpers
# (log, die, ensure_packages, free_port, daemon, wait_for) are used here too.
#
# The cluster's own directory (default: target/real-cluster of the
# workspace; override with FSM_REAL_CLUSTER_DIR):
#   images/    the pause binary and the image archives `build` assembles
#   run/       the running cluster: certificates, etcd data, containerd's
#              root and state, the kubelet's root, CNI configuration and
#              IP allocations, logs, PIDs, the kubeconfig

LOG_TAG=real-cluster
source "$(dirname "${BASH_SOURCE[0]}")/../real-apiserver/common.sh"

CLUSTER="${FSM_REAL_CLUSTER_DIR:-$ROOT/target/real-cluster}"
IMAGES="$CLUSTER/images"
RUN="$CLUSTER/run"

# The node, its network and the images: fixed, since nothing else here uses
# them, and tests and a person may rely on them.
NODE_NAME=fsm-node
# The bridge the pods hang on; the node's own address on it is the node's
# InternalIP (the kubelet refuses a loopback address). Pods get addresses in
# 10.244.0.0/24, Services in 10.244.128.0/24. The Services' range is routed
# onto the bridge too, so a packet to a Service address that kube-proxy has
# no rule for stays on this machine instead of taking the default route; it
# is not inside the pods' subnet, so a pod sends such packets to its
# gateway (this machine, where kube-proxy's rules rewrite them) instead of
# asking the bridge for the address.
BRIDGE=fsm0
NODE_IP=10.244.0.1
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.244.128.0/24
# The images `build` assembles and `start` imports; the pause image is the
# sandbox image containerd is configured with (no name it would pull).
PAUSE_IMAGE=fsm.local/pause:3.4.1
BUSYBOX_IMAGE=fsm.local/busybox:1.35
# The WebPage example's server image (examples::webpage::NGINX_IMAGE,
# `nginx:1.27`, which the CRI resolves to this name): here the same
# busybox, its httpd serving nginx's document root /usr/share/nginx/html on
# port 80, where the example mounts the page. Only the name is nginx's: the
# example's pods then run and serve their page with nothing pulled.
WEBPAGE_SERVER_IMAGE=docker.io/library/nginx:1.27
# The demo's workloads (examples/src/demo), under exactly the names the
# examples run, each a busybox stand-in doing what its operator expects of
# the real one (build assembles them; docs/testing.md lists them). The
# augmented Keycloak's and the kits' names hold digests of the demo's specs
# (mutable_jar::BuildPlan, integration::kit_image):
# examples::demo::scenario::workload_images lists the same names, and a test
# of the examples checks that this list has every one.
#   Keycloak, stock and augmented: `build ...` completes, `start` serves 8080.
DEMO_KEYCLOAK_IMAGES=quay.io/keycloak/keycloak:26.0,registry.local/keycloak/sso-augmented:53bfadd142
#   The Camel K builder: completes, but for the demo's one scripted failure
#   (attempt 0 of orders' kit build fails, as the simulation plays it).
DEMO_BUILDER_IMAGE=registry.local/camel-k/builder:2
#   The kits: orders', billing's before and after its routes change; serve 8080.
DEMO_KIT_IMAGES=registry.local/camel-k/kit:f9964817c7be,registry.local/camel-k/kit:a30999a1c911,registry.local/camel-k/kit:0211c8605e48
#   The WebPage's smoke test's curl: `--fail http://SERVICE/` fetched with
#   busybox wget, the Service's address from the pod's environment (no DNS).
DEMO_CURL_IMAGE=docker.io/curlimages/curl:8.10.1
#   The shop's five versions: serve 8080.
DEMO_SHOP_IMAGES=example.com/shop:v1,example.com/shop:v2,example.com/shop:v3,example.com/shop:v4,example.com/shop:v5
# The archives `build` writes into images/ and `start` imports.
IMAGE_ARCHIVES=(pause busybox webpage-server demo-keycloak demo-builder demo-kits demo-curl demo-shop)
# The kubelet's binary, the scheduler's and kube-proxy's, built with the
# control plane's.
NODE_COMMANDS=(cmd/kubelet cmd/kube-scheduler cmd/kube-proxy)
# What the node needs from Debian: the runtime, the CNI plugins, the
# packet filter kube-proxy programs, busybox for the workload image, a
# static libc for the pause binary, mount tools for the cleanup.
NODE_PACKAGES=(containerd runc containernetworking-plugins iptables conntrack
  busybox-static gcc libc6-dev util-linux)
CNI_BIN=/usr/lib/cni
CONTAINERD_SOCK="$RUN/containerd/containerd.sock"

# The daemons in start order; `stop` stops them in reverse.
DAEMONS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy)

ctr_() { ctr --address "$CONTAINERD_SOCK" -n k8s.io "$@"; }
