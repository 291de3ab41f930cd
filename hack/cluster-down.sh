#!/usr/bin/env bash
# Stops the local test cluster that hack/cluster-up.sh started: first deletes the test
# namespaces while KubeRay still runs (its RayJob finalizer needs it), then stops only the
# processes recorded in $CLUSTER_DIR/pids, in reverse start order. Logs and certificates stay.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$HACK_DIR/cluster-lib.sh"
. "$HACK_DIR/node-lib.sh"
hold_cluster_lock "$@"

if pid_of kube-apiserver >/dev/null && pid_of kuberay-operator >/dev/null; then
  delete_test_namespaces
fi
# The operator `make demo` started, before the API server it talks to.
stop_process grpo-operator
# The real node (hack/node-up.sh), when it runs: its pods' containers with it.
if pid_of kubelet >/dev/null || pid_of containerd >/dev/null || pid_of coredns >/dev/null; then
  stop_node
fi
stop_components "${LOCAL_COMPONENTS[@]}"
rm -f "$ENV_FILE"
echo "cluster: stopped"
