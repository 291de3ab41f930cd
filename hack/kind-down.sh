#!/usr/bin/env bash
# Tears down what hack/kind-up.sh made: test namespaces first (KubeRay still running), then the
# out-of-cluster processes by pid file, then the kind cluster, then kind's own engine (by its pid
# file; its images stay in its data root for the next start).
set -euo pipefail
HACK="$(cd "$(dirname "$0")" && pwd)"
. "$HACK/lib.sh"
. "$HACK/kind-lib.sh"
export GRPO_CLUSTER_DIR="$KIND_CLUSTER_DIR"
CLUSTER_DIR="$KIND_CLUSTER_DIR"
. "$HACK/cluster-lib.sh"
hold_cluster_lock "$@"

if pid_of kuberay-operator >/dev/null; then
  delete_test_namespaces
fi
stop_components ray-head rayjobapi kuberay-operator provisioner kwok
rm -f "$ENV_FILE"
if [[ -x "$KIND" ]] && docker info >/dev/null 2>&1; then
  "$KIND" delete cluster --name "$KIND_CLUSTER_NAME" --kubeconfig "$KUBECONFIG_PATH"
fi
stop_kind_engine
