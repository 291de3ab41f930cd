#!/usr/bin/env bash
# Resident memory (RSS) of the running local cluster's processes, found by their pid files.
# Used for docs/benchmarks/test-cluster.md.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$HACK_DIR/cluster-lib.sh"

total_kib=0
printf '%-24s %8s %10s\n' component pid "RSS MiB"
for name in "${LOCAL_COMPONENTS[@]}"; do
  if ! pid="$(pid_of "$name")"; then
    printf '%-24s %8s %10s\n' "$name" - "not running"
    continue
  fi
  rss_kib="$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")"
  if [[ "$name" == ray-head ]]; then
    # `ray start --block` is a small parent: the head is all its processes, its jobs included.
    rss_kib="$(ray_head_pids | sed 's|.*|/proc/&/status|' | xargs -r awk '/^VmRSS:/ {s += $2} END {print s + 0}' 2>/dev/null)"
  fi
  total_kib=$((total_kib + rss_kib))
  printf '%-24s %8s %10.1f\n' "$name" "$pid" "$(awk -v k="$rss_kib" 'BEGIN { print k / 1024 }')"
done
printf '%-24s %8s %10.1f\n' total "" "$(awk -v k="$total_kib" 'BEGIN { print k / 1024 }')"
