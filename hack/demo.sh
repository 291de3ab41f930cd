#!/usr/bin/env bash
# The product working, on a local default with no Docker and no accelerator (`make demo`):
#   1. a local cluster of its own (hack/cluster-up.sh at .cache/demo-cluster, ports +500, so that
#      `make test` never meets the demo's operator or job): API server, KWOK node pools, KubeRay,
#      and a real Ray head that runs the trainer;
#   2. `helm upgrade --install` of charts/grpo-operator into grpo-system;
#   3. the operator itself, with the chart's ServiceAccount and settings (KWOK pods run nothing, so
#      it runs here, out of cluster, with exactly the chart's credentials and configuration);
#   4. the model and data of examples/colours-cpu.yaml staged onto two claims;
#   5. `kubectl apply -f examples/colours-cpu.yaml` into grpo-demo, a namespace routed to the real
#      Ray head: the job trains for real, on CPU, and its progress fills `kubectl get grpojobs`;
#   6. once it Succeeded: the export on the claim and the reward curve (a PNG and in the terminal).
# Idempotent: a second run reuses what is there. `make demo-down` stops the demo's cluster.
set -euo pipefail
. "$(dirname "$0")/demo-env.sh"
. "$(dirname "$0")/lib.sh"
. "$HACK_DIR/cluster-lib.sh"

RELEASE=grpo-operator
RELEASE_NS=grpo-system
DEMO_NS=grpo-demo
EXAMPLE="$REPO_ROOT/examples/colours-cpu.yaml"
JOB=colours-cpu
DEMO_DIR="$CLUSTER_DIR/demo"
HELM="$BIN_DIR/helm"
PY="$REPO_ROOT/.venv/bin/python"
OPERATOR_METRICS_PORT=$((18090 + PORT_OFFSET))
OPERATOR_HEALTH_PORT=$((18091 + PORT_OFFSET))
TRAIN_TIMEOUT=${GRPO_DEMO_TIMEOUT:-1800}
started=$SECONDS

say "the local cluster (first time: the binaries build from the Go module proxy, 10-20 min on 2 cores)"
"$HACK_DIR/cluster-up.sh"
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
    GRPO_METRICS_PORT="$OPERATOR_METRICS_PORT" GRPO_HEALTH_PORT="$OPERATOR_HEALTH_PORT" "$PY" -m grpo_operator run
  wait_until grpo-operator 60 "the operator's /healthz" http_ok "http://127.0.0.1:$OPERATOR_HEALTH_PORT/healthz"
fi

say "namespace $DEMO_NS, routed to the real Ray head"
kubectl create namespace "$DEMO_NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl label namespace "$DEMO_NS" grpo.dev/ray-backend=real --overwrite >/dev/null

if ! kubectl -n "$DEMO_NS" get grpojob "$JOB" >/dev/null 2>&1; then
  if [[ ! -f "$DEMO_DIR/colours/data/colours/train.parquet" ]]; then
    say "building the tiny Qwen3-VL and the colour dataset"
    "$PY" -m grpo_trainer.testing.colour_job "$DEMO_DIR/colours" >/dev/null
  fi
  say "staging them onto claims demo-models and demo-data, as you would real weights and data"
  KUBECONFIG="$KUBECONFIG_PATH" "$PY" "$HACK_DIR/stage_claims.py" --namespace "$DEMO_NS" \
    "demo-models=$DEMO_DIR/colours/models" "demo-data=$DEMO_DIR/colours/data"
  say "kubectl apply -f examples/$(basename "$EXAMPLE") -n $DEMO_NS"
  kubectl -n "$DEMO_NS" apply -f "$EXAMPLE"
else
  say "GRPOJob $JOB already exists in $DEMO_NS: following it (delete it to train again)"
fi

say "training (every new line is the status as the trainer reports it; Ctrl-C stops watching, not the job)"
last=""
deadline=$((SECONDS + TRAIN_TIMEOUT))
printf '  %s\n' "$(kubectl -n "$DEMO_NS" get grpojobs | head -n1)"
while :; do
  row="$(kubectl -n "$DEMO_NS" get grpojob "$JOB" --no-headers 2>/dev/null || true)"
  # One line per change of phase, step, reward or attempt (not of AGE, which changes every second).
  key="$(kubectl -n "$DEMO_NS" get grpojob "$JOB" 2>/dev/null \
    -o jsonpath='{.status.phase} {.status.progress.steps} {.status.metrics.reward} {.status.attempt}' || true)"
  if [[ "$key" != "$last" ]]; then
    printf '  %s\n' "$row"
    last="$key"
  fi
  phase="$(kubectl -n "$DEMO_NS" get grpojob "$JOB" -o jsonpath='{.status.phase}' 2>/dev/null || true)"
  [[ "$phase" == Succeeded || "$phase" == Failed ]] && break
  if ((SECONDS > deadline)); then
    echo "demo: the job did not finish within ${TRAIN_TIMEOUT} s; it keeps running (see below)" >&2
    break
  fi
  sleep 3
done

echo
kubectl -n "$DEMO_NS" get grpojobs
if [[ "$phase" != Succeeded ]]; then
  echo
  kubectl -n "$DEMO_NS" describe grpojob "$JOB" | sed -n '/Conditions:/,$p' | head -n 40
  echo "Operator log: $LOG_DIR/grpo-operator.log   Trainer output: $LOG_DIR/rayjobapi.log" >&2
  exit 1
fi

echo
kubectl -n "$DEMO_NS" get grpojob "$JOB" -o jsonpath='{.status.outputs}' |
  "$PY" -c 'import json, sys; o = json.load(sys.stdin); print("exported step", o["step"]); print("  model:       ", o.get("model")); print("  LoRA adapter:", o.get("loraAdapter"))'
claim_dir="$(kubectl get pv "$(kubectl -n "$DEMO_NS" get pvc "$JOB-checkpoints" -o jsonpath='{.spec.volumeName}')" \
  -o jsonpath='{.spec.hostPath.path}')"
echo "  on claim $JOB-checkpoints (here: $claim_dir):"
(cd "$claim_dir" && find . -path '*/export/*' -maxdepth 4 -type f | sort | sed 's/^/    /' | head -n 20)
echo
kubectl -n "$DEMO_NS" get grpojob "$JOB" -o json | "$PY" -m grpo_kubectl.drawing --png "$DEMO_DIR/$JOB-curves.png"

cat <<EOF

Done in $((SECONDS - started)) s. The job trained for real: the operator made its Ray cluster through
KubeRay, the Ray head ran grpo-train, and the trainer reported every step into the job's status with
its own ServiceAccount. Try:

  export KUBECONFIG=$KUBECONFIG_PATH
  kubectl -n $DEMO_NS describe grpojob $JOB
  kubectl -n $DEMO_NS delete grpojob $JOB && make demo        # train again

Reward curve: $DEMO_DIR/$JOB-curves.png     Operator log: $LOG_DIR/grpo-operator.log
Stop the demo's cluster: make demo-down (the tests use a cluster of their own: make test)
EOF
