#!/usr/bin/env bash
# Builds the container images with the versions pinned in images/versions.env (`make images`).
#
#   images/build.sh [--dry-run] [IMAGE...]     IMAGE: operator cuda ascend ascend-a2-seed (default: all)
#
# Environment: REGISTRY (default ghcr.io/grpo-operator), TAG (default: pyproject's version),
# DOCKER (default docker), PUSH=1 to push after building, PLATFORM (e.g. linux/arm64 for Ascend
# hosts, which are often aarch64). --dry-run prints the commands instead of running them.
set -euo pipefail

IMAGES_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$IMAGES_DIR/.." && pwd)"
VERSIONS="$IMAGES_DIR/versions.env"
REGISTRY="${REGISTRY:-ghcr.io/grpo-operator}"
DOCKER="${DOCKER:-docker}"
TAG="${TAG:-$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO_ROOT/pyproject.toml" | head -n 1)}"
DRY_RUN=0

declare -A PINS=()
while IFS= read -r line || [[ -n "$line" ]]; do
  [[ "$line" =~ ^([A-Z][A-Z0-9_]*)=(.*)$ ]] || continue
  PINS["${BASH_REMATCH[1]}"]="${BASH_REMATCH[2]}"
done < "$VERSIONS"

# The --build-args for the pins under the given prefixes, the prefix cut off; a later prefix
# overrides an earlier one (SEED_A2_ over ASCEND_).
build_args() {
  local -A args=()
  local prefix key
  for prefix in "$@"; do
    for key in "${!PINS[@]}"; do
      [[ "$key" == "$prefix"* ]] && args["${key#"$prefix"}"]="${PINS[$key]}"
    done
  done
  for key in $(printf '%s\n' "${!args[@]}" | sort); do
    printf -- '--build-arg\n%s=%s\n' "$key" "${args[$key]}"
  done
}

run() {
  if [[ $DRY_RUN == 1 ]]; then
    printf '%q ' "$@"
    printf '\n'
  else
    "$@"
  fi
}

build() {
  local image="$1" dockerfile="$2"
  shift 2
  local -a args
  mapfile -t args < <(build_args "$@")
  run "$DOCKER" build ${PLATFORM:+--platform "$PLATFORM"} -f "$REPO_ROOT/$dockerfile" "${args[@]}" \
    -t "$image" "$REPO_ROOT"
  if [[ "${PUSH:-0}" == 1 ]]; then
    run "$DOCKER" push "$image"
  fi
}

targets=()
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    operator | cuda | ascend | ascend-a2-seed) targets+=("$arg") ;;
    *)
      echo "images/build.sh: unknown image '$arg' (operator, cuda, ascend, ascend-a2-seed)" >&2
      exit 2
      ;;
  esac
done
[[ ${#targets[@]} -gt 0 ]] || targets=(operator cuda ascend ascend-a2-seed)

for target in "${targets[@]}"; do
  case "$target" in
    operator) build "$REGISTRY/operator:$TAG" images/operator/Dockerfile OPERATOR_ ;;
    cuda) build "$REGISTRY/trainer-cuda:$TAG" Dockerfile.cuda CUDA_ ;;
    ascend) build "$REGISTRY/trainer-ascend:$TAG" Dockerfile.ascend ASCEND_ ;;
    ascend-a2-seed) build "$REGISTRY/trainer-ascend:$TAG-a2-seed" Dockerfile.ascend ASCEND_ SEED_A2_ ;;
  esac
done
