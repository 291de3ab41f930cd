#!/usr/bin/env bash
# The suite's `kind` backend, for machines with Docker (`make e2e-kind`); it cannot run where
# there is no Docker engine. A kind cluster provides the real control plane; its one real node is
# cordoned so that test pods land on the same KWOK node pools as on the local backend, and the
# same out-of-cluster KWOK, KubeRay operator and fake Ray job API run against it.
set -euo pipefail
HACK="$(cd "$(dirname "$0")" && pwd)"
# Its own state folder (kubeconfig, pids, logs, cluster.env), apart from the local cluster's.
export GRPO_CLUSTER_DIR="${GRPO_KIND_CLUSTER_DIR:-${GRPO_CACHE_DIR:-$HACK/../.cache}/kind}"
. "$HACK/lib.sh"
. "$HACK/cluster-lib.sh"
hold_cluster_lock "$@"
KIND_CLUSTER_NAME="${GRPO_KIND_CLUSTER_NAME:-grpo-e2e}"
KIND="$BIN_DIR/kind"

if ! docker info >/dev/null 2>&1; then
  echo "kind-up: no usable Docker engine here; the kind backend needs one (use make test instead)" >&2
  exit 1
fi
"$HACK_DIR/build-binaries.sh"
if [[ ! -x "$KIND" ]]; then
  say "building kind $KIND_VERSION"
  GOBIN="$BIN_DIR" go install "sigs.k8s.io/kind@$KIND_VERSION"
fi
mkdir -p "$CLUSTER_DIR"

if "$KIND" get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER_NAME"; then
  "$KIND" export kubeconfig --name "$KIND_CLUSTER_NAME" --kubeconfig "$KUBECONFIG_PATH"
else
  say "creating kind cluster $KIND_CLUSTER_NAME"
  "$KIND" create cluster --name "$KIND_CLUSTER_NAME" --kubeconfig "$KUBECONFIG_PATH" --wait 180s
fi

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
say "kind backend ready: export KUBECONFIG=$KUBECONFIG_PATH"
