#!/usr/bin/env bash
# Takes the real node (hack/node-up.sh) out of the local cluster: its pods' containers are
# stopped, then the kubelet and containerd, and the Node is deleted. Images stay in the node's
# containerd for the next start; the pod bridge goes.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$HACK_DIR/cluster-lib.sh"
. "$HACK_DIR/node-lib.sh"
hold_cluster_lock "$@"

stop_node
echo "node: stopped"
