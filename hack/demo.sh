#!/usr/bin/env bash
# The product working, on a local default with no accelerator (`make demo`):
#   1. a local cluster of its own (hack/cluster-up.sh at .cache/demo-cluster, ports +500, so that
#      `make test` never meets the demo's operator or job): API server, KWOK node pools, KubeRay;
#   2. as root (the development machines): the operator and CPU trainer images built and a real
#      node for the `cpu` pool (hack/real-backend-up.sh: images/build.sh in the background while the
#      cluster builds, Debian's Docker engine installed where none runs; then hack/node-up.sh, a
#      kubelet with containerd on this host, kube-router enforcing NetworkPolicies);
#   3. `helm upgrade --install` of charts/grpo-operator into grpo-system: the operator runs as a
#      pod of its image on the real node;
#   4. the model and data of examples/colours-cpu.yaml staged onto two claims;
#   5. `kubectl apply -f examples/colours-cpu.yaml` into grpo-demo (Pod Security `restricted`): its
#      Ray head and worker run as pods of the CPU trainer image, the job trains for real on CPU,
#      and its progress fills `kubectl get grpojobs`;
#   6. once it Succeeded: the export on the claim, and `kubectl grpo checkpoints` and `plot` read
#      from the job's volume by a reader pod (the curve as a PNG and in the terminal); then the
#      real node stops: one NetworkPolicy enforcer per machine, and `make test` starts its own.
# Not root, or GRPO_DEMO_PODS=0: no node can run containers, so the operator runs here with
# exactly the chart's ServiceAccount and settings, and a real Ray head on loopback runs the
# trainer (the path of tests/e2e/test_real_training.py).
# Idempotent: a second run reuses what is there. `make demo-down` stops the demo's cluster.
set -euo pipefail
. "$(dirname "$0")/demo-env.sh"
. "$(dirname "$0")/lib.sh"
. "$HACK_DIR/cluster-lib.sh"
. "$HACK_DIR/node-lib.sh"

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
TRAINER_IMAGE="ghcr.io/grpo-operator/trainer-cpu:$NODE_IMAGES_TAG"
started=$SECONDS
mkdir -p "$DEMO_DIR"

PODS="${GRPO_DEMO_PODS:-auto}"
if [[ "$PODS" == auto ]]; then
  PODS=0
  if ((EUID == 0)); then PODS=1; else
    say "not root: no node here can run containers, so the trainer runs on a Ray head on this host (hack/demo.sh says why)"
  fi
fi

install_python_env_in_background
if [[ "$PODS" == 1 ]]; then
  say "the local cluster, our images and a real node (first time: the cluster's binaries build from the Go module proxy, 10-20 min on 2 cores, the images beside them; then the node's, ~5 min)"
  "$HACK_DIR/real-backend-up.sh"
else
  say "the local cluster (first time: the binaries build from the Go module proxy, 10-20 min on 2 cores)"
  "$HACK_DIR/cluster-up.sh"
fi

say "installing the chart (release $RELEASE in $RELEASE_NS)"
# --reset-values: Helm reuses the last release's values when none are given, and a demo without
# pods after one with them would keep the real node's selectors.
helm_args=(upgrade --install "$RELEASE" "$REPO_ROOT/charts/grpo-operator" --namespace "$RELEASE_NS" --create-namespace
  --reset-values)
if [[ "$PODS" == 1 ]]; then
  # The operator's pod and the cpu pool's Ray pods on the real node, from the images just built
  # (hack/demo-values.yaml); the chart's pods pass Pod Security `restricted`.
  kubectl create namespace "$RELEASE_NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl label namespace "$RELEASE_NS" pod-security.kubernetes.io/enforce=restricted --overwrite >/dev/null
  on_node="{\"kubernetes.io/hostname\": \"$NODE_NAME\"}"
  tolerate="[{\"key\": \"${NODE_TAINT%%=*}\", \"operator\": \"Exists\", \"effect\": \"${NODE_TAINT##*:}\"}]"
  helm_args+=(-f "$HACK_DIR/demo-values.yaml" --set "image.tag=$NODE_IMAGES_TAG" --set "profiles.cpu.image=$TRAINER_IMAGE"
    --set-json "nodeSelector=$on_node" --set-json "tolerations=$tolerate"
    --set-json "profiles.cpu.nodeSelector=$on_node" --set-json "profiles.cpu.tolerations=$tolerate"
    --wait --timeout 5m)
  # An operator that an earlier demo ran on this host (the path without pods) gives way to the pod.
  stop_process grpo-operator >/dev/null 2>&1 || true
fi
"$HELM" --kubeconfig "$KUBECONFIG_PATH" "${helm_args[@]}" >"$DEMO_DIR/helm.log" 2>&1 ||
  { tail -n 20 "$DEMO_DIR/helm.log" >&2; exit 1; }

if [[ "$PODS" == 1 ]]; then
  kubectl -n "$RELEASE_NS" get pods -l app.kubernetes.io/instance="$RELEASE" --no-headers \
    -o custom-columns='POD:.metadata.name,IMAGE:.spec.containers[0].image,NODE:.spec.nodeName,STARTED:.status.containerStatuses[0].state.running.startedAt' |
    while read -r name image node since; do say "the operator: pod $name of $image on node $node, running since $since"; done
