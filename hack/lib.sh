# Shared paths for the hack/ scripts. Source it; it defines variables only.
# shellcheck shell=bash
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HACK_DIR/.." && pwd)"
# shellcheck source=versions.env
. "$HACK_DIR/versions.env"
VERSIONS_STAMP="$(sha256sum "$HACK_DIR/versions.env" | cut -c1-12)"
# What is built (binaries, add-ons, base images, llama.cpp's tools) lives in the user's cache
# folder, each build in a folder keyed by its versions: a version bump builds afresh, and every
# checkout on the machine, a fresh clone's (CI's) too, reuses what is there.
CACHE_ROOT="${GRPO_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/grpo-operator}"
# What runs belongs to the checkout: its cluster's state, its engine, its logs (git-ignored).
STATE_ROOT="${GRPO_STATE_DIR:-$REPO_ROOT/.cache}"
BIN_DIR="$CACHE_ROOT/bin-$VERSIONS_STAMP"
# The real node's binaries (hack/build-node-binaries.sh): kubelet, kube-proxy, pause. Their own
# cache root, so a checkout that shares another's control-plane binaries can build them apart.
# shellcheck source=node/versions.env
. "$HACK_DIR/node/versions.env"
NODE_CACHE_ROOT="${GRPO_NODE_CACHE_DIR:-$CACHE_ROOT}"
NODE_BIN_DIR="$NODE_CACHE_ROOT/node-$(cat "$HACK_DIR/versions.env" "$HACK_DIR/node/versions.env" | sha256sum | cut -c1-12)"
# The node's NetworkPolicy enforcer (kube-router's firewall), cached by its own version.
# shellcheck source=node/netpol.env
. "$HACK_DIR/node/netpol.env"
NETPOL_BIN_DIR="$NODE_CACHE_ROOT/kube-router-$KUBE_ROUTER_VERSION"
# Runtime state of a running local cluster (certs, pids, logs, kubeconfig).
CLUSTER_DIR="${GRPO_CLUSTER_DIR:-$STATE_ROOT/cluster}"
# The dockerd that hack/engine-up.sh starts where no engine runs: its pid file and log.
ENGINE_DIR="${GRPO_ENGINE_DIR:-$STATE_ROOT/engine}"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false

# Loopback ports of the local cluster. Chosen away from the components' defaults (2379, 6443,
# 10257, 10259, 8080, 8265, ...) so a developer's own cluster or Ray can run next to it.
# GRPO_PORT_OFFSET shifts every default at once, for a second cluster beside the first
# (`make demo` runs its own at +500, so the tests never meet it). No two defaults below differ by a
# multiple of 500 up to 10000, so clusters at any such offsets (500, 1000, ... 10000) never share
# a port: keep it so when adding one.
PORT_OFFSET="${GRPO_PORT_OFFSET:-0}"
ETCD_PORT="${GRPO_ETCD_PORT:-$((12379 + PORT_OFFSET))}"
ETCD_PEER_PORT="${GRPO_ETCD_PEER_PORT:-$((12380 + PORT_OFFSET))}"
APISERVER_PORT="${GRPO_APISERVER_PORT:-$((16443 + PORT_OFFSET))}"
CONTROLLER_MANAGER_PORT="${GRPO_CONTROLLER_MANAGER_PORT:-$((17257 + PORT_OFFSET))}"
SCHEDULER_PORT="${GRPO_SCHEDULER_PORT:-$((17259 + PORT_OFFSET))}"
KWOK_PORT="${GRPO_KWOK_PORT:-$((17247 + PORT_OFFSET))}"
KUBERAY_METRICS_PORT="${GRPO_KUBERAY_METRICS_PORT:-$((18080 + PORT_OFFSET))}"
KUBERAY_PROBE_PORT="${GRPO_KUBERAY_PROBE_PORT:-$((18082 + PORT_OFFSET))}"
RAYJOBAPI_PORT="${GRPO_RAYJOBAPI_PORT:-$((18265 + PORT_OFFSET))}"

