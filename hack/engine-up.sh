#!/usr/bin/env bash
# The container engine that image builds and the kind backend use (`make engine-up`).
#   - A Docker engine that already answers `docker info` is used as it is, and never stopped here.
#   - Otherwise, Debian's docker.io is installed with apt if dockerd is missing (root only), and
#     dockerd is started by this script: its pid and log in $ENGINE_DIR, its images and layers in
#     the system's default place (/var/lib/docker), so every checkout on the machine shares them.
#     `make engine-down` (hack/engine-down.sh) stops it by that pid.
# The engine's default runtime is hack/engine/runc-without-sys-resource, which lets containers
# that ask for every capability (--privileged, kind's nodes) run on machines that withhold
# CAP_SYS_RESOURCE. Published ports bind to 127.0.0.1 unless a command says otherwise.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
CLUSTER_DIR="$ENGINE_DIR"
. "$HACK_DIR/cluster-lib.sh"
hold_cluster_lock "$@"

if docker info >/dev/null 2>&1; then
  if pid_of dockerd >/dev/null; then
    echo "engine: dockerd already running (pid $(pid_of dockerd), started by hack/engine-up.sh)"
  else
    echo "engine: using the Docker engine already running here ($(docker info -f '{{.ServerVersion}}'))"
  fi
  exit 0
fi

. "$HACK_DIR/engine-lib.sh"
rc=0; install_engine_packages "$ENGINE_DIR/logs/apt.log" || rc=$?
if ((rc == 2)); then
  echo "engine: no Docker engine answers and dockerd is not installed; as root, or with your" \
    "package manager: apt-get install docker.io jq" >&2
  exit 1
fi
((rc == 0)) || exit 1
if ((EUID != 0)); then
  echo "engine: dockerd is installed but not running, and only root can start it here" >&2
  exit 1
fi

say "starting dockerd (log: $ENGINE_DIR/logs/dockerd.log)"
started=$SECONDS
# dockerd starts and stops its own containerd. --ip: `-p` publishes on loopback by default.
start_process dockerd "$(command -v dockerd)" \
  --pidfile="$ENGINE_DIR/dockerd.pid" \
  --add-runtime=runc-without-sys-resource="$HACK_DIR/engine/runc-without-sys-resource" \
  --default-runtime=runc-without-sys-resource \
  --ip=127.0.0.1
wait_until dockerd 60 "dockerd to answer" docker info
say "engine ready in $((SECONDS - started)) s: $(docker info -f '{{.ServerVersion}} {{.Driver}}, cgroup {{.CgroupVersion}}')"