else
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
  # An operator of an earlier demo keeps running only if it was started with the same settings.
  if ! cmp -s "$DEMO_DIR/settings.yaml" "$DEMO_DIR/settings.running.yaml" 2>/dev/null; then
    stop_process grpo-operator >/dev/null 2>&1 || true
  fi

  if ! pid_of grpo-operator >/dev/null; then
    cp "$DEMO_DIR/settings.yaml" "$DEMO_DIR/settings.running.yaml"
    say "starting the operator with the chart's ServiceAccount ($sa)"
    start_process grpo-operator env KUBECONFIG="$operator_kubeconfig" GRPO_OPERATOR_CONFIG="$DEMO_DIR/settings.running.yaml" \
      GRPO_METRICS_PORT="$OPERATOR_METRICS_PORT" GRPO_HEALTH_PORT="$OPERATOR_HEALTH_PORT" "$PY" -m grpo_operator run
    wait_until grpo-operator 60 "the operator's /healthz" http_ok "http://127.0.0.1:$OPERATOR_HEALTH_PORT/healthz"
  fi
fi

kubectl create namespace "$DEMO_NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
if [[ "$PODS" == 1 ]]; then
  say "namespace $DEMO_NS (Pod Security restricted; KubeRay reaches each Ray head's job API in its pod)"
  kubectl label namespace "$DEMO_NS" pod-security.kubernetes.io/enforce=restricted grpo.dev/ray-backend=pod \
    --overwrite >/dev/null
else
  say "namespace $DEMO_NS, routed to the Ray head on this host"
  kubectl label namespace "$DEMO_NS" grpo.dev/ray-backend=real --overwrite >/dev/null
fi

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
head_shown=""
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
  if [[ "$PODS" == 1 && -z "$head_shown" ]]; then
    # The Ray head's container, once it runs: which image, on which node (KubeRay removes the
    # pods when the job ends, so this is said while they run).
    head_shown="$(kubectl -n "$DEMO_NS" get pods -l "grpo.dev/job=$JOB,ray.io/node-type=head" \
      -o jsonpath='{range .items[*]}{.metadata.name} {.status.containerStatuses[0].image} {.spec.nodeName} {.status.containerStatuses[0].state.running.startedAt}{"\n"}{end}' 2>/dev/null |
      awk 'NF == 4' | head -n 1 || true)"
    if [[ -n "$head_shown" ]]; then
      read -r name image node since <<<"$head_shown"
      printf '  (Ray head: pod %s, container of %s running on node %s since %s)\n' "$name" "$image" "$node" "$since"
    fi
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
  if [[ "$PODS" == 1 ]]; then
    echo "Operator: kubectl -n $RELEASE_NS logs deploy/$RELEASE   Trainer: kubectl grpo logs $JOB -n $DEMO_NS (KUBECONFIG=$KUBECONFIG_PATH)" >&2
  else
    echo "Operator log: $LOG_DIR/grpo-operator.log   Trainer output: $LOG_DIR/rayjobapi.log" >&2
  fi
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
if [[ "$PODS" == 1 ]]; then
  # What a user runs: the plugin on the PATH, its reader pod mounting the job's claim read-only.
  grpo() { PATH="$REPO_ROOT/.venv/bin:$PATH" KUBECONFIG="$KUBECONFIG_PATH" "$KUBECTL" grpo "$@" -n "$DEMO_NS" --image "$TRAINER_IMAGE"; }
  say "kubectl grpo checkpoints $JOB (read from the job's volume by a reader pod)"
  grpo checkpoints "$JOB"
  echo
  say "kubectl grpo plot $JOB --full (every step, from the metrics files on the volume)"
  grpo plot "$JOB" --full --png "$DEMO_DIR/$JOB-curves.png"
  how="
the operator's pod made its Ray cluster through KubeRay, the Ray head and worker pods of the CPU
trainer image ran grpo-train on the real node, and the trainer reported every step into the job's
status with its own ServiceAccount"
else
  kubectl -n "$DEMO_NS" get grpojob "$JOB" -o json | "$PY" -m grpo_kubectl.drawing --png "$DEMO_DIR/$JOB-curves.png"
  how="
the operator made its Ray cluster through KubeRay, the Ray head ran grpo-train, and the trainer
reported every step into the job's status with its own ServiceAccount"
fi

afterwards=""
if [[ "$PODS" == 1 ]]; then
  say "stopping the real node (its pods are done; \`make demo\` starts it again in seconds)"
  "$HACK_DIR/node-down.sh" >/dev/null
  afterwards=$'\n'"The operator's pod waits for the real node until the next \`make demo\` starts it again."
fi

cat <<EOF

Done in $((SECONDS - started)) s. The job trained for real:$how.

Try:

  export KUBECONFIG=$KUBECONFIG_PATH
  kubectl -n $DEMO_NS describe grpojob $JOB
  kubectl -n $DEMO_NS delete grpojob $JOB && make demo        # train again

Reward curve: $DEMO_DIR/$JOB-curves.png$afterwards
Stop the demo's cluster: make demo-down (the tests use a cluster of their own: make test)
EOF