# The real Ray head (hack/cluster-up.sh starts one for jobs routed to it, see hack/README.md).
# Every port Ray would otherwise take at its default (6379, 8265, 10001, 52365, 44217, 44227, ...)
# or pick at random is set here, so the head binds only these, all on loopback.
RAY_GCS_PORT="${GRPO_RAY_GCS_PORT:-$((16729 + PORT_OFFSET))}"
RAY_DASHBOARD_PORT="${GRPO_RAY_DASHBOARD_PORT:-$((18266 + PORT_OFFSET))}"
RAY_NODE_MANAGER_PORT="${GRPO_RAY_NODE_MANAGER_PORT:-$((16721 + PORT_OFFSET))}"
RAY_OBJECT_MANAGER_PORT="${GRPO_RAY_OBJECT_MANAGER_PORT:-$((16722 + PORT_OFFSET))}"
RAY_CLIENT_SERVER_PORT="${GRPO_RAY_CLIENT_SERVER_PORT:-$((16723 + PORT_OFFSET))}"
RAY_DASHBOARD_AGENT_PORT="${GRPO_RAY_DASHBOARD_AGENT_PORT:-$((16724 + PORT_OFFSET))}"
RAY_DASHBOARD_AGENT_GRPC_PORT="${GRPO_RAY_DASHBOARD_AGENT_GRPC_PORT:-$((16725 + PORT_OFFSET))}"
RAY_RUNTIME_ENV_AGENT_PORT="${GRPO_RAY_RUNTIME_ENV_AGENT_PORT:-$((16726 + PORT_OFFSET))}"
RAY_METRICS_EXPORT_PORT="${GRPO_RAY_METRICS_EXPORT_PORT:-$((16727 + PORT_OFFSET))}"
RAY_AUTOSCALER_METRICS_PORT="${GRPO_RAY_AUTOSCALER_METRICS_PORT:-$((16728 + PORT_OFFSET))}"
RAY_DASHBOARD_METRICS_PORT="${GRPO_RAY_DASHBOARD_METRICS_PORT:-$((16720 + PORT_OFFSET))}"
# Each Ray worker process (job supervisors, tasks, actors) listens on one port of this range.
RAY_MIN_WORKER_PORT="${GRPO_RAY_MIN_WORKER_PORT:-$((14600 + PORT_OFFSET))}"
RAY_MAX_WORKER_PORT="${GRPO_RAY_MAX_WORKER_PORT:-$((14699 + PORT_OFFSET))}"

# The real node of the cpu pool (hack/node-up.sh): a kubelet with containerd on this host.
# Its kubelet serves on the pod bridge's gateway address, never outside the host; the bridge, its
# pod subnet and the ports move with GRPO_PORT_OFFSET, so private clusters' nodes do not meet.
NODE_NAME="${GRPO_NODE_NAME:-real-cpu-0}"
# The real node's taint: only pods that tolerate it run containers there (the demo's and the
# real-pod tests'), so the rest of the suite's cpu-pool pods stay on the KWOK nodes as before.
NODE_TAINT="grpo.dev/real-node=true:NoSchedule"
NODE_BRIDGE="${GRPO_NODE_BRIDGE:-grpo$PORT_OFFSET}"
NODE_SUBNET_OCTET="$((200 + PORT_OFFSET / 500 % 50))"
NODE_POD_CIDR="${GRPO_NODE_POD_CIDR:-10.$NODE_SUBNET_OCTET.0.0/24}"
NODE_GATEWAY_IP="${GRPO_NODE_GATEWAY_IP:-10.$NODE_SUBNET_OCTET.0.1}"
KUBELET_PORT="${GRPO_KUBELET_PORT:-$((10250 + PORT_OFFSET))}"
KUBELET_HEALTHZ_PORT="${GRPO_KUBELET_HEALTHZ_PORT:-$((10248 + PORT_OFFSET))}"
COREDNS_HEALTH_PORT="${GRPO_COREDNS_HEALTH_PORT:-$((18281 + PORT_OFFSET))}"
# The node's image registry (Debian's docker-registry), on loopback: the engine pushes the built
# images there and the node's containerd pulls them, each layer once.
NODE_REGISTRY_PORT="${GRPO_NODE_REGISTRY_PORT:-$((15000 + PORT_OFFSET))}"
