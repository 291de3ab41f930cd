#!/usr/bin/env bash
# Builds the local test cluster's binaries from the Go module proxy:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok,
# the KubeRay operator (plus its CRDs) and helm. Idempotent: a stamp file marks
# a finished build, and a second run returns at once.
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

step() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }
run() {  # run <command...>: into the log, with a line a minute while it takes long (no silent minutes)
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

wrapper() {  # wrapper <dir> : a fresh throwaway module to build other modules' mains in
  rm -rf "${WORK:?}/${1:?}"; mkdir -p "$WORK/$1"; cd "$WORK/$1"
  run go mod init "local/$1"
}

if [[ ! -x "$BIN_DIR/etcd" ]]; then
  step "etcd $ETCD_VERSION"
  # etcd's go.mod has replace directives, which `go install pkg@v` refuses.
  wrapper etcd
  run go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  run go build -trimpath -o "$BIN_DIR/etcd" go.etcd.io/etcd/server/v3
fi

if [[ ! -x "$BIN_DIR/kwok" ]]; then
  step "kwok $KWOK_VERSION"
  run env GOBIN="$BIN_DIR" go install -trimpath "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
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
  run env GOBIN="$WORK/kuberay-bin" go install -trimpath "github.com/ray-project/kuberay/ray-operator@$KUBERAY_VERSION"
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
  run env GOBIN="$BIN_DIR" go install -trimpath "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi

if [[ ! -x "$BIN_DIR/kube-apiserver" || ! -x "$BIN_DIR/kubectl" ]]; then
  step "kubernetes $KUBERNETES_VERSION (apiserver, controller-manager, scheduler, kubectl)"
  wrapper kubernetes
  # k8s.io/kubernetes pins its staging modules at v0.0.0 with replaces into ./staging;
  # a wrapper module must point each one at its published tag instead.
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
  for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    run go get "k8s.io/kubernetes/cmd/$cmd@$KUBERNETES_VERSION"
  done
  run go build -trimpath -ldflags "$ldflags" -o "$BIN_DIR/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
fi

date -u +%FT%TZ >"$STAMP"
step "cluster binaries ready in $BIN_DIR"
