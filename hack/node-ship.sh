#!/usr/bin/env bash
# Ships the real node's images into its containerd ahead of the node: hack/real-backend-up.sh runs
# it in the background as soon as the images are built, while the cluster's and the node's
# binaries are still building. Shipping needs only Debian's containerd and registry, not the
# kubelet, so on a fresh machine the images' minutes of pushing and unpacking (the 2.6 GB CPU
# trainer image: ~3 min) leave the path to the node; hack/node-up.sh then finds them in place and
# moves nothing. containerd and the registry stay up; the node's start restarts them, and the
# images stay in the node's folder.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$HACK_DIR/cluster-lib.sh"
. "$HACK_DIR/node-lib.sh"

if node_is_up; then
  exit 0  # a running node takes changed images itself (hack/node-up.sh)
fi
ensure_node_packages
mkdir -p "$LOG_DIR"
pid_of containerd >/dev/null || start_containerd
start_registry
say "shipping the images to the node's containerd ahead of the node"
for ref in "${NODE_IMAGES[@]}"; do
  ship_image "$ref"
done
