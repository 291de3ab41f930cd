#!/bin/sh
# grpo-load-images.service: imports /kind/images/*.tar into containerd's k8s.io namespace with the
# snapshotter the CRI plugin uses (kind's entrypoint may have switched it), once per node.
set -eu
stamp=/var/lib/grpo-images-loaded
[ ! -f "$stamp" ] || exit 0
snapshotter="$(sed -n 's/^ *snapshotter *= *"\(.*\)"/\1/p' /etc/containerd/config.toml | head -n 1)"
for archive in /kind/images/*.tar; do
  ctr --namespace k8s.io images import --snapshotter "${snapshotter:-overlayfs}" "$archive"
done
touch "$stamp"
