#!/usr/bin/env bash
# The suite's `kind` backend (`make e2e-kind`). A kind cluster provides the real control plane:
# kube-apiserver, etcd, controller manager and scheduler as static pods of kubeadm on one kind node,
# a node image made here (hack/kind-node-image.sh) and run by kind's own engine (hack/kind-lib.sh).
# The node is cordoned so that test pods land on the same KWOK node pools as on the local backend,
# and the same out-of-cluster KWOK, KubeRay operator, fake Ray job API, Ray head and volume
# provisioner run against it.
#
# Its state (kubeconfig, pids, logs, cluster.env) is in $GRPO_KIND_CLUSTER_DIR, by default
# .cache/kind of the checkout (or under GRPO_KIND_CACHE_DIR), apart from the local cluster's.
set -euo pipefail
HACK="$(cd "$(dirname "$0")" && pwd)"
. "$HACK/lib.sh"
. "$HACK/kind-lib.sh"
export GRPO_CLUSTER_DIR="$KIND_CLUSTER_DIR"
CLUSTER_DIR="$KIND_CLUSTER_DIR"
. "$HACK/cluster-lib.sh"
hold_cluster_lock "$@"
started=$SECONDS

"$HACK_DIR/kind-node-image.sh"
mkdir -p "$CLUSTER_DIR" "$LOG_DIR"

if "$KIND" get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER_NAME"; then
  say "kind cluster $KIND_CLUSTER_NAME exists; using it"
  "$KIND" export kubeconfig --name "$KIND_CLUSTER_NAME" --kubeconfig "$KUBECONFIG_PATH" 2>/dev/null
else
  say "creating kind cluster $KIND_CLUSTER_NAME from $KIND_NODE_IMAGE (2-8 min: kubeadm on a busy 2-core machine)"
  create_started=$SECONDS
  # kubeadm takes its images from the node's own store (grpo-local/..., loaded at boot), and the
  # kubelet runs on the host's cgroup v1 where it must (failCgroupV1: false). kubeadm's timeouts
  # are raised from 4 min and 1 min: on 2 busy cores the API server's first start alone can take
  # minutes.
  cat >"$CLUSTER_DIR/kind-config.yaml" <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  apiServerAddress: 127.0.0.1
nodes:
  - role: control-plane
    image: $KIND_NODE_IMAGE
kubeadmConfigPatches:
  - |
    kind: ClusterConfiguration
    imageRepository: grpo-local
    etcd:
      local:
        imageTag: $ETCD_VERSION
    dns:
      imageTag: $COREDNS_VERSION
  - |
    kind: InitConfiguration
    timeouts:
      controlPlaneComponentHealthCheck: 10m0s
      kubeletHealthCheck: 10m0s
      kubernetesAPICall: 5m0s
      etcdAPICall: 5m0s
  - |
    kind: KubeletConfiguration
    failCgroupV1: false
EOF
  if ! "$KIND" create cluster --name "$KIND_CLUSTER_NAME" --config "$CLUSTER_DIR/kind-config.yaml" \
    --kubeconfig "$KUBECONFIG_PATH" --wait 240s --retain >"$LOG_DIR/kind-create.log" 2>&1; then
    cat "$LOG_DIR/kind-create.log" >&2
    echo "kind-up: kind could not create the cluster; its node's logs:" >&2
    "$KIND" export logs --name "$KIND_CLUSTER_NAME" "$LOG_DIR/kind-node-logs" >&2 || true
    echo "kind-up: node logs in $LOG_DIR/kind-node-logs; hack/kind-down.sh deletes the node" >&2
    exit 1
  fi
  say "kind cluster created in $((SECONDS - create_started)) s"
fi

# kind waits for the node; CoreDNS and kindnet run on it too, and must be scheduled before the
# cordon below keeps every new pod off it.
say "waiting for CoreDNS, kindnet and kube-proxy on the kind node"
kubectl -n kube-system rollout status deployment/coredns --timeout=180s >/dev/null
kubectl -n kube-system rollout status daemonset/kindnet --timeout=60s >/dev/null
kubectl -n kube-system rollout status daemonset/kube-proxy --timeout=60s >/dev/null
# Only the KWOK pools take test pods: kind's own node keeps running its system pods.
for node in $(kubectl get nodes -l 'type!=kwok' -o name); do
  kubectl cordon "$node" >/dev/null
done

KIND_COMPONENTS=(ray-head rayjobapi kuberay-operator provisioner kwok)
stop_components "${KIND_COMPONENTS[@]}" >/dev/null
ensure_ports_free "$RAYJOBAPI_PORT" "$KUBERAY_METRICS_PORT" "$KUBERAY_PROBE_PORT" "$KWOK_PORT" \
  "${RAY_FIXED_PORTS[@]}"
trap 'status=$?; if ((status != 0)); then stop_components "${KIND_COMPONENTS[@]}" >/dev/null; fi' EXIT
start_out_of_cluster_components
write_env_file kind
say "kind backend ready in $((SECONDS - started)) s: export KUBECONFIG=$KUBECONFIG_PATH"
