#!/usr/bin/env bash
# Builds the real node's binaries from the Go module proxy (hack/node-up.sh): the kubelet and
# kube-proxy of the control plane's Kubernetes version, CoreDNS (hack/node/versions.env), and the
# pause program every pod's sandbox runs. containerd, runc and the CNI plugins are Debian's packages (hack/node-up.sh installs them).
# Cached in $NODE_BIN_DIR, keyed by versions.env; a stamp file makes reruns free.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

STAMP="$NODE_BIN_DIR/.complete"
NETPOL_STAMP="$NETPOL_BIN_DIR/.complete"
if [[ -f "$STAMP" && -f "$NETPOL_STAMP" ]]; then
  echo "node binaries: cached in $NODE_BIN_DIR and $NETPOL_BIN_DIR"
  exit 0
fi
WORK="$NODE_CACHE_ROOT/build"
LOG="$WORK/node-build.log"
mkdir -p "$NODE_BIN_DIR" "$NETPOL_BIN_DIR" "$WORK"
: >"$LOG"

. "$HACK_DIR/build-lib.sh"

# The NetworkPolicy enforcer (hack/node/netpol.env): kube-router's one binary, of which the node
# runs the firewall only. Its own folder and stamp, so the kubelet's cache stays when it changes.
if [[ ! -f "$NETPOL_STAMP" ]]; then
  step "kube-router $KUBE_ROUTER_VERSION (the NetworkPolicy enforcer; ~5 min on 2 cores the first time)"
  (
    wrapper kube-router
    run go get "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION"
    run go build -trimpath -ldflags "-s -w" -o "$NETPOL_BIN_DIR/kube-router" \
      github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
  )
  date -u +%FT%TZ >"$NETPOL_STAMP"
fi
if [[ -f "$STAMP" ]]; then
  step "node binaries ready in $NODE_BIN_DIR and $NETPOL_BIN_DIR"
  exit 0
fi

if [[ ! -x "$NODE_BIN_DIR/kubelet" || ! -x "$NODE_BIN_DIR/kube-proxy" ]]; then
  step "kubernetes $KUBERNETES_VERSION (kubelet, kube-proxy; ~10 min on 2 cores the first time)"
  build_kubernetes kubernetes-node "$NODE_BIN_DIR" kubelet kube-proxy
fi

if [[ ! -x "$NODE_BIN_DIR/coredns" ]]; then
  step "coredns $COREDNS_VERSION with the node's plugins (hack/node/coredns/main.go)"
  wrapper coredns
  cp "$HACK_DIR/node/coredns/main.go" .
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
