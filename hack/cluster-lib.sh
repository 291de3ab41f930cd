# Functions shared by hack/cluster-up.sh, hack/cluster-down.sh and hack/kind-up.sh.
# Source it after lib.sh. Every process it starts is recorded in $CLUSTER_DIR/pids, logs to
# $CLUSTER_DIR/logs/<name>.log, and is stopped again by that pid file only.
# shellcheck shell=bash

PID_DIR="$CLUSTER_DIR/pids"
LOG_DIR="$CLUSTER_DIR/logs"
PKI_DIR="$CLUSTER_DIR/pki"
KUBECONFIG_PATH="$CLUSTER_DIR/kubeconfig"
KUBECTL="$BIN_DIR/kubectl"
RAYJOBAPI_URL="http://127.0.0.1:$RAYJOBAPI_PORT"
RAY_DASHBOARD_URL="http://127.0.0.1:$RAY_DASHBOARD_PORT"
# Every process of the real Ray head inherits this variable (workers, job supervisors, the jobs'
# entrypoints and whatever they start), so stop_ray_head finds them all, and no other Ray's.
RAY_PROCESS_MARKER="GRPO_RAY_HEAD_OF=$CLUSTER_DIR"
RAY_FIXED_PORTS=("$RAY_GCS_PORT" "$RAY_DASHBOARD_PORT" "$RAY_NODE_MANAGER_PORT" "$RAY_OBJECT_MANAGER_PORT"
  "$RAY_CLIENT_SERVER_PORT" "$RAY_DASHBOARD_AGENT_PORT" "$RAY_DASHBOARD_AGENT_GRPC_PORT"
  "$RAY_RUNTIME_ENV_AGENT_PORT" "$RAY_METRICS_EXPORT_PORT" "$RAY_AUTOSCALER_METRICS_PORT"
  "$RAY_DASHBOARD_METRICS_PORT")
# What the suite reads to find this cluster (tests/support/cluster.py).
ENV_FILE="$CLUSTER_DIR/cluster.env"

# Several shells and pytest sessions share one cluster folder: cluster-up, cluster-down and
# kind-up/down run one at a time. The script re-executes itself under flock; -o keeps the lock's
# descriptor out of the components it starts, so the lock ends with the script.
hold_cluster_lock() {  # hold_cluster_lock "$@" (first thing in an entry script)
  if [[ -z "${GRPO_CLUSTER_LOCK_HELD:-}" ]]; then
    mkdir -p "$CLUSTER_DIR"
    GRPO_CLUSTER_LOCK_HELD=1 exec flock -o "$CLUSTER_DIR/.lock" "$0" "$@"
  fi
  unset GRPO_CLUSTER_LOCK_HELD
}

say() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }

kubectl() { "$KUBECTL" --kubeconfig "$KUBECONFIG_PATH" "$@"; }

# --- processes ----------------------------------------------------------------------------------

