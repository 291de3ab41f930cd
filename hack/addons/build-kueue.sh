#!/usr/bin/env bash
# Builds the Kueue controller manager and copies its CRDs out of the Go module, into
# $KUEUE_DIR (.cache/kueue-<version>): bin/kueue, crds/*.yaml. Idempotent: a stamp file marks a
# finished build and a second run returns at once. The build takes a while on a small machine;
# its commands go to $KUEUE_DIR/build.log with a line a minute on stdout.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$HACK_DIR/addons/lib.sh"

STAMP="$KUEUE_DIR/.complete"
if [[ -f "$STAMP" ]]; then
  echo "kueue $KUEUE_VERSION: cached in $KUEUE_DIR"
  exit 0
fi
mkdir -p "$KUEUE_DIR/bin" "$KUEUE_DIR/build"
WORK="$KUEUE_DIR/build"
LOG="$KUEUE_DIR/build.log"
: >"$LOG"
. "$HACK_DIR/build-lib.sh"

step "kueue $KUEUE_VERSION (controller manager, from the Go module proxy)"
run env GOBIN="$KUEUE_DIR/bin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION"
moddir="$(go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')"
rm -rf "$KUEUE_DIR/crds"; mkdir -p "$KUEUE_DIR/crds"
cp "$moddir"/config/components/crd/bases/*.yaml "$KUEUE_DIR/crds/"
chmod u+w "$KUEUE_DIR/crds/"*.yaml
date -u +%FT%TZ >"$STAMP"
step "kueue ready in $KUEUE_DIR"
