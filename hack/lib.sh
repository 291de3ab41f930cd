# Shared paths for the hack/ scripts. Source it; it defines variables only.
# shellcheck shell=bash
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HACK_DIR/.." && pwd)"
# shellcheck source=versions.env
. "$HACK_DIR/versions.env"
VERSIONS_STAMP="$(sha256sum "$HACK_DIR/versions.env" | cut -c1-12)"
# Built binaries live under a git-ignored folder keyed by the versions file's hash,
# so a version bump builds afresh and a second run reuses what is there.
CACHE_ROOT="${GRPO_CACHE_DIR:-$REPO_ROOT/.cache}"
BIN_DIR="$CACHE_ROOT/bin-$VERSIONS_STAMP"
# Runtime state of a running local cluster (certs, pids, logs, kubeconfig).
CLUSTER_DIR="${GRPO_CLUSTER_DIR:-$CACHE_ROOT/cluster}"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
