#!/usr/bin/env bash
# Builds the container images with the versions pinned in images/versions.env (`make images`).
#
#   images/build.sh [--dry-run] [IMAGE...]
#     IMAGE: operator cpu cuda ascend ascend-a2-seed (default: all of them, or, where no registry
#     is reachable, those whose base images are here: see BASE_IMAGES)
#
# Environment: REGISTRY (default ghcr.io/grpo-operator), TAG (default: pyproject's version),
# DOCKER (default docker), PUSH=1 to push after building, PLATFORM (e.g. linux/arm64 for Ascend
# hosts, which are often aarch64). --dry-run prints the commands instead of running them.
#   BASE_IMAGES=registry   build from the pinned registry images (the engine pulls them)
#   BASE_IMAGES=debian     the operator and CPU images from Debian-made bases (images/base.sh);
#                          the CUDA and Ascend images only if their pinned base is in the engine
#   BASE_IMAGES=auto       (default) registry when the pinned base is already in the engine,
#                          debian otherwise; with no image named, skips those it cannot build
# PYTHON (default python3) writes each trainer image's manifest first (images/manifest.py).
# PIP_CERT (or SSL_CERT_FILE), when set, names a CA bundle that pip in the build stages trusts
# (never copied into a final image).
# The legacy builder (DOCKER_BUILDKIT=0) is used when the docker client has no buildx.
set -euo pipefail

IMAGES_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$IMAGES_DIR/.." && pwd)"
VERSIONS="$IMAGES_DIR/versions.env"
REGISTRY="${REGISTRY:-ghcr.io/grpo-operator}"
DOCKER="${DOCKER:-docker}"
TAG="${TAG:-$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO_ROOT/pyproject.toml" | head -n 1)}"
BASE_IMAGES="${BASE_IMAGES:-auto}"
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

say() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# The base image to build from: the pinned one, or the Debian-made stand-in (see BASE_IMAGES).
# Prints nothing when the image cannot be built here.
base_for() {  # base_for <pinned image> <Debian-made kind: python|debian|"">
  local pinned="$1" local_kind="$2"
  case "$BASE_IMAGES" in
    registry) echo "$pinned" && return ;;
    auto) if [[ $DRY_RUN == 1 ]] || "$DOCKER" image inspect "$pinned" >/dev/null 2>&1; then echo "$pinned" && return; fi ;;
    debian) if "$DOCKER" image inspect "$pinned" >/dev/null 2>&1; then echo "$pinned" && return; fi ;;
    *) echo "images/build.sh: BASE_IMAGES is registry, debian or auto, not '$BASE_IMAGES'" >&2 && exit 2 ;;
  esac
  [[ -z "$local_kind" ]] || "$IMAGES_DIR/base.sh" "$local_kind"
}

# The build CA's image: the file PIP_CERT names at /etc/ssl/certs/ca-certificates.crt, nothing else.
build_ca_image() {
  local bundle="${PIP_CERT:-${SSL_CERT_FILE:-}}" image context
  [[ -n "$bundle" && -f "$bundle" && $DRY_RUN == 0 ]] || return 0
  image="grpo-local/build-ca:$(sha256sum "$bundle" | cut -c1-12)"
  if ! "$DOCKER" image inspect "$image" >/dev/null 2>&1; then
    context="$(mktemp -d)"
    mkdir -p "$context/etc/ssl/certs"
    cp "$bundle" "$context/etc/ssl/certs/ca-certificates.crt"
    printf 'FROM scratch\nCOPY etc /etc\n' >"$context/Dockerfile"
    "$DOCKER" build -q -t "$image" "$context" >/dev/null 2>&1
    rm -rf "$context"
  fi
  echo "$image"
}

