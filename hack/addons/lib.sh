# Paths of the add-ons (Prometheus, Kueue). Source it after hack/lib.sh; it defines variables only.
# shellcheck shell=bash
# shellcheck source=versions.env
. "$HACK_DIR/addons/versions.env"
# Their own cache root (like the real node's), so a checkout that shares another's cluster
# binaries can keep these apart. Each add-on's folder is named for its version.
ADDONS_CACHE_ROOT="${GRPO_ADDONS_CACHE_DIR:-$CACHE_ROOT}"
PROMETHEUS_DIR="$ADDONS_CACHE_ROOT/prometheus-$PROMETHEUS_DEB_VERSION"
KUEUE_DIR="$ADDONS_CACHE_ROOT/kueue-$KUEUE_VERSION"
