#!/usr/bin/env bash
# Tears down what hack/kind-up.sh made: test namespaces first (KubeRay still running), then the
# out-of-cluster processes by pid file, then the kind cluster.
set -euo pipefail
HACK="$(cd "$(dirname "$0")" && pwd)"
export GRPO_CLUSTER_DIR="${GRPO_KIND_CLUSTER_DIR:-${GRPO_CACHE_DIR:-$HACK/../.cache}/kind}"
. "$HACK/lib.sh"
. "$HACK/cluster-lib.sh"
hold_cluster_lock "$@"
KIND_CLUSTER_NAME="${GRPO_KIND_CLUSTER_NAME:-grpo-e2e}"

if pid_of kuberay-operator >/dev/null; then
  delete_test_namespaces
fi
stop_components ray-head rayjobapi kuberay-operator provisioner kwok
rm -f "$ENV_FILE"
if [[ -x "$BIN_DIR/kind" ]]; then
  "$BIN_DIR/kind" delete cluster --name "$KIND_CLUSTER_NAME"
fi
