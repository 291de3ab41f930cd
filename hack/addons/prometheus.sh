#!/usr/bin/env bash
# Fetches Prometheus from Debian's package (the version in versions.env) and unpacks it, without
# installing anything system-wide, into $PROMETHEUS_DIR (.cache/prometheus-<version>):
# usr/bin/prometheus and usr/bin/promtool. The .deb comes from the mirror apt already uses
# (`apt-get download`). Idempotent: a stamp file marks a finished unpack and a second run
# returns at once. Prints the prometheus binary's path on its last line.
# Debian builds it without Kubernetes service discovery (its `+ds` source drops that code), so
# the tests hand it the Endpoints they read from the API server as a file_sd file, with the meta
# labels Kubernetes discovery would give them (tests/support/prometheus.py).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$HACK_DIR/addons/lib.sh"

STAMP="$PROMETHEUS_DIR/.complete"
BINARY="$PROMETHEUS_DIR/usr/bin/prometheus"
if [[ -f "$STAMP" && -x "$BINARY" ]]; then
  echo "$BINARY"
  exit 0
fi
for tool in apt-get dpkg; do
  command -v "$tool" >/dev/null || { echo "prometheus: needs $tool (a Debian or Ubuntu host)" >&2; exit 1; }
done
rm -rf "$PROMETHEUS_DIR"
download="$PROMETHEUS_DIR.download"
rm -rf "$download"; mkdir -p "$download"
echo "prometheus $PROMETHEUS_DEB_VERSION: downloading Debian's package" >&2
if ! (cd "$download" && apt-get download -q "prometheus=$PROMETHEUS_DEB_VERSION" >download.log 2>&1); then
  echo "prometheus: apt-get download prometheus=$PROMETHEUS_DEB_VERSION failed (is the version still" \
    "on the mirror? \`apt-cache policy prometheus\` names the one there):" >&2
  tail -n 5 "$download/download.log" >&2
  exit 1
fi
dpkg -x "$download"/prometheus_*.deb "$PROMETHEUS_DIR"
rm -rf "$download"
"$BINARY" --version >/dev/null
date -u +%FT%TZ >"$STAMP"
echo "$BINARY"