start_process() {  # start_process <name> <command> [args...]
  local name="$1" arg marker=""
  mkdir -p "$PID_DIR" "$LOG_DIR"
  # The first absolute path of the command line (the binary, or the script python runs) marks
  # the process as ours: stop_process checks for it before sending a signal to a recorded pid.
  for arg in "${@:2}"; do
    if [[ "$arg" == /* ]]; then marker="$arg" && break; fi
  done
  # setsid: the component outlives the shell that started it (make, pytest) and keeps no
  # terminal; stdin from /dev/null and output to a file, so no CI pipe waits on it.
  setsid "${@:2}" </dev/null >"$LOG_DIR/$name.log" 2>&1 &
  local pid=$!
  printf '%s\n%s\n%s\n' "$pid" "$marker" "$(start_time "$pid")" >"$PID_DIR/$name.pid"
  # Until the forked shell has exec'd the command, /proc/<pid>/cmdline is still this script's and
  # pid_of would report the component as gone; on a loaded machine that window is long enough
  # for the caller's first readiness check to fail a healthy start. Wait for the exec (5 s at most).
  local _
  for _ in $(seq 1 100); do
    pid_of "$name" >/dev/null && return 0
    running "$pid" || return 0 # exited already: the caller's wait reports it with its log
    sleep 0.05
  done
}

start_time() {  # start_time <pid>: when the process started, in clock ticks since boot (stat field 22)
  # Fields are counted after the command name, which may hold spaces: ") " ends it.
  sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20
}

pid_of() {  # pid_of <name>: the recorded pid if that process is still ours and alive
  # The marker (the binary or script) and the start time together: a pid file left behind by a
  # process that died (a crash, a machine restart) may name a pid the system has since given to
  # another process, often another python of this repository's virtual environment.
  local file="$PID_DIR/$1.pid" pid marker started="" cmdline
  [[ -f "$file" ]] || return 1
  { read -r pid; read -r marker; read -r started || true; } <"$file"
  [[ -n "$marker" ]] || return 1
  cmdline="$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" || return 1
  [[ "$cmdline" == *"$marker"* ]] || return 1
  [[ -z "$started" || "$(start_time "$pid")" == "$started" ]] || return 1
  echo "$pid"
}

running() {  # running <pid>: alive and not a zombie waiting to be reaped
  local state
  state="$(ps -o stat= -p "$1" 2>/dev/null)" && [[ "$state" != Z* ]]
}

stop_process() {  # stop_process <name>: SIGTERM, then SIGKILL after 15 s
  local name="$1" pid started=$SECONDS
  if pid="$(pid_of "$name")"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 150); do
      running "$pid" || break
      sleep 0.1
    done
    if running "$pid"; then
      say "$name (pid $pid) ignored SIGTERM; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    say "stopped $name (pid $pid) in $((SECONDS - started)) s"
  fi
  rm -f "$PID_DIR/$name.pid"
}

die_with_log() {  # die_with_log <name> <message>: the failing component's log tail, then exit 1
  echo "cluster: $2" >&2
  if [[ -f "$LOG_DIR/$1.log" ]]; then
    echo "----- last 40 lines of $LOG_DIR/$1.log -----" >&2
    tail -n 40 "$LOG_DIR/$1.log" >&2
    echo "-----" >&2
  fi
  exit 1
}

still_running() {  # still_running <name>: pid_of, asked again over a second before saying no
  # A command started through a launcher that execs more than once (a pyenv shim execs bash, then
  # pyenv, then python) shows no command line of its own for a moment at each exec.
  local _
  for _ in 1 2 3 4 5; do
    pid_of "$1" >/dev/null && return 0
    sleep 0.2
  done
  return 1
}

wait_until() {  # wait_until <name> <seconds> <what> <command...>: poll until the command succeeds
  local name="$1" timeout="$2" what="$3"
  local deadline=$((SECONDS + timeout))
  until "${@:4}" >/dev/null 2>&1; do
    still_running "$name" || die_with_log "$name" "$name exited while waiting for $what"
    ((SECONDS < deadline)) || die_with_log "$name" "timed out after ${timeout}s waiting for $what"
    sleep 0.5
  done
}

http_ok() { curl -fsS --max-time 2 "$@"; }

# --- the Python environment ---------------------------------------------------------------------
# `make demo` installs the virtualenv (make's .venv/.installed) in the background while the
# cluster's binaries build, which need none of it: on a fresh machine that hides its minutes. The
# installer holds VENV_LOCK until it ends; whatever needs the environment waits on the lock first.
VENV_LOCK="$STATE_ROOT/venv.lock"
VENV_LOG="$STATE_ROOT/venv-install.log"

install_python_env_in_background() {
  if make --no-print-directory -C "$REPO_ROOT" -q .venv/.installed 2>/dev/null; then
    return 0
  fi
  mkdir -p "$STATE_ROOT"
  local fd
  exec {fd}>"$VENV_LOCK"
  flock "$fd"
  say "the Python environment (.venv) installs in the background meanwhile (first time: ~3 GB of wheels, ~3 min; log: $VENV_LOG)"
  # The lock passes to the installer: it is released when the installer's last process ends.
  (exec make --no-print-directory -C "$REPO_ROOT" .venv/.installed) </dev/null >"$VENV_LOG" 2>&1 &
  exec {fd}>&-
}

wait_for_python_env() {  # before the first step that runs the virtualenv's Python
  if [[ -f "$VENV_LOCK" ]] && ! flock -n "$VENV_LOCK" true; then
    say "waiting for the Python environment to finish installing (log: $VENV_LOG)"
    local waited=$SECONDS
    until flock -w 60 "$VENV_LOCK" true; do
      say "  ... still installing ($(((SECONDS - waited) / 60)) min): $(grep -E '^(Collecting|Successfully)' "$VENV_LOG" | tail -n 1 | cut -c1-80)"
    done
  fi
  # Installed, not necessarily current: whether it is out of date is make's to say (`make install`).
  if [[ ! -x "$REPO_ROOT/.venv/bin/python" || ! -f "$REPO_ROOT/.venv/.installed" ]]; then
    [[ -f "$VENV_LOG" ]] && tail -n 20 "$VENV_LOG" >&2
    echo "cluster: the Python environment is not installed: make install" >&2
    exit 1
  fi
}

ensure_ports_free() {  # ensure_ports_free <port>...: fail at once if something already listens
  local port
  for port in "$@"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "cluster: 127.0.0.1:$port is already in use (another cluster?); move it with the GRPO_*_PORT variables in hack/lib.sh" >&2
      # Who holds it, when ss can tell: a component left without its pid file shows up here.
      ss -Hltnp "sport = :$port" 2>/dev/null | sed 's/^.*users:/  held by: /' >&2 || true
      exit 1
    fi
  done
}

# --- certificates and kubeconfigs ---------------------------------------------------------------

issue_cert() {  # issue_cert <name> <subject> <extendedKeyUsage> [subjectAltName]
  local name="$1" subject="$2" usage="$3" san="${4:-}"
  local ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=$usage"
  [[ -n "$san" ]] && ext+=$'\n'"subjectAltName=$san"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI_DIR/$name.key" -subj "$subject" \
    -out "$PKI_DIR/$name.csr" 2>/dev/null
  openssl x509 -req -in "$PKI_DIR/$name.csr" -CA "$PKI_DIR/ca.crt" -CAkey "$PKI_DIR/ca.key" \
    -CAcreateserial -days 3650 -out "$PKI_DIR/$name.crt" -extfile <(echo "$ext") 2>/dev/null
  rm -f "$PKI_DIR/$name.csr"
}

write_kubeconfig() {  # write_kubeconfig <file> <client cert name>
  local file="$1" cert="$2"
  rm -f "$file"
  "$KUBECTL" config --kubeconfig "$file" set-cluster grpo-local --embed-certs \
    --certificate-authority "$PKI_DIR/ca.crt" --server "https://127.0.0.1:$APISERVER_PORT" >/dev/null
  "$KUBECTL" config --kubeconfig "$file" set-credentials "$cert" --embed-certs \
    --client-certificate "$PKI_DIR/$cert.crt" --client-key "$PKI_DIR/$cert.key" >/dev/null
  "$KUBECTL" config --kubeconfig "$file" set-context grpo-local --cluster grpo-local --user "$cert" >/dev/null
  "$KUBECTL" config --kubeconfig "$file" use-context grpo-local >/dev/null
  chmod 600 "$file"
}

ensure_pki() {  # CA, serving and client certificates, service-account keys; kept across restarts
  if [[ ! -f "$PKI_DIR/.complete" ]]; then
    make_pki
  fi
  # The API server's identity towards kubelets (logs, exec, port-forward on the real node):
  # issued apart, so a cluster folder made before it gets one too.
  if [[ ! -f "$PKI_DIR/apiserver-kubelet-client.crt" ]]; then
    issue_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  fi
}

make_pki() {
  say "generating certificates in $PKI_DIR"
  rm -rf "$PKI_DIR" && mkdir -p "$PKI_DIR"
  openssl req -x509 -new -nodes -newkey rsa:2048 -keyout "$PKI_DIR/ca.key" -subj "/CN=grpo-test-ca" \
    -days 3650 -out "$PKI_DIR/ca.crt" 2>/dev/null
  # 10.96.0.1 is the first address of --service-cluster-ip-range: the in-cluster `kubernetes` service.
  issue_cert apiserver "/CN=kube-apiserver" serverAuth \
    "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  # Clients are identified by certificate: admin is in system:masters; the controller manager
  # and scheduler get the identities the bootstrap RBAC roles are bound to.
  issue_cert admin "/O=system:masters/CN=admin" clientAuth
  issue_cert controller-manager "/CN=system:kube-controller-manager" clientAuth
  issue_cert scheduler "/CN=system:kube-scheduler" clientAuth
  openssl genrsa -out "$PKI_DIR/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI_DIR/sa.key" -pubout -out "$PKI_DIR/sa.pub" 2>/dev/null
  touch "$PKI_DIR/.complete"
}

write_kubeconfigs() {  # on every start: they name the API server's port, which may have moved
  write_kubeconfig "$KUBECONFIG_PATH" admin
  write_kubeconfig "$PKI_DIR/controller-manager.kubeconfig" controller-manager
  write_kubeconfig "$PKI_DIR/scheduler.kubeconfig" scheduler
}

# --- control plane (local backend only) ---------------------------------------------------------

start_etcd() {
  # A fresh store on every start: each `cluster-up` begins from an empty cluster.
  rm -rf "$CLUSTER_DIR/etcd"
  # --unsafe-no-fsync: a throwaway test store; fsync costs seconds per write burst on slow disks.
  start_process etcd "$BIN_DIR/etcd" --name=grpo-test \
    --data-dir="$CLUSTER_DIR/etcd" \
    --listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="grpo-test=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync \
    --log-level=warn
  wait_until etcd 30 "etcd /health" http_ok "http://127.0.0.1:$ETCD_PORT/health"
}

start_apiserver() {
  start_process kube-apiserver "$BIN_DIR/kube-apiserver" \
    --bind-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --tls-cert-file="$PKI_DIR/apiserver.crt" --tls-private-key-file="$PKI_DIR/apiserver.key" \
    --client-ca-file="$PKI_DIR/ca.crt" \
    --authorization-mode=Node,RBAC \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI_DIR/sa.pub" \
    --service-account-signing-key-file="$PKI_DIR/sa.key" \
    --service-cluster-ip-range=10.96.0.0/16 \
    --allow-privileged=true \
    --kubelet-client-certificate="$PKI_DIR/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI_DIR/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --profiling="${GRPO_APISERVER_PROFILING:-false}"
  wait_until kube-apiserver 90 "kube-apiserver /readyz" kubectl get --raw /readyz
}

start_controller_manager() {
  # All default controllers (garbage collector, Job, service-account tokens, namespace deletion,
  # node lifecycle, ...); each runs under its own service account, as in a real cluster.
  start_process kube-controller-manager "$BIN_DIR/kube-controller-manager" \
    --kubeconfig="$PKI_DIR/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$CONTROLLER_MANAGER_PORT" \
    --leader-elect=false \
    --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI_DIR/sa.key" \
    --root-ca-file="$PKI_DIR/ca.crt" \
    --cluster-signing-cert-file="$PKI_DIR/ca.crt" --cluster-signing-key-file="$PKI_DIR/ca.key" \
    --profiling=false
}

start_scheduler() {
  start_process kube-scheduler "$BIN_DIR/kube-scheduler" \
    --kubeconfig="$PKI_DIR/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" \
    --leader-elect=false \
    --profiling=false
}

# --- what both backends add ---------------------------------------------------------------------

crds_established() {  # crds_established: every CRD Established, within 60 s
  # kubectl wait fails at once, instead of waiting, on a CRD whose status.conditions the API
  # server has not set yet ("accessor error: <nil>"), which happens just after creation.
  local deadline=$((SECONDS + 60))
  until kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      kubectl wait --for=condition=Established crd --all --timeout=1s >/dev/null # shows why
      return 1
    fi
    sleep 0.5
  done
}

install_crds() {
  say "installing the CRDs (KubeRay's, and this repository's crds/*.yaml)"
  # Server-side apply: the KubeRay CRDs exceed the annotation size limit of client-side apply.
  kubectl apply --server-side --force-conflicts -f "$BIN_DIR/kuberay-crds/" >/dev/null
  crds_established
  # Our own CRDs are the product under test, not part of the cluster: one the API server rejects
  # is reported here and fails the tests that need it, while the cluster itself stays up.
  if compgen -G "$REPO_ROOT/crds/*.yaml" >/dev/null; then
    if kubectl apply --server-side --force-conflicts -f "$REPO_ROOT/crds/" >"$LOG_DIR/crds.log" 2>&1; then
      crds_established
    else
      echo "WARNING: the API server rejected this repository's crds/ (the cluster stays up):" >&2
      sed 's/^/  /' "$LOG_DIR/crds.log" >&2
    fi
  fi
}

start_rayjobapi() {
  # From the virtualenv: the real backend (hack/rayjobapi/real.py) reads the cluster with
  # lightkube. Jobs stay scripted unless a test or a namespace label routes them to the real head.
  local python="$REPO_ROOT/.venv/bin/python"
  [[ -x "$python" ]] || die_with_log rayjobapi "$python is missing: run \`make install\` first"
  # A package started with `python -m` from hack/ (PYTHONPATH); the venv's python marks the process.
  start_process rayjobapi env NO_PROXY=127.0.0.1,localhost,::1 no_proxy=127.0.0.1,localhost,::1 \
    PYTHONPATH="$HACK_DIR" "$python" -m rayjobapi \
    --listen "127.0.0.1:$RAYJOBAPI_PORT" \
    --ray-dashboard "$RAY_DASHBOARD_URL" \
    --kubeconfig "$KUBECONFIG_PATH" \
    --pods-dir "$CLUSTER_DIR/pods" \
    --job-path "$REPO_ROOT/.venv/bin"
  wait_until rayjobapi 15 "the fake Ray job API" http_ok "$RAYJOBAPI_URL/_control/healthz"
}

start_kuberay() {
  # KubeRay reaches each head's dashboard at http://<svc>.<ns>.svc.cluster.local:8265 with Go's
  # default transport, which honours HTTP_PROXY: those calls land on the fake Ray job API.
  # Loopback (the API server) is never proxied by Go; NO_PROXY says so for other clients too.
  start_process kuberay-operator env \
    -u HTTPS_PROXY -u https_proxy \
    HTTP_PROXY="$RAYJOBAPI_URL" http_proxy="$RAYJOBAPI_URL" \
    NO_PROXY=127.0.0.1,localhost,::1 no_proxy=127.0.0.1,localhost,::1 \
    KUBECONFIG="$KUBECONFIG_PATH" \
    "$BIN_DIR/kuberay-operator" \
    --enable-leader-election=false \
    --metrics-addr="127.0.0.1:$KUBERAY_METRICS_PORT" \
    --health-probe-bind-address="127.0.0.1:$KUBERAY_PROBE_PORT" \
    --log-stdout-encoder=console
  wait_until kuberay-operator 60 "the KubeRay operator /readyz" \
    http_ok "http://127.0.0.1:$KUBERAY_PROBE_PORT/readyz"
}

start_kwok() {
  # The bare binary needs its Stage documents; these are kwok's stock ones (see build-binaries.sh).
  local config="$CLUSTER_DIR/kwok.yaml" stage
  : >"$config"
  for stage in "$BIN_DIR"/kwok-stages/*.yaml; do
    { cat "$stage"; echo "---"; } >>"$config"
  done
  say "creating the KWOK node pools"
  kubectl apply -f "$HACK_DIR/cluster/node-pools.yaml" >/dev/null
  # --node-lease-duration-seconds: kwok renews node leases like a kubelet, so the controller
  # manager's node lifecycle controller keeps the nodes Ready (the heartbeat stage relies on it).
  start_process kwok "$BIN_DIR/kwok" \
    --kubeconfig="$KUBECONFIG_PATH" \
    --config="$config" \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds=40 \
    --cidr=10.244.0.0/16 \
    --server-address="127.0.0.1:$KWOK_PORT"
  wait_until kwok 60 "every KWOK node to be Ready" \
    kubectl wait --for=condition=Ready node -l type=kwok --timeout=2s
}

start_provisioner() {
  # Claims of the default StorageClass `standard` are bound by a small fake provisioner
  # (hack/provisioner/), as a real cluster's CSI provisioner would: without it a pod with a claim
  # never schedules. kind ships its own `standard` class (local-path), whose helper pods cannot
  # run on KWOK nodes: ours replaces it.
  local python="$REPO_ROOT/.venv/bin/python"
  [[ -x "$python" ]] || die_with_log provisioner "$python is missing: run \`make install\` first"
  if [[ "$(kubectl get storageclass standard -o jsonpath='{.provisioner}' 2>/dev/null)" != grpo.dev/fake-local ]]; then
    kubectl delete storageclass standard --ignore-not-found >/dev/null
  fi
  kubectl apply -f "$HACK_DIR/provisioner/storageclass.yaml" >/dev/null
  start_process provisioner env KUBECONFIG="$KUBECONFIG_PATH" "$python" "$HACK_DIR/provisioner/provisioner.py" \
    --real-node "$NODE_NAME"
  # It has no health endpoint; one that cannot import or reach the API server exits at once.
  sleep 2
  pid_of provisioner >/dev/null || die_with_log provisioner "the volume provisioner exited at start"
}

start_out_of_cluster_components() {  # what both backends run beside the API server, in order
  # The Ray head first: it takes 10-20 s to come up, while the rest starts.
  say "starting the Ray head"
  start_ray_head
  install_crds
  say "starting the fake Ray job API"
  start_rayjobapi
  say "starting the KubeRay operator"
  start_kuberay
  say "starting the volume provisioner"
  start_provisioner
  say "starting kwok"
  start_kwok
  say "waiting for the Ray head"
  wait_for_ray_head
}

write_env_file() {  # write_env_file <backend>
  {
    echo "GRPO_TEST_CLUSTER=$1"
    echo "KUBECONFIG=$(printf %q "$KUBECONFIG_PATH")"
    echo "KUBECTL=$(printf %q "$KUBECTL")"
    echo "RAYJOBAPI_URL=$RAYJOBAPI_URL"
    echo "RAY_DASHBOARD_URL=$RAY_DASHBOARD_URL"
    echo "LOG_DIR=$(printf %q "$LOG_DIR")"
  } >"$ENV_FILE"
}

# The components in start order; cluster-down stops them in reverse.
LOCAL_COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler ray-head rayjobapi kuberay-operator provisioner kwok)

stop_components() {  # stop_components <name>...: in reverse order of the arguments
  local i
  for ((i = $# ; i > 0 ; i--)); do
    case "${!i}" in
      ray-head) stop_ray_head ;;
      *) stop_process "${!i}" ;;
    esac
  done
}

delete_test_namespaces() {
  # While KubeRay still runs: its RayJob finalizer must be removed by KubeRay itself, or the
  # namespaces hang in Terminating.
  local namespaces
  namespaces="$(kubectl get namespaces -l grpo.dev/test=true -o name 2>/dev/null)" || return 0
  [[ -n "$namespaces" ]] || return 0
  say "deleting $(wc -w <<<"$namespaces") test namespaces"
  # shellcheck disable=SC2086  # one argument per namespace
  kubectl delete --wait=true --timeout=90s $namespaces >/dev/null ||
    echo "warning: some test namespaces are still terminating" >&2
}

# --- the real Ray head ---------------------------------------------------------------------------

ray_temp_dir() {  # the head's --temp-dir: $CLUSTER_DIR/ray, unless Ray's socket paths would not fit
  # Ray keeps unix sockets at <temp-dir>/session_<date>_<time>_<usec>_<pid>/sockets/plasma_store
  # and refuses a path over 107 bytes; its own part takes up to 62 of them.
  local dir="$CLUSTER_DIR/ray"
  if ((${#dir} > 45)); then
    dir="/tmp/grpo-ray-$(printf %s "$CLUSTER_DIR" | sha256sum | cut -c1-12)"
  fi
  echo "$dir"
}

prune_ray_sessions() {  # prune_ray_sessions <temp dir>: keep the logs of the two previous heads
  local sessions old
  mapfile -t sessions < <(find "$1" -maxdepth 1 -name 'session_2*' -type d -printf '%f\n' 2>/dev/null | sort -r)
  for old in "${sessions[@]:2}"; do
    rm -rf "${1:?}/$old"
  done
}

start_ray_head() {  # starts `ray start --head --block`; wait_for_ray_head waits for its dashboard
  local ray="$REPO_ROOT/.venv/bin/ray" want temp_dir
  want="$(sed -n 's/^CUDA_RAY_VERSION=//p' "$REPO_ROOT/images/versions.env")"
  [[ -x "$ray" ]] ||
    die_with_log ray-head "$ray is missing: install ray[default]==$want into .venv (make install)"
  if ! compgen -G "$REPO_ROOT/.venv/lib/python3*/site-packages/ray-$want.dist-info" >/dev/null; then
    echo "WARNING: .venv's ray is not $want, the version the trainer images pin (images/versions.env)" >&2
  fi
  temp_dir="$(ray_temp_dir)"
  mkdir -p "$temp_dir"
  [[ "$temp_dir" == "$CLUSTER_DIR/ray" ]] || ln -sfn "$temp_dir" "$CLUSTER_DIR/ray"
  prune_ray_sessions "$temp_dir"
  # --block keeps `ray start` as the parent of every Ray process: SIGTERM to it stops them all, and
  # the kernel kills them if it dies. Loopback only: Ray binds 127.0.0.1 when it is the node's
  # address, and turns --node-ip-address=127.0.0.1 into the host's address unless
  # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (Ray's single-host mode). Two metrics ports have no flag,
  # only variables. The dashboard gives each of its nine module processes 30 s to start, which a
  # loaded 2-core machine overran: 180 s here. No KUBECONFIG: a job gets the credentials of its pod's ServiceAccount or none.
  start_process ray-head env -u KUBECONFIG -u RAY_ADDRESS \
    "$RAY_PROCESS_MARKER" \
    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 \
    RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT=180 \
    AUTOSCALER_METRIC_PORT="$RAY_AUTOSCALER_METRICS_PORT" \
    DASHBOARD_METRIC_PORT="$RAY_DASHBOARD_METRICS_PORT" \
    NO_PROXY=127.0.0.1,localhost,::1 no_proxy=127.0.0.1,localhost,::1 \
    "$ray" start --head --block \
    --node-ip-address=127.0.0.1 \
    --port="$RAY_GCS_PORT" \
    --dashboard-host=127.0.0.1 --dashboard-port="$RAY_DASHBOARD_PORT" \
    --node-manager-port="$RAY_NODE_MANAGER_PORT" \
    --object-manager-port="$RAY_OBJECT_MANAGER_PORT" \
    --ray-client-server-port="$RAY_CLIENT_SERVER_PORT" \
    --dashboard-agent-listen-port="$RAY_DASHBOARD_AGENT_PORT" \
    --dashboard-agent-grpc-port="$RAY_DASHBOARD_AGENT_GRPC_PORT" \
    --runtime-env-agent-port="$RAY_RUNTIME_ENV_AGENT_PORT" \
    --metrics-export-port="$RAY_METRICS_EXPORT_PORT" \
    --min-worker-port="$RAY_MIN_WORKER_PORT" --max-worker-port="$RAY_MAX_WORKER_PORT" \
    --temp-dir="$temp_dir" \
    --num-cpus="${GRPO_RAY_NUM_CPUS:-2}" --num-gpus=0 \
    --object-store-memory="${GRPO_RAY_OBJECT_STORE_BYTES:-536870912}" \
    --disable-usage-stats
}

wait_for_ray_head() {
  # The job API is served by the dashboard's JobHead module, the last piece to come up.
  wait_until ray-head 120 "the Ray head's job API" http_ok "$RAY_DASHBOARD_URL/api/version"
}

marked_pids() {  # the processes whose environment carries $RAY_PROCESS_MARKER (not this script)
  local file pid
  # One grep over every environ file; a process that exits meanwhile is skipped (-s).
  grep -lszxF -- "$RAY_PROCESS_MARKER" /proc/[0-9]*/environ 2>/dev/null | while read -r file; do
    pid="${file#/proc/}" && pid="${pid%/environ}"
    ((pid != $$)) && echo "$pid"
  done
  return 0
}

ray_session_pids() {  # ray_session_pids <sid>: Ray's own processes in the session `ray start` led
  # Ray renames its workers and dashboard modules (setproctitle), which overwrites the environment
  # /proc shows, so the marker misses them; they stay in the session start_process's setsid made,
  # and their names say they are Ray's (a pid reused by another session has no such names).
  local sid="$1" pid session cmdline
  [[ -n "$sid" ]] || return 0
  ps -e -o pid=,sid= | while read -r pid session; do
    ((session == sid && pid != $$)) || continue
    cmdline="$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" || continue
    if [[ "$cmdline" == ray::* || "$cmdline" == ray-dashboard-* || "$cmdline" == *"$REPO_ROOT/.venv/"* ]]; then
      echo "$pid"
    fi
  done
  return 0
}

ray_head_pids() {  # ray_head_pids [sid]: every process of the head, its jobs included
  { marked_pids; ray_session_pids "${1:-$(head -n1 "$PID_DIR/ray-head.pid" 2>/dev/null)}"; } | sort -un
}

stop_ray_head() {  # the head, then whatever of it is left: SIGTERM, SIGKILL after 5 s, until none stays
  # Until nothing of the head has been seen for a second: while it shuts down, Ray's dashboard
  # may still start a module process, and a killed process lingers while the kernel tears it down.
  local sid pids started=$SECONDS quiet=0 signal=TERM announced=""
  sid="$(head -n1 "$PID_DIR/ray-head.pid" 2>/dev/null)" || true
  stop_process ray-head
  while ((SECONDS - started < 30)); do
    mapfile -t pids < <(ray_head_pids "$sid")
    if ((${#pids[@]} == 0)); then
      ((++quiet >= 5)) && return 0
      sleep 0.2
      continue
    fi
    quiet=0
    ((SECONDS - started >= 5)) && signal=KILL
    if [[ "$announced" != "$signal" ]]; then
      say "stopping (SIG$signal) ${#pids[@]} processes that outlived the Ray head:" \
        "$(ps -o comm= -p "$(IFS=,; echo "${pids[*]}")" 2>/dev/null | sort | uniq -c | xargs)"
      announced=$signal
    fi
    kill "-$signal" "${pids[@]}" 2>/dev/null || true
    sleep 0.2
  done
  echo "warning: processes of the Ray head are still there after 30 s: ${pids[*]}" >&2
}
