# Debian's Docker engine, installed where it is missing: hack/engine-up.sh (the build engine) and
# hack/kind-lib.sh (kind's own engine) both need dockerd and jq, and a clean machine has neither.
# Source it after lib.sh and cluster-lib.sh (for say).
# shellcheck shell=bash

# install_engine_packages LOG: apt-get install docker.io jq when either is missing (root only);
# prints the apt log's tail and returns 1 when apt fails, returns 2 when not root.
install_engine_packages() {
  local log=$1
  command -v dockerd >/dev/null && command -v jq >/dev/null && return 0
  ((EUID == 0)) || return 2
  say "installing Debian's Docker engine (apt-get install docker.io jq; about a minute)"
  mkdir -p "$(dirname "$log")"
  if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends docker.io jq; } >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    return 1
  fi
}
