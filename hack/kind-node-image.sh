#!/usr/bin/env bash
# kind's node image, made on a machine that can reach Debian's mirror and the Go module proxy but
# no container registry (`make kind-node-image`; hack/kind-up.sh calls it).
#
#   hack/kind-node-image.sh      prints the image reference, building what is missing
#
# kind's own recipe (the node base image of sigs.k8s.io/kind's images/base, then
# `kind build node-image`) pulls a Debian image, clones containerd, runc and the CNI plugins from
# GitHub and pulls the control-plane images from registry.k8s.io; none of that is reachable here.
# The same node, made from what is:
#   1. binaries, built from Go modules and cached in $KIND_BIN_DIR (keyed by the versions files):
#      kind and kubeadm here; kube-apiserver, kube-controller-manager, kube-scheduler, etcd and
#      kubectl from hack/build-binaries.sh; kubelet, kube-proxy and pause from
#      hack/build-node-binaries.sh; CoreDNS with the plugins kubeadm's Corefile names
#      (hack/kind/coredns); kube-network-policies, kindnetd's NetworkPolicy enforcer.
#   2. one image per control-plane component (grpo-local/<component>:<version>) on the Debian
#      base of images/base.sh, saved together into one archive that shares the base's layers.
#   3. the node image (hack/kind/node/Dockerfile): kind's base image made from Debian bookworm's
#      packages (systemd, containerd 1.6, runc, CNI plugins, iptables, nftables), kind's own unit
#      files and entrypoint from its module, the three node binaries, and the archive, which the
#      node loads into containerd when it boots (grpo-load-images.service).
# Everything runs in kind's own engine (hack/kind-lib.sh). A second run reuses every layer and
# binary; a changed versions file or hack/kind/ file makes a new tag. Progress goes to stdout.
set -euo pipefail
HACK="$(cd "$(dirname "$0")" && pwd)"
. "$HACK/lib.sh"
. "$HACK/kind-lib.sh"
CLUSTER_DIR="$KIND_CLUSTER_DIR"
. "$HACK/cluster-lib.sh"
WORK="$KIND_CACHE_ROOT/kind-build"
LOG="$WORK/build.log"
mkdir -p "$WORK"
. "$HACK/build-lib.sh"
started=$SECONDS

start_kind_engine
if docker image inspect "$KIND_NODE_IMAGE" >/dev/null 2>&1; then
  step "kind node image: $KIND_NODE_IMAGE (cached)"
  exit 0
fi
: >"$LOG"

# --- 1. binaries ----------------------------------------------------------------------------------
"$HACK_DIR/build-binaries.sh"
"$HACK_DIR/build-node-binaries.sh"
if [[ ! -f "$KIND_BIN_DIR/.complete" ]]; then
  mkdir -p "$KIND_BIN_DIR"
  if [[ ! -x "$KIND" ]]; then
    step "kind $KIND_VERSION (~3 min on 2 cores the first time)"
    GOBIN="$KIND_BIN_DIR" run go install "sigs.k8s.io/kind@$KIND_VERSION"
  fi
  if [[ ! -x "$KIND_BIN_DIR/kubeadm" ]]; then
    step "kubeadm $KUBERNETES_VERSION (~5 min on 2 cores the first time)"
    (build_kubernetes kubeadm "$KIND_BIN_DIR" kubeadm)
  fi
  if [[ ! -x "$KIND_BIN_DIR/coredns" ]]; then
    step "coredns $COREDNS_VERSION with kubeadm's Corefile plugins (hack/kind/coredns/main.go)"
    (
      wrapper kind-coredns
      cp "$HACK_DIR/kind/coredns/main.go" .
      run go get "github.com/coredns/coredns@$COREDNS_VERSION"
      run go mod tidy
      run go build -trimpath -ldflags "-s -w" -o "$KIND_BIN_DIR/coredns" .
    )
  fi
  if [[ ! -x "$KIND_BIN_DIR/kube-network-policies" ]]; then
    step "kube-network-policies $KUBE_NETWORK_POLICIES_VERSION (kindnetd's NetworkPolicy enforcer)"
    (
      wrapper kube-network-policies
      run go get "sigs.k8s.io/kube-network-policies/cmd@$KUBE_NETWORK_POLICIES_VERSION"
      run go build -trimpath -ldflags "-s -w" -o "$KIND_BIN_DIR/kube-network-policies" \
        sigs.k8s.io/kube-network-policies/cmd
    )
  fi
  date -u +%FT%TZ >"$KIND_BIN_DIR/.complete"
