# Paths and the engine of the kind backend (hack/kind-node-image.sh, hack/kind-up.sh,
# hack/kind-down.sh). Source it after lib.sh; its functions need cluster-lib.sh.
# shellcheck shell=bash
# shellcheck source=kind/versions.env
. "$HACK_DIR/kind/versions.env"
# shellcheck source=engine-lib.sh
. "$HACK_DIR/engine-lib.sh"
# Its own cache root, so a checkout that shares another's control-plane binaries (GRPO_CACHE_DIR)
# keeps the node image's inputs and its engine to itself.
KIND_CACHE_ROOT="${GRPO_KIND_CACHE_DIR:-$CACHE_ROOT}"
KIND_KEY="$(cat "$HACK_DIR/versions.env" "$HACK_DIR/node/versions.env" "$HACK_DIR/kind/versions.env" |
  sha256sum | cut -c1-12)"
# kind, kubeadm, kube-network-policies (built), and the other binaries copied from the caches
# of hack/build-binaries.sh and hack/build-node-binaries.sh.
KIND_BIN_DIR="$KIND_CACHE_ROOT/kind-$KIND_KEY"
KIND="$KIND_BIN_DIR/kind"
# The node image's tag also covers the files it is built from (hack/kind/node).
KIND_NODE_IMAGE="grpo-local/kind-node:$KUBERNETES_VERSION-$(find "$HACK_DIR/kind" \
  "$HACK_DIR/kind-node-image.sh" -type f -print0 | sort -z | xargs -0 cat | sha256sum | cut -c1-12)"
KIND_CLUSTER_NAME="${GRPO_KIND_CLUSTER_NAME:-grpo-e2e$PORT_OFFSET}"
# The backend's state (kubeconfig, pids, logs, cluster.env), apart from the local cluster's;
# tests/support/cluster.py reads cluster.env there.
KIND_CLUSTER_DIR="${GRPO_KIND_CLUSTER_DIR:-${GRPO_KIND_CACHE_DIR:-$STATE_ROOT}/kind}"

# kind's own Docker engine: a second dockerd beside any other on the machine, with its own data
# root, socket, containerd and pid file, so creating, loading and deleting kind nodes never touches
# another engine's containers, images or networks. Its default OCI runtime is
# hack/engine/runc-without-sys-resource: kind starts nodes with --privileged, which asks for
# CAP_SYS_RESOURCE, a capability machines like these withhold from every process. No iptables
# rules of its own (another engine may own the host's DOCKER chains): published ports go through
# docker-proxy on loopback, and no default bridge (docker0 may be another engine's).
KIND_ENGINE_DIR="${GRPO_KIND_ENGINE_DIR:-$KIND_CACHE_ROOT/kind-engine}"
# containerd's sockets live under the exec root; unix socket paths are limited to 108 bytes.
KIND_ENGINE_RUN="/run/grpo-kind-$(echo "$KIND_ENGINE_DIR" | sha256sum | cut -c1-8)"
export DOCKER_HOST="unix://$KIND_ENGINE_RUN/docker.sock"

start_kind_engine() {  # start_kind_engine: the kind engine, started if it does not answer
  docker info >/dev/null 2>&1 && return 0
  if ((EUID != 0)); then
    echo "kind-up: the kind backend starts a dockerd of its own; it needs root (and Debian's" \
      "docker.io and jq, which it installs where they are missing)" >&2
    exit 1
  fi
  install_engine_packages "$KIND_ENGINE_DIR/logs/apt.log" || exit 1
  say "starting kind's dockerd (data in $KIND_ENGINE_DIR/data, log $KIND_ENGINE_DIR/logs/dockerd.log)"
  local started=$SECONDS
  mkdir -p "$KIND_ENGINE_DIR/data" "$KIND_ENGINE_RUN"
  CLUSTER_DIR="$KIND_ENGINE_DIR" PID_DIR="$KIND_ENGINE_DIR/pids" LOG_DIR="$KIND_ENGINE_DIR/logs" \
    start_process dockerd "$(command -v dockerd)" \
    --host="$DOCKER_HOST" \
    --data-root="$KIND_ENGINE_DIR/data" \
    --exec-root="$KIND_ENGINE_RUN" \
    --pidfile="$KIND_ENGINE_RUN/dockerd.pid" \
    --bridge=none --iptables=false --ip-masq=false --ip=127.0.0.1 \
    --add-runtime=runc-without-sys-resource="$HACK_DIR/engine/runc-without-sys-resource" \
    --default-runtime=runc-without-sys-resource
  PID_DIR="$KIND_ENGINE_DIR/pids" LOG_DIR="$KIND_ENGINE_DIR/logs" \
    wait_until dockerd 60 "kind's dockerd to answer" docker info
  say "kind's engine ready in $((SECONDS - started)) s"
}

stop_kind_engine() {  # stop_kind_engine: by its pid file (its containers stop with it)
  PID_DIR="$KIND_ENGINE_DIR/pids" stop_process dockerd
}
