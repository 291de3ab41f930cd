#!/usr/bin/env bash
# The main job on the local default, the way a user runs it on a real cluster:
#   1. the local cluster (hack/cluster-up.sh: API server, KWOK node pools, KubeRay);
#   2. `helm upgrade --install` of charts/grpo-operator into grpo-system;
#   3. the operator itself, with the chart's ServiceAccount and settings. KWOK pods run no
#      containers, so the chart's operator pod only looks Running; the real process runs here,
#      out of cluster, with exactly the chart's credentials and configuration;
#   4. `kubectl apply` of the Ascend geo3k example into grpo-demo, until it is Running;
#   5. `kubectl get grpojobs`.
# Idempotent: a second run reuses what is there. `make cluster-down` stops everything.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$HACK_DIR/cluster-lib.sh"

RELEASE=grpo-operator
RELEASE_NS=grpo-system
DEMO_NS=grpo-demo
EXAMPLE="$REPO_ROOT/examples/geo3k-ascend-910b.yaml"
DEMO_DIR="$CLUSTER_DIR/demo"
HELM="$BIN_DIR/helm"

"$HACK_DIR/cluster-up.sh" >/dev/null
mkdir -p "$DEMO_DIR"

say "installing the chart (release $RELEASE in $RELEASE_NS)"
"$HELM" --kubeconfig "$KUBECONFIG_PATH" upgrade --install "$RELEASE" "$REPO_ROOT/charts/grpo-operator" \
  --namespace "$RELEASE_NS" --create-namespace >"$DEMO_DIR/helm.log" 2>&1 ||
  { tail -n 20 "$DEMO_DIR/helm.log" >&2; exit 1; }

# The operator's identity: a short-lived token of the chart's ServiceAccount, so the demo
# proves the chart's RBAC is enough, and the settings the chart rendered.
sa="$(kubectl -n "$RELEASE_NS" get deployment "$RELEASE" -o jsonpath='{.spec.template.spec.serviceAccountName}')"
token="$(kubectl -n "$RELEASE_NS" create token "$sa" --duration=24h)"
server="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
operator_kubeconfig="$DEMO_DIR/operator.kubeconfig"
"$KUBECTL" --kubeconfig "$operator_kubeconfig" config set-cluster local --server="$server" \
  --certificate-authority="$PKI_DIR/ca.crt" --embed-certs=true >/dev/null
"$KUBECTL" --kubeconfig "$operator_kubeconfig" config set-credentials operator --token="$token" >/dev/null
"$KUBECTL" --kubeconfig "$operator_kubeconfig" config set-context operator --cluster=local --user=operator >/dev/null
"$KUBECTL" --kubeconfig "$operator_kubeconfig" config use-context operator >/dev/null
settings_cm="$(kubectl -n "$RELEASE_NS" get configmap -l app.kubernetes.io/instance="$RELEASE" -o name | grep settings)"
kubectl -n "$RELEASE_NS" get "$settings_cm" -o jsonpath='{.data.settings\.yaml}' >"$DEMO_DIR/settings.yaml"

if ! pid_of grpo-operator >/dev/null; then
  say "starting the operator with the chart's ServiceAccount ($sa)"
  start_process grpo-operator env KUBECONFIG="$operator_kubeconfig" GRPO_OPERATOR_CONFIG="$DEMO_DIR/settings.yaml" \
    GRPO_METRICS_PORT=18090 GRPO_HEALTH_PORT=18091 "$REPO_ROOT/.venv/bin/python" -m grpo_operator run
  wait_until grpo-operator 60 "the operator's /healthz" http_ok "http://127.0.0.1:18091/healthz"
fi

say "applying $(basename "$EXAMPLE") in namespace $DEMO_NS"
kubectl create namespace "$DEMO_NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl -n "$DEMO_NS" apply -f "$EXAMPLE"
job="$(kubectl -n "$DEMO_NS" apply -f "$EXAMPLE" --dry-run=client -o jsonpath='{.metadata.name}')"
wait_until grpo-operator 120 "GRPOJob $job to be Running" \
  bash -c "[[ \"\$('$KUBECTL' --kubeconfig '$KUBECONFIG_PATH' -n $DEMO_NS get grpojob $job -o jsonpath='{.status.phase}')\" == Running ]]"

echo
kubectl -n "$DEMO_NS" get grpojobs
echo
kubectl -n "$DEMO_NS" get rayjobs,pods -o wide | cut -c1-160
cat <<EOF

The job runs on the Ascend pool (8 x huawei.com/Ascend910); KWOK plays the pods and the fake Ray
job API reports the Ray job RUNNING, so it stays Running until you end it. Try:

  export KUBECONFIG=$KUBECONFIG_PATH
  kubectl -n $DEMO_NS describe grpojob $job
  kubectl -n $DEMO_NS patch grpojob $job --type=merge -p '{"spec":{"runPolicy":{"suspend":true}}}'
  kubectl -n $DEMO_NS delete grpojob $job

Operator log: $LOG_DIR/grpo-operator.log      Stop everything: make cluster-down
EOF
