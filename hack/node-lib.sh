# Functions of the real node (hack/node-up.sh, hack/node-down.sh, hack/cluster-down.sh).
# Source it after lib.sh and cluster-lib.sh. Its processes have pid files beside the cluster's.
# shellcheck shell=bash

NODE_DIR="$CLUSTER_DIR/node"
# Sockets and the runtime state live on tmpfs, under a short path (a unix socket's path must fit
# in 107 bytes), one folder per cluster folder.
NODE_RUN_DIR="/run/grpo-node-$(printf %s "$CLUSTER_DIR" | sha256sum | cut -c1-12)"
CONTAINERD_SOCKET="$NODE_RUN_DIR/containerd.sock"
NODE_KUBECONFIG="$PKI_DIR/node.kubeconfig"
PAUSE_IMAGE="docker.io/grpo-local/pause:$(sha256sum "$HACK_DIR/node/pause.c" | cut -c1-10)"
# The images the node's pods run: what images/build.sh builds for this checkout's version.
NODE_IMAGES_TAG="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO_ROOT/pyproject.toml" | head -n 1)"
read -r -a NODE_IMAGES <<<"${GRPO_NODE_IMAGES:-ghcr.io/grpo-operator/operator:$NODE_IMAGES_TAG ghcr.io/grpo-operator/trainer-cpu:$NODE_IMAGES_TAG}"

ctr() { command ctr --address "$CONTAINERD_SOCKET" --namespace k8s.io "$@"; }

