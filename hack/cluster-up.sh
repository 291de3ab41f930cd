#!/usr/bin/env bash
# Starts the local test cluster: a real control plane (etcd, kube-apiserver, controller manager,
# scheduler) built from Go modules, KWOK-simulated GPU/NPU/CPU node pools, the KubeRay operator,
# a fake Ray job API that KubeRay reaches through HTTP_PROXY, and a real Ray head on loopback that
# the job API forwards chosen jobs to (docs: hack/README.md).
# Idempotent: when everything already runs and answers, it says so and exits 0.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$HACK_DIR/cluster-lib.sh"
hold_cluster_lock "$@"

cluster_is_up() {
  local name attempt
  for name in "${LOCAL_COMPONENTS[@]}"; do
    pid_of "$name" >/dev/null || return 1
  done
  [[ -f "$ENV_FILE" ]] || return 1
  # Every process runs; a busy machine (other test sessions use this cluster too) may answer
  # slowly, and a false "down" would restart the cluster under them: try a few times.
  for attempt in 1 2 3; do
    if kubectl get --raw /readyz >/dev/null 2>&1 &&
      http_ok "$RAYJOBAPI_URL/_control/healthz" >/dev/null &&
      http_ok "$RAY_DASHBOARD_URL/api/version" >/dev/null &&
      http_ok "http://127.0.0.1:$KUBERAY_PROBE_PORT/readyz" >/dev/null; then
      return 0
    fi
    ((attempt == 3)) || sleep 2
  done
  return 1
}

print_access() {
  echo "cluster: up. Its kubeconfig:"
  echo "  export KUBECONFIG=$KUBECONFIG_PATH"
  echo "  kubectl: $KUBECTL   logs: $LOG_DIR   Ray job API control: $RAYJOBAPI_URL/_control/"
}

"$HACK_DIR/build-binaries.sh"
# The Ray head, the job API and the volume provisioner run on the virtualenv's Python.
wait_for_python_env
mkdir -p "$CLUSTER_DIR"
if cluster_is_up; then
  echo "cluster: already running and healthy"
  print_access
  exit 0
fi

# Whatever is left of an earlier, partial start goes first: a start is always from scratch.
stop_components "${LOCAL_COMPONENTS[@]}" >/dev/null
rm -f "$ENV_FILE"
# On failure say which step failed and stop what this run started; the logs stay in $LOG_DIR.
set -o errtrace
trap 'echo "cluster-up: failed: $BASH_COMMAND (line $LINENO)" >&2' ERR
trap 'status=$?; if ((status != 0)); then stop_components "${LOCAL_COMPONENTS[@]}" >/dev/null; fi' EXIT

ensure_ports_free "$ETCD_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT" "$CONTROLLER_MANAGER_PORT" \
  "$SCHEDULER_PORT" "$RAYJOBAPI_PORT" "$KUBERAY_METRICS_PORT" "$KUBERAY_PROBE_PORT" "$KWOK_PORT" \
  "${RAY_FIXED_PORTS[@]}"
started=$SECONDS
ensure_pki
write_kubeconfigs
say "starting etcd"
start_etcd
say "starting kube-apiserver"
start_apiserver
say "starting kube-controller-manager and kube-scheduler"
start_controller_manager
start_scheduler
wait_until kube-controller-manager 60 "kube-controller-manager /healthz" \
  http_ok -k "https://127.0.0.1:$CONTROLLER_MANAGER_PORT/healthz"
wait_until kube-scheduler 60 "kube-scheduler /healthz" http_ok -k "https://127.0.0.1:$SCHEDULER_PORT/healthz"
# Pods cannot be created in a namespace before its `default` service account exists.
wait_until kube-controller-manager 60 "the default service account" \
  kubectl get serviceaccount default --namespace default
start_out_of_cluster_components
write_env_file local
say "ready in $((SECONDS - started)) s"
print_access
