#!/usr/bin/env bash
# Stops the dockerd that hack/engine-up.sh started, by its pid file (its containers stop with it).
# An engine this project did not start is left alone.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
CLUSTER_DIR="$ENGINE_DIR"
. "$HACK_DIR/cluster-lib.sh"
hold_cluster_lock "$@"

if pid_of dockerd >/dev/null; then
  stop_process dockerd
else
  echo "engine: no dockerd started by hack/engine-up.sh is running; nothing to stop"
fi