node_is_up() {
  pid_of containerd >/dev/null && pid_of coredns >/dev/null && pid_of kubelet >/dev/null &&
    pid_of kube-router >/dev/null &&
    [[ "$(kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}

ensure_node_packages() {  # Debian's containerd, runc, CNI plugins; jq for the runtime wrapper
  local missing=()
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  command -v jq >/dev/null || missing+=(jq)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v ipset >/dev/null || missing+=(ipset)
  [[ -x /usr/bin/docker-registry ]] || missing+=(docker-registry)
  ((${#missing[@]} == 0)) && return 0
  if ((EUID != 0)); then
    echo "node: missing ${missing[*]}; as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  say "installing Debian's ${missing[*]} (apt-get)"
  mkdir -p "$LOG_DIR"
  if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends "${missing[@]}"; } >"$LOG_DIR/node-apt.log" 2>&1; then
    tail -n 20 "$LOG_DIR/node-apt.log" >&2
    exit 1
  fi
}

ensure_node_pki() {  # the kubelet's client certificate (the Node authorizer's identity) and kubeconfig
  if [[ ! -f "$PKI_DIR/node-$NODE_NAME.crt" ]]; then
    issue_cert "node-$NODE_NAME" "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
  fi
  write_kubeconfig "$NODE_KUBECONFIG" "node-$NODE_NAME"
}

start_coredns() {  # the cluster's DNS, on the pods' gateway address (the kubelet's clusterDNS)
  if [[ ! -f "$PKI_DIR/coredns.crt" ]]; then
    issue_cert coredns "/CN=system:coredns" clientAuth
  fi
  write_kubeconfig "$PKI_DIR/coredns.kubeconfig" coredns
  kubectl apply -f "$HACK_DIR/node/coredns-rbac.yaml" >/dev/null
  # Cluster names from the API server; the rest from the host's resolver. Port 53 of an address
  # only this host and its pods reach.
  cat >"$NODE_DIR/Corefile" <<COREFILE
.:53 {
    bind $NODE_GATEWAY_IP
    errors
    health 127.0.0.1:$COREDNS_HEALTH_PORT
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $PKI_DIR/coredns.kubeconfig grpo-local
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    forward . /etc/resolv.conf
    cache 5
}
COREFILE
  start_process coredns "$NODE_BIN_DIR/coredns" -conf "$NODE_DIR/Corefile"
  wait_until coredns 30 "CoreDNS /health" http_ok "http://127.0.0.1:$COREDNS_HEALTH_PORT/health"
}

ensure_bridge() {  # the pods' bridge with its gateway address, made before the kubelet binds to it
  if ! ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
    ip link add "$NODE_BRIDGE" type bridge
  fi
  ip addr replace "$NODE_GATEWAY_IP/${NODE_POD_CIDR#*/}" dev "$NODE_BRIDGE"
  ip link set "$NODE_BRIDGE" up
  sysctl -qw net.ipv4.ip_forward=1
}

# The `kubernetes` Service for pods: its ClusterIP and port, routed from the pod bridge to the API
# server on loopback. The API server listens on 127.0.0.1 only (nothing of the cluster listens
# outside loopback), and kube-proxy can only forward a ClusterIP to a Service's endpoints, which
# may not be loopback addresses; so the one Service pods need, the API server, is one DNAT rule
# and route_localnet on the bridge (what kube-proxy itself does for node ports on localhost).
# The serving certificate names 10.96.0.1 and kubernetes.default.svc.
API_SERVICE_IP=10.96.0.1
API_RULE=(PREROUTING -i "$NODE_BRIDGE" -d "$API_SERVICE_IP/32" -p tcp --dport 443
  -m comment --comment "grpo-node $NODE_BRIDGE: the kubernetes Service"
  -j DNAT --to-destination "127.0.0.1:$APISERVER_PORT")

# Pod to pod across the bridge: with br_netfilter, bridged packets pass iptables' FORWARD chain,
# whose policy the local engine (dockerd) sets to DROP; a Ray worker could not reach its head.
FORWARD_RULES=("FORWARD -i $NODE_BRIDGE" "FORWARD -o $NODE_BRIDGE")

route_api_service() {
  sysctl -qw "net.ipv4.conf.$NODE_BRIDGE.route_localnet=1"
  iptables -t nat -C "${API_RULE[@]}" 2>/dev/null || iptables -t nat -I "${API_RULE[@]}"
  local rule
  for rule in "${FORWARD_RULES[@]}"; do
    # shellcheck disable=SC2086  # the rule's words
    iptables -C $rule -m comment --comment "grpo-node $NODE_BRIDGE: pods" -j ACCEPT 2>/dev/null ||
      iptables -I $rule -m comment --comment "grpo-node $NODE_BRIDGE: pods" -j ACCEPT
  done
}

unroute_api_service() {
  while iptables -t nat -D "${API_RULE[@]}" 2>/dev/null; do :; done
  local rule
  for rule in "${FORWARD_RULES[@]}"; do
    # shellcheck disable=SC2086
    while iptables -D $rule -m comment --comment "grpo-node $NODE_BRIDGE: pods" -j ACCEPT 2>/dev/null; do :; done
  done
}

write_cni_config() {
  mkdir -p "$NODE_DIR/cni" "$NODE_DIR/cni-ipam"
  cat >"$NODE_DIR/cni/10-grpo.conflist" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "grpo-pods-$NODE_BRIDGE",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$NODE_DIR/cni-ipam",
        "ranges": [[{"subnet": "$NODE_POD_CIDR", "gateway": "$NODE_GATEWAY_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
}

start_containerd() {
  mkdir -p "$NODE_DIR/containerd" "$NODE_RUN_DIR"
  # The CRI plugin runs every container through the engine's runtime wrapper (runc without
  # CAP_SYS_RESOURCE, which this kind of machine withholds), with cgroupfs (cgroup v1 here).
  # Without that capability no process may lower its oom_score_adj, which the CRI asks for every
  # sandbox (-998): runc's init then dies ("can't get final child's PID from pipe").
  # restrict_oom_score_adj caps the value at containerd's own.
  cat >"$NODE_DIR/containerd.toml" <<TOML
version = 2
root = "$NODE_DIR/containerd"
state = "$NODE_RUN_DIR/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$CONTAINERD_SOCKET"
[ttrpc]
  address = "$CONTAINERD_SOCKET.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$NODE_DIR/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  disable_apparmor = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$HACK_DIR/engine/runc-without-sys-resource"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$NODE_DIR/certs.d"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE_DIR/cni"
    max_conf_num = 1
TOML
  start_process containerd "$(command -v containerd)" --config "$NODE_DIR/containerd.toml"
  wait_until containerd 30 "containerd to answer" ctr version
}

start_registry() {  # the node's image registry: loopback only, its layers kept in the node's folder
  mkdir -p "$NODE_DIR/registry" "$NODE_DIR/certs.d/ghcr.io"
  cat >"$NODE_DIR/registry.yml" <<YAML
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $NODE_DIR/registry}
  delete: {enabled: true}
http:
  addr: 127.0.0.1:$NODE_REGISTRY_PORT
YAML
  # The pods name the images as users do (ghcr.io/grpo-operator/...): containerd resolves ghcr.io
  # through this registry first, so the same names pull here and from the real registry elsewhere.
  cat >"$NODE_DIR/certs.d/ghcr.io/hosts.toml" <<TOML
server = "https://ghcr.io"
[host."http://127.0.0.1:$NODE_REGISTRY_PORT"]
  capabilities = ["pull", "resolve"]
TOML
  if ! pid_of registry >/dev/null; then
    ensure_ports_free "$NODE_REGISTRY_PORT"
    start_process registry /usr/bin/docker-registry serve "$NODE_DIR/registry.yml"
  fi
  wait_until registry 30 "the node's registry to answer" curl -fsS -o /dev/null "http://127.0.0.1:$NODE_REGISTRY_PORT/v2/"
}

ship_image() {  # ship_image <ref>: push to the node's registry and pull into its containerd, when changed
  local ref="$1" id stamp
  id="$(docker image inspect -f '{{.Id}}' "$ref" 2>/dev/null)" ||
    die_with_log containerd "image $ref is not in the local engine: build it first (make images)"
  stamp="$NODE_DIR/imported/$(printf %s "$ref" | tr '/:' '__')"
  local present
  present="$(ctr images ls -q 2>/dev/null)" || present=""
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$id" ]] && grep -qxF "$ref" <<<"$present"; then
    return 0
  fi
  [[ "$ref" == ghcr.io/* ]] || die_with_log registry "image $ref: the node's registry serves ghcr.io/... names only"
  local mirrored="127.0.0.1:$NODE_REGISTRY_PORT/${ref#ghcr.io/}" started=$SECONDS
  # Both sides move only the layers the other lacks: after a code change, the package's few
  # megabytes, not the gigabytes of dependencies below them (Dockerfile.cuda's layers).
  say "shipping $ref ($(docker image inspect -f '{{.Size}}' "$ref" | numfmt --to=si)B, only the layers the node lacks)"
  mkdir -p "$NODE_DIR/imported"
  docker tag "$ref" "$mirrored"
  { docker push "$mirrored" && docker rmi "$mirrored"; } >>"$LOG_DIR/registry-push.log" 2>&1 ||
    die_with_log registry-push "pushing $ref to the node's registry failed"
  ctr images pull --hosts-dir "$NODE_DIR/certs.d" "$ref" >>"$LOG_DIR/containerd-pull.log" 2>&1 ||
    die_with_log containerd-pull "pulling $ref into the node's containerd failed"
  say "shipped $ref in $((SECONDS - started)) s"
  printf '%s\n' "$id" >"$stamp"
}

import_pause_image() {  # the sandbox image, built here from hack/node/pause.c and imported whole (683 kB)
  local ref="${PAUSE_IMAGE#docker.io/}" id stamp
  if ! docker image inspect "$ref" >/dev/null 2>&1; then
    local dir
    dir="$(mktemp -d)"
    cp "$NODE_BIN_DIR/pause" "$dir/pause"
    tar -C "$dir" -c pause | docker import --change 'ENTRYPOINT ["/pause"]' --change 'USER 65535:65535' \
      - "$ref" >/dev/null
    rm -rf "$dir"
  fi
  id="$(docker image inspect -f '{{.Id}}' "$ref")"
  stamp="$NODE_DIR/imported/pause"
  # (The list is read whole first: grep -q stopping early would fail the pipeline under pipefail.)
  local present
  present="$(ctr images ls -q 2>/dev/null)" || present=""
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$id" ]] && grep -qxF "$PAUSE_IMAGE" <<<"$present"; then
    return 0
  fi
  mkdir -p "$NODE_DIR/imported"
  docker save "$ref" | ctr images import --no-unpack=false - >>"$LOG_DIR/containerd-import.log" 2>&1 ||
    die_with_log containerd-import "importing $ref failed"
  printf '%s\n' "$id" >"$stamp"
}

import_images() {  # the pause image, then the product's images through the node's registry
  start_registry
  import_pause_image
  local ref
  for ref in "${NODE_IMAGES[@]}"; do
    ship_image "$ref"
  done
}

start_kubelet() {
  mkdir -p "$NODE_DIR/kubelet" "$NODE_DIR/kubelet-pki"
  # Loopback is refused as a node address, so the kubelet serves on the pods' gateway address:
  # reachable from this host and its pods only. Image garbage collection is off (the imported
  # images cannot be pulled back); eviction thresholds suit a shared development disk.
  cat >"$NODE_DIR/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_GATEWAY_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI_DIR/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$CONTAINERD_SOCKET
clusterDomain: cluster.local
clusterDNS: [$NODE_GATEWAY_IP]
podCIDR: $NODE_POD_CIDR
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 200Mi, nodefs.available: 2%, imagefs.available: 2%}
rotateCertificates: false
YAML
  start_process kubelet "$NODE_BIN_DIR/kubelet" \
    --config="$NODE_DIR/kubelet.yaml" \
    --kubeconfig="$NODE_KUBECONFIG" \
    --hostname-override="$NODE_NAME" \
    --node-ip="$NODE_GATEWAY_IP" \
    --node-labels="grpo.dev/pool=cpu,type=real" \
    --register-with-taints="$NODE_TAINT" \
    --root-dir="$NODE_DIR/kubelet" \
    --cert-dir="$NODE_DIR/kubelet-pki" \
    --v=1
  wait_until kubelet 120 "node $NODE_NAME to be Ready" \
    kubectl wait --for=condition=Ready "node/$NODE_NAME" --timeout=2s
}

# The NetworkPolicy enforcer: kube-router's firewall only (hack/node/netpol.env says why this one).
# It writes a chain per local pod (KUBE-POD-FW-*) and per policy (KUBE-NWPLCY-*) into the filter
# table, jumps to them from INPUT, FORWARD and OUTPUT ahead of the pod bridge's ACCEPT rules, and
# keeps each policy's peers in ipsets (KUBE-SRC-*, KUBE-DST-*). Bridged pod-to-pod packets pass
# FORWARD through br_netfilter, so a policy holds between two pods of this one node; traffic from
# the host itself (KubeRay and the fake job API run there) is let through, as kube-router does
# for a pod's own node. Health and metrics ports off: nothing of it listens.
start_netpol() {
  if [[ ! -f "$PKI_DIR/kube-router.crt" ]]; then
    issue_cert kube-router "/CN=system:kube-router" clientAuth
  fi
  write_kubeconfig "$PKI_DIR/kube-router.kubeconfig" kube-router
  kubectl apply -f "$HACK_DIR/node/kube-router-rbac.yaml" >/dev/null
  remove_netpol_rules
  start_process kube-router "$NETPOL_BIN_DIR/kube-router" \
    --kubeconfig="$PKI_DIR/kube-router.kubeconfig" \
    --hostname-override="$NODE_NAME" \
    --run-firewall=true --run-router=false --run-service-proxy=false --run-loadbalancer=false \
    --enable-cni=false --enable-ipv4=true --enable-ipv6=false \
    --service-cluster-ip-range=10.96.0.0/12 \
    --health-port=0 --metrics-port=0 \
    --v=1
  # Ready once its first full sync has written the filter table.
  wait_until kube-router 120 "kube-router's first policy sync" \
    grep -q "sync iptables took" "$LOG_DIR/kube-router.log"
}

remove_netpol_rules() {  # what kube-router wrote: its jumps, its chains, its ipsets (by their prefixes)
  local rule chain set
  { iptables -S 2>/dev/null || true; } | { grep -E '^-A (INPUT|FORWARD|OUTPUT) .*-j KUBE-ROUTER-' || true; } |
    while read -r rule; do
      # shellcheck disable=SC2086  # the rule's words, as iptables printed them
      eval "iptables ${rule/-A /-D }" 2>/dev/null || true
    done
  local chains
  chains="$({ iptables -S 2>/dev/null || true; } | sed -n -E 's/^-N ((KUBE-ROUTER-|KUBE-POD-FW-|KUBE-NWPLCY-)[^ ]*)$/\1/p')"
  for chain in $chains; do iptables -F "$chain" 2>/dev/null || true; done
  for chain in $chains; do iptables -X "$chain" 2>/dev/null || true; done
  for set in $({ ipset list -n 2>/dev/null || true; } | grep -E '^(KUBE-SRC-|KUBE-DST-)' || true); do
    ipset destroy "$set" 2>/dev/null || true
  done
}

stop_node_pods() {  # every pod container of the node's containerd, before the kubelet goes
  pid_of containerd >/dev/null || return 0
  local ids
  ids="$(ctr tasks ls -q 2>/dev/null)" || true
  [[ -n "$ids" ]] || return 0
  say "stopping $(wc -w <<<"$ids") containers of node $NODE_NAME"
  local id
  for id in $ids; do ctr tasks kill --signal SIGKILL "$id" >/dev/null 2>&1 || true; done
  sleep 1
  for id in $ids; do
    ctr tasks delete --force "$id" >/dev/null 2>&1 || true
    ctr containers delete "$id" >/dev/null 2>&1 || true
  done
}

drain_node() {  # the kubelet stops the node's pods itself: their sandboxes' networks torn down by CNI
  pid_of kubelet >/dev/null && pid_of kube-apiserver >/dev/null || return 0
  local pods
  pods="$(kubectl get pods --all-namespaces --field-selector "spec.nodeName=$NODE_NAME" -o name 2>/dev/null | wc -l)"
  ((pods > 0)) || return 0
  say "deleting the $pods pods of node $NODE_NAME"
  kubectl delete pods --all-namespaces --field-selector "spec.nodeName=$NODE_NAME" \
    --grace-period=5 --wait=true --timeout=60s >/dev/null 2>&1 || true
}

stop_node() {  # pods, kubelet, containerd, the Node object, the bridge and the pods' namespaces
  drain_node
  stop_process kube-router
  remove_netpol_rules
  stop_process kubelet
  stop_node_pods
  stop_process containerd
  stop_process coredns
  stop_process registry
  # containerd's shims outlive it by design: any left for this node's socket go now.
  local pid
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCKET" 2>/dev/null); do
    kill -KILL "$pid" 2>/dev/null || true
  done
  # The kubelet's volume mounts (emptyDir, projected tokens) and the sandboxes' /dev/shm mounts.
  { grep -F -e " $NODE_DIR/kubelet/" -e " $NODE_RUN_DIR/" /proc/self/mounts || true; } |
    cut -d' ' -f2 | sort -r | while read -r mnt; do
      umount -l "$mnt" 2>/dev/null || true
    done
  rm -rf "$NODE_DIR/cni-ipam" "$NODE_RUN_DIR" 2>/dev/null || echo "warning: $NODE_RUN_DIR is still in use" >&2
  if pid_of kube-apiserver >/dev/null; then
    kubectl delete node "$NODE_NAME" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  fi
  unroute_api_service
  remove_cni_leftovers
  ip link del "$NODE_BRIDGE" 2>/dev/null || true
}

remove_cni_leftovers() {  # the bridge plugin's masquerade rules of sandboxes never torn down
  local rule chain
  { iptables -t nat -S POSTROUTING 2>/dev/null || true; } | { grep -F "name: \\\"grpo-pods-$NODE_BRIDGE\\\"" || true; } | while read -r rule; do
    chain="${rule##* -j }"
    # shellcheck disable=SC2086  # the rule's words, as iptables printed them
    eval "iptables -t nat ${rule/-A /-D }" 2>/dev/null || true
    iptables -t nat -F "$chain" 2>/dev/null && iptables -t nat -X "$chain" 2>/dev/null || true
  done
}
