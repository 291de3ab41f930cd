#!/usr/bin/env bash
# The local cluster with its real node (`make node-up`, `make test`, `make demo`): the operator and
# CPU trainer images build in the background (images/build.sh through `make images`: the engine
# is started, or Debian's installed, where none runs) and are shipped into the node's containerd
# (hack/node-ship.sh) while hack/cluster-up.sh builds and starts the cluster; then
# hack/node-up.sh joins the real node, its images already in place. Overlapping them saves the
# image build's and the shipping's minutes on a cold machine. Idempotent, as the scripts are.
# The cluster is the one GRPO_CLUSTER_DIR / GRPO_PORT_OFFSET name (hack/lib.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$HACK_DIR/cluster-lib.sh"

mkdir -p "$CLUSTER_DIR"
log="$CLUSTER_DIR/images.log"
say "building the operator and CPU trainer images in the background, then shipping them to the node (cold: ~10 min; log: $log)"
# Its own session, so a failed cluster start can stop the whole build (make, docker, pip).
setsid bash -c 'cd "$1" && make --no-print-directory images IMAGES="operator cpu" && exec hack/node-ship.sh' \
  _ "$REPO_ROOT" </dev/null >"$log" 2>&1 &
images_pid=$!
trap 'kill -TERM -- -"$images_pid" 2>/dev/null || true' EXIT

"$HACK_DIR/cluster-up.sh"

# The build's own progress lines ("[hh:mm:ss] ..."), those so far and then as they come.
say "the images"
shown=0
while :; do
  building=0
  kill -0 "$images_pid" 2>/dev/null && building=1
  lines="$(grep -E '^\[[0-9:]{8}\] ' "$log" 2>/dev/null | tail -n +$((shown + 1)) || true)"
  if [[ -n "$lines" ]]; then
    sed 's/^/  images: /' <<<"$lines"
    shown=$((shown + $(wc -l <<<"$lines")))
  fi
  ((building)) || break
  sleep 5
done
trap - EXIT
if ! wait "$images_pid"; then
  tail -n 30 "$log" >&2
  echo "the image build or its shipping to the node failed (its whole log: $log)" >&2
  exit 1
fi

"$HACK_DIR/node-up.sh"
