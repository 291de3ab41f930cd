# Shared by hack/build-binaries.sh and hack/build-node-binaries.sh: progress lines, commands into
# the build log with a line a minute while they run, throwaway wrapper modules, and the
# k8s.io/kubernetes commands built at the pinned version. Needs LOG and WORK set.

step() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }

run() {  # run <command...>: into the log, with a line a minute while it takes long (no silent minutes)
  local pid started=$SECONDS next=$((SECONDS + 60)) status=0
  "$@" >>"$LOG" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if ((SECONDS >= next)) && kill -0 "$pid" 2>/dev/null; then
      step "  ... still at it ($(((SECONDS - started) / 60)) min): ${*:1:3}"
      next=$((next + 60))
    fi
  done
  wait "$pid" || status=$?
  if ((status != 0)); then
    echo "build failed: $*" >&2
    tail -n 40 "$LOG" >&2
    exit 1
  fi
}

wrapper() {  # wrapper <dir> : a fresh throwaway module to build other modules' mains in
  rm -rf "${WORK:?}/${1:?}"; mkdir -p "$WORK/$1"; cd "$WORK/$1"
  run go mod init "local/$1"
}

build_kubernetes() {  # build_kubernetes <module dir> <out dir> <cmd...> : k8s.io/kubernetes/cmd/<cmd>
  local dir=$1 out=$2 m moddir_mod staging_tag minor ldflags pkg cmd
  shift 2
  wrapper "$dir"
  # k8s.io/kubernetes pins its staging modules at v0.0.0 with replaces into ./staging;
  # a wrapper module must point each one at its published tag instead.
  moddir_mod="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
  staging_tag="v0${KUBERNETES_VERSION#v1}"
  for m in $(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$moddir_mod"); do
    run go mod edit -replace="$m=$m@$staging_tag"
  done
  run go get "k8s.io/kubernetes@$KUBERNETES_VERSION"
  minor="$(echo "$KUBERNETES_VERSION" | cut -d. -f2)"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  for cmd in "$@"; do
    run go get "k8s.io/kubernetes/cmd/$cmd@$KUBERNETES_VERSION"
  done
  run go build -trimpath -ldflags "$ldflags" -o "$out/" "${@/#/k8s.io/kubernetes/cmd/}"
}
