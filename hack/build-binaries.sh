#!/usr/bin/env bash
# Builds the local test cluster's binaries from the Go module proxy:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok,
# the KubeRay operator (plus its CRDs) and helm. Idempotent: a stamp file marks
# a finished build, and a second run returns at once. No symbol tables or DWARF (-s -w), as the
# Kubernetes binaries: nobody debugs them here, and linking without them is quicker.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

STAMP="$BIN_DIR/.complete"
if [[ -f "$STAMP" ]]; then
  echo "cluster binaries: cached in $BIN_DIR"
  exit 0
fi
mkdir -p "$BIN_DIR" "$CACHE_ROOT/build"
WORK="$CACHE_ROOT/build"
LOG="$CACHE_ROOT/build/build.log"
: >"$LOG"

. "$HACK_DIR/build-lib.sh"

if [[ ! -x "$BIN_DIR/etcd" ]]; then
  step "etcd $ETCD_VERSION"
  # etcd's go.mod has replace directives, which `go install pkg@v` refuses.
  wrapper etcd
  run go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  run go build -trimpath -ldflags "-s -w" -o "$BIN_DIR/etcd" go.etcd.io/etcd/server/v3
fi

if [[ ! -x "$BIN_DIR/kwok" ]]; then
  step "kwok $KWOK_VERSION"
  run env GOBIN="$BIN_DIR" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
fi

if [[ ! -d "$BIN_DIR/kwok-stages" ]]; then
  # The bare kwok binary plays nothing without Stage documents in --config: keep the stock
  # ones (what `kwokctl` calls "fast" with lease heartbeats) next to the binary.
  moddir="$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')"
  mkdir -p "$BIN_DIR/kwok-stages"
  cp "$moddir"/kustomize/stage/node/fast/node-initialize.yaml \
    "$moddir"/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    "$moddir"/kustomize/stage/pod/fast/pod-ready.yaml \
    "$moddir"/kustomize/stage/pod/fast/pod-complete.yaml \
    "$moddir"/kustomize/stage/pod/fast/pod-delete.yaml \
    "$BIN_DIR/kwok-stages/"
  chmod u+w "$BIN_DIR/kwok-stages/"*.yaml
fi

if [[ ! -x "$BIN_DIR/kuberay-operator" ]]; then
  step "kuberay operator $KUBERAY_VERSION"
  run env GOBIN="$WORK/kuberay-bin" go install -trimpath -ldflags "-s -w" "github.com/ray-project/kuberay/ray-operator@$KUBERAY_VERSION"
  mv "$WORK/kuberay-bin/ray-operator" "$BIN_DIR/kuberay-operator"
fi
if [[ ! -d "$BIN_DIR/kuberay-crds" ]]; then
  moddir="$(go mod download -json "github.com/ray-project/kuberay/ray-operator@$KUBERAY_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')"
  mkdir -p "$BIN_DIR/kuberay-crds"
  cp "$moddir"/config/crd/bases/*.yaml "$BIN_DIR/kuberay-crds/"
  chmod u+w "$BIN_DIR/kuberay-crds/"*.yaml
fi

if [[ ! -x "$BIN_DIR/helm" ]]; then
  step "helm $HELM_VERSION"
  run env GOBIN="$BIN_DIR" go install -trimpath -ldflags "-s -w" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi

if [[ ! -x "$BIN_DIR/kube-apiserver" || ! -x "$BIN_DIR/kubectl" ]]; then
  step "kubernetes $KUBERNETES_VERSION (apiserver, controller-manager, scheduler, kubectl)"
  build_kubernetes kubernetes "$BIN_DIR" kube-apiserver kube-controller-manager kube-scheduler kubectl
fi

date -u +%FT%TZ >"$STAMP"
step "cluster binaries ready in $BIN_DIR"
