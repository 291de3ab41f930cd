#!/usr/bin/env bash
# Joins a real node to the running local cluster (hack/cluster-up.sh): containerd (Debian's) and a
# kubelet built from the Go module proxy, on this host, as the `cpu` pool's node $NODE_NAME.
# Its pods are real containers of the images the local engine holds (images/build.sh), imported
# into the node's containerd; the KWOK nodes stay for the NVIDIA and Ascend pools.
# Idempotent: when the node's processes run and the Node is Ready it ships any image rebuilt since,
# says so and exits 0.
# Docs: hack/README.md ("The real node").
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$HACK_DIR/cluster-lib.sh"
. "$HACK_DIR/node-lib.sh"
hold_cluster_lock "$@"

pid_of kube-apiserver >/dev/null || { echo "node: the local cluster is not running: make cluster-up first" >&2; exit 1; }
if node_is_up; then
  # A rebuilt image reaches the running node too (its changed layers only); unchanged, nothing moves.
  import_images
  echo "node: $NODE_NAME already running and Ready"
  exit 0
fi
ensure_node_packages
"$HACK_DIR/build-node-binaries.sh"

stop_node >/dev/null
set -o errtrace
trap 'echo "node-up: failed: $BASH_COMMAND (line $LINENO)" >&2' ERR
trap 'status=$?; if ((status != 0)); then stop_node >/dev/null; fi' EXIT
ensure_ports_free "$KUBELET_PORT" "$KUBELET_HEALTHZ_PORT" "$COREDNS_HEALTH_PORT"
started=$SECONDS
ensure_node_pki
say "pod bridge $NODE_BRIDGE ($NODE_GATEWAY_IP, pods in $NODE_POD_CIDR)"
ensure_bridge
route_api_service
write_cni_config
say "starting CoreDNS"
start_coredns
say "starting containerd"
start_containerd
import_images
say "starting the kubelet"
start_kubelet
say "starting the NetworkPolicy enforcer (kube-router's firewall)"
start_netpol
say "node $NODE_NAME ready in $((SECONDS - started)) s"