fi
step "binaries ready"

# --- 2. the control-plane images ------------------------------------------------------------------
base="$(GRPO_CACHE_DIR="$KIND_CACHE_ROOT" "$REPO_ROOT/images/base.sh" debian)"
context="$WORK/context"
rm -rf "$context"
mkdir -p "$context/bin"
build_image() {  # build_image <tag> <Dockerfile lines...>: context is $context (binaries in bin/)
  local tag=$1
  shift
  # The base is an imported root filesystem: no PATH of its own for the commands kubeadm's
  # manifests name.
  printf '%s\n' "FROM $base" "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    "$@" >"$context/Dockerfile"
  run env DOCKER_BUILDKIT=0 docker build --network host -t "$tag" "$context"
}
component_image() {  # component_image <name> <tag> <binary> [extra Dockerfile lines...]
  local name=$1 tag=$2 binary=$3
  shift 3
  step "image grpo-local/$name:$tag"
  rm -f "$context"/bin/*
  cp "$binary" "$context/bin/"
  build_image "grpo-local/$name:$tag" "$@" "COPY bin/ /usr/local/bin/" \
    "ENTRYPOINT [\"/usr/local/bin/$(basename "$binary")\"]"
  IMAGES+=("grpo-local/$name:$tag")
}
IMAGES=()
for component in kube-apiserver kube-controller-manager kube-scheduler; do
  component_image "$component" "$KUBERNETES_VERSION" "$BIN_DIR/$component"
done
component_image etcd "$ETCD_VERSION" "$BIN_DIR/etcd"
component_image pause "$KUBERNETES_VERSION" "$NODE_BIN_DIR/pause"
component_image coredns "$COREDNS_VERSION" "$KIND_BIN_DIR/coredns"
# kube-proxy's iptables mode runs iptables-restore and conntrack.
component_image kube-proxy "$KUBERNETES_VERSION" "$NODE_BIN_DIR/kube-proxy" \
  "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iptables conntrack && rm -rf /var/lib/apt/lists/*"
# It programs nftables through the nft command (knftables).
component_image kube-network-policies "$KUBE_NETWORK_POLICIES_VERSION" \
  "$KIND_BIN_DIR/kube-network-policies" \
  "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nftables && rm -rf /var/lib/apt/lists/*"
# kindnet's CNI configuration writer (hack/kind/node/kindnet.yaml) needs only a shell.
step "image grpo-local/kindnet-cni:$KIND_NODE_SUITE"
rm -f "$context"/bin/*
build_image "grpo-local/kindnet-cni:$KIND_NODE_SUITE"
IMAGES+=("grpo-local/kindnet-cni:$KIND_NODE_SUITE")

# --- 3. the node image ----------------------------------------------------------------------------
step "node image $KIND_NODE_IMAGE"
rm -rf "$context"
mkdir -p "$context/bin" "$context/kind-files" "$context/manifests"
kind_module="$(go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | jq -r .Dir)"
cp -r "$kind_module/images/base/files/." "$context/kind-files/"
chmod -R u+w "$context/kind-files"
cp "$NODE_BIN_DIR/kubelet" "$KIND_BIN_DIR/kubeadm" "$BIN_DIR/kubectl" "$context/bin/"
cp "$HACK_DIR"/kind/node/* "$context/"
mv "$context/kindnet.yaml" "$context/manifests/default-cni.yaml"
mv "$context/storage.yaml" "$context/manifests/default-storage.yaml"
sed -i "s|@KUBE_NETWORK_POLICIES_IMAGE@|grpo-local/kube-network-policies:$KUBE_NETWORK_POLICIES_VERSION|; s|@KINDNET_CNI_IMAGE@|grpo-local/kindnet-cni:$KIND_NODE_SUITE|" \
  "$context/manifests/default-cni.yaml"
echo "$KUBERNETES_VERSION" >"$context/version"
step "  saving ${#IMAGES[@]} component images"
run docker save -o "$context/images.tar" "${IMAGES[@]}"
run env DOCKER_BUILDKIT=0 docker build --network host -t "$KIND_NODE_IMAGE" \
  --build-arg "BASE_IMAGE=$base" --build-arg "PAUSE_IMAGE=grpo-local/pause:$KUBERNETES_VERSION" \
  "$context"
rm -rf "$context"
step "kind node image: $KIND_NODE_IMAGE ($(docker image inspect -f '{{.Size}}' "$KIND_NODE_IMAGE" |
  awk '{printf "%.0f MB", $1 / 1e6}'), in $((SECONDS - started)) s)"
