#!/usr/bin/env bash
# Builds the real node's binaries from the Go module proxy (hack/node-up.sh): the kubelet and
# kube-proxy of the control plane's Kubernetes version, CoreDNS (hack/node/versions.env), and the
# pause program every pod's sandbox runs. containerd, runc and the CNI plugins are Debian's packages (hack/node-up.sh installs them).
# Cached in $NODE_BIN_DIR, keyed by versions.env; a stamp file makes reruns free.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

STAMP="$NODE_BIN_DIR/.complete"
if [[ -f "$STAMP" ]]; then
  echo "node binaries: cached in $NODE_BIN_DIR"
  exit 0
fi
WORK="$NODE_CACHE_ROOT/build"
LOG="$WORK/node-build.log"
mkdir -p "$NODE_BIN_DIR" "$WORK"
: >"$LOG"

step() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }
run() {  # run <command...>: into the log, with a line a minute while it takes long
  local pid started=$SECONDS next=$((SECONDS + 60)) status=0
  "$@" >>"$LOG" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if ((SECONDS >= next)) && kill -0 "$pid" 2>/dev/null; then
      step "  ... still at it ($(((SECONDS - started) / 60)) min): ${*:1:3}"
      next=$((next + 60))
    fi
  done
  wait "$pid" || status=$?
  if ((status != 0)); then
    echo "build failed: $*" >&2
    tail -n 40 "$LOG" >&2
    exit 1
  fi
}

if [[ ! -x "$NODE_BIN_DIR/kubelet" || ! -x "$NODE_BIN_DIR/kube-proxy" ]]; then
  step "kubernetes $KUBERNETES_VERSION (kubelet, kube-proxy; ~10 min on 2 cores the first time)"
  # The same wrapper module as build-binaries.sh: k8s.io/kubernetes pins its staging modules at
  # v0.0.0 with replaces into ./staging, so each one points at its published tag instead.
  rm -rf "${WORK:?}/kubernetes-node" && mkdir -p "$WORK/kubernetes-node" && cd "$WORK/kubernetes-node"
  run go mod init local/kubernetes-node
  moddir_mod="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
  staging_tag="v0${KUBERNETES_VERSION#v1}"
  for m in $(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$moddir_mod"); do
    run go mod edit -replace="$m=$m@$staging_tag"
  done
  run go get "k8s.io/kubernetes@$KUBERNETES_VERSION"
  minor="$(echo "$KUBERNETES_VERSION" | cut -d. -f2)"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  for cmd in kubelet kube-proxy; do
    run go get "k8s.io/kubernetes/cmd/$cmd@$KUBERNETES_VERSION"
  done
  run go build -trimpath -ldflags "$ldflags" -o "$NODE_BIN_DIR/" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy
fi

if [[ ! -x "$NODE_BIN_DIR/coredns" ]]; then
  step "coredns $COREDNS_VERSION with the node's plugins (hack/node/coredns/main.go)"
  rm -rf "${WORK:?}/coredns" && mkdir -p "$WORK/coredns" && cd "$WORK/coredns"
  cp "$HACK_DIR/node/coredns/main.go" .
  run go mod init local/coredns
  run go get "github.com/coredns/coredns@$COREDNS_VERSION"
  run go mod tidy
  run go build -trimpath -ldflags "-s -w" -o "$NODE_BIN_DIR/coredns" .
fi

if [[ ! -x "$NODE_BIN_DIR/pause" ]]; then
  step "pause (hack/node/pause.c, static)"
  run gcc -Os -static -o "$NODE_BIN_DIR/pause" "$HACK_DIR/node/pause.c"
  strip "$NODE_BIN_DIR/pause"
fi

date -u +%FT%TZ >"$STAMP"
step "node binaries ready in $NODE_BIN_DIR"
