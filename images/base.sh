#!/usr/bin/env bash
# Base images made from Debian's packages, for engines that cannot pull from a registry.
#
#   images/base.sh debian|python...    prints one image reference per name, building what is missing
#
#   debian  Debian bookworm, minbase (debootstrap --variant=minbase), apt and ca-certificates:
#           what the trainer images' system stage starts from (Dockerfile.cuda, target cpu)
#   python  debian + Debian's Python 3 with venv: what the operator image starts from
#
# Each tag carries a hash of the suite and package lists below, so changing them makes new images
# and otherwise the images are reused. The root filesystem is also kept as a tarball under $CACHE_ROOT/base-images, so an
# engine whose images were removed imports it again in seconds instead of running debootstrap.
# Needs root (debootstrap) and a Docker engine (hack/engine-up.sh). Progress goes to stderr.
set -euo pipefail
. "$(dirname "$0")/../hack/lib.sh"
DOCKER="${DOCKER:-docker}"
SUITE=bookworm
MIRROR=http://deb.debian.org/debian
DEBIAN_PACKAGES=ca-certificates
PYTHON_PACKAGES="python3 python3-venv python-is-python3"
# The tags' key: what goes into the images (a new suite or package list makes new ones).
KEY="$(printf '%s\n' "$SUITE" "$MIRROR" "$DEBIAN_PACKAGES" "$PYTHON_PACKAGES" | sha256sum | cut -c1-10)"
CACHE="$CACHE_ROOT/base-images"

say() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
present() { "$DOCKER" image inspect "$1" >/dev/null 2>&1; }

debian_base() {
  local image="grpo-local/debian:$SUITE-$KEY" tarball="$CACHE/debian-$SUITE-$KEY.tar"
  if ! present "$image"; then
    if [[ ! -f "$tarball" ]]; then
      command -v debootstrap >/dev/null || {
        say "installing debootstrap (apt-get)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >&2
      }
      local rootfs
      rootfs="$(mktemp -d "${TMPDIR:-/tmp}/grpo-debian-rootfs.XXXXXX")"
      say "debootstrap --variant=minbase $SUITE (about a minute)"
      if ! debootstrap --variant=minbase --include="$DEBIAN_PACKAGES" "$SUITE" "$rootfs" "$MIRROR" \
        >"$rootfs.log" 2>&1; then
        tail -n 20 "$rootfs.log" >&2
        exit 1
      fi
      # What the registry's slim images leave out too: package lists, apt's caches, logs.
      rm -rf "${rootfs:?}"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/log/* \
        "$rootfs"/debootstrap "$rootfs.log"
      printf 'deb %s %s main\ndeb %s %s-updates main\ndeb http://deb.debian.org/debian-security %s-security main\n' \
        "$MIRROR" "$SUITE" "$MIRROR" "$SUITE" "$SUITE" >"$rootfs/etc/apt/sources.list"
      mkdir -p "$CACHE"
      tar --numeric-owner -C "$rootfs" -cf "$tarball.partial" .
      mv "$tarball.partial" "$tarball"
      rm -rf "$rootfs"
    fi
    say "importing $image"
    "$DOCKER" import --change 'ENV LANG=C.UTF-8' --change 'CMD ["bash"]' "$tarball" "$image" >/dev/null
  fi
  echo "$image"
}

python_base() {
  local base image="grpo-local/python:3-$SUITE-$KEY"
  base="$(debian_base)"
  if ! present "$image"; then
    say "building $image (Debian's python3, python3-venv)"
    local log="$CACHE/python-$KEY.log"
    mkdir -p "$CACHE"
    if ! printf '%s\n' "FROM $base" \
      "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $PYTHON_PACKAGES && rm -rf /var/lib/apt/lists/*" \
      'CMD ["python3"]' | DOCKER_BUILDKIT=0 "$DOCKER" build -t "$image" - >"$log" 2>&1; then
      tail -n 20 "$log" >&2
      exit 1
    fi
  fi
  echo "$image"
}

(($#)) || { echo "usage: images/base.sh debian|python..." >&2; exit 2; }
for name in "$@"; do
  case "$name" in
    debian) debian_base ;;
    python) python_base ;;
    *) echo "images/base.sh: unknown base '$name' (debian, python)" >&2 && exit 2 ;;
  esac
done