build() {  # build <image> <dockerfile> <base arg> <Debian-made base kind> [--target T] <prefix>...
  local image="$1" dockerfile="$2" base_arg="$3" local_kind="$4" base base_index started=$SECONDS
  shift 4
  local -a target=()
  if [[ "${1:-}" == --target ]]; then
    target=(--target "$2")
    shift 2
  fi
  local -a args
  mapfile -t args < <(build_args "$@")
  local i pinned=""
  for ((i = 1; i < ${#args[@]}; i += 2)); do
    [[ "${args[i]}" == "$base_arg="* ]] && pinned="${args[i]#*=}" && base_index=$i
  done
  base="$(base_for "$pinned" "$local_kind")"
  if [[ -z "$base" ]]; then
    echo "images/build.sh: $image needs $pinned, which this engine does not have" \
      "and cannot pull or make here (BASE_IMAGES=registry to pull it)" >&2
    return 1
  fi
  args[base_index]="$base_arg=$base"
  [[ -z "$BUILD_CA" ]] || args+=(--build-arg "BUILD_CA_IMAGE=$BUILD_CA")
  [[ $DRY_RUN == 1 ]] || say "building $image from $base (log: $LOG_DIR/$(basename "${image%%:*}").log)"
  if [[ $DRY_RUN == 1 ]]; then
    run "$DOCKER" build ${PLATFORM:+--platform "$PLATFORM"} -f "$REPO_ROOT/$dockerfile" "${target[@]}" \
      "${args[@]}" -t "$image" "$REPO_ROOT"
  else
    mkdir -p "$LOG_DIR"
    local log
    log="$LOG_DIR/$(basename "${image%%:*}").log"
    # Every step's first line as it starts, so a long build is never minutes of silence.
    if ! "$DOCKER" build ${PLATFORM:+--platform "$PLATFORM"} -f "$REPO_ROOT/$dockerfile" "${target[@]}" \
      "${args[@]}" -t "$image" "$REPO_ROOT" 2>&1 | tee "$log" |
      awk '/^Step [0-9]+\/[0-9]+ : / { print "  " substr($0, 1, 110); fflush() }' >&2; then
      echo "images/build.sh: building $image failed; the end of $log:" >&2
      tail -n 30 "$log" >&2
      return 1
    fi
    say "built $image in $((SECONDS - started)) s ($("$DOCKER" image inspect -f '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1 / 1e6}'))"
  fi
  if [[ "${PUSH:-0}" == 1 ]]; then
    run "$DOCKER" push "$image"
  fi
}

targets=()
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    operator | cpu | cuda | ascend | ascend-a2-seed) targets+=("$arg") ;;
    *)
      echo "images/build.sh: unknown image '$arg' (operator, cpu, cuda, ascend, ascend-a2-seed)" >&2
      exit 2
      ;;
  esac
done
named=${#targets[@]}
((named > 0)) || targets=(operator cpu cuda ascend ascend-a2-seed)

if [[ $DRY_RUN == 0 && -z "${DOCKER_BUILDKIT:-}" ]] && ! "$DOCKER" buildx version >/dev/null 2>&1; then
  export DOCKER_BUILDKIT=0
fi
LOG_DIR="${GRPO_STATE_DIR:-$REPO_ROOT/.cache}/images"
BUILD_CA="$(build_ca_image)"

# The trainer package's manifest of a trainer image, written from the same pins the image is built
# from (images/manifest.py) before its build copies the package in: `grpo-train plan` plans from
# it and the image checks it against what it installed at start-up.
manifest() {  # manifest <flavour>
  [[ $DRY_RUN == 1 ]] || "${PYTHON:-python3}" "$IMAGES_DIR/manifest.py" write "$1" >&2
}

build_one() {
  case "$1" in
    operator) build "$REGISTRY/operator:$TAG" images/operator/Dockerfile PYTHON_IMAGE python OPERATOR_ ;;
    cpu) manifest cpu && build "$REGISTRY/trainer-cpu:$TAG" Dockerfile.cuda BASE_IMAGE debian --target cpu CUDA_ CPU_ ;;
    cuda) manifest cuda && build "$REGISTRY/trainer-cuda:$TAG" Dockerfile.cuda BASE_IMAGE "" --target cuda CUDA_ ;;
    ascend) manifest ascend && build "$REGISTRY/trainer-ascend:$TAG" Dockerfile.ascend CANN_BASE_IMAGE "" ASCEND_ ;;
    ascend-a2-seed)
      manifest ascend-a2-seed &&
        build "$REGISTRY/trainer-ascend:$TAG-a2-seed" Dockerfile.ascend CANN_BASE_IMAGE "" ASCEND_ SEED_A2_
      ;;
  esac
}

for target in "${targets[@]}"; do
  if ((named == 0)) && [[ "$BASE_IMAGES" != registry && $DRY_RUN == 0 ]]; then
    # Building everything where no registry is reachable: what cannot be built here is skipped.
    case "$target" in
      cuda) pinned="${PINS[CUDA_BASE_IMAGE]}" ;;
      ascend) pinned="${PINS[ASCEND_CANN_BASE_IMAGE]}" ;;
      ascend-a2-seed) pinned="${PINS[SEED_A2_CANN_BASE_IMAGE]}" ;;
      *) pinned="" ;;
    esac
    if [[ -n "$pinned" ]] && ! "$DOCKER" image inspect "$pinned" >/dev/null 2>&1; then
      say "skipping $target: its base $pinned is not in this engine (BASE_IMAGES=registry pulls it)"
      continue
    fi
  fi
  build_one "$target"
done
