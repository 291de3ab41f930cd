#!/usr/bin/env bash
# Carries the Python stack of benchmarks/gpu_stack_requirements.txt (vLLM, Ray, verl, transformers,
# TRL, bitsandbytes and their wheels) to the lent GPU machine, which reaches no package registry.
#
# The transport, and why it looks like this:
# - The device tool copies this repo's working tree to the GPU machine on every call, plus the
#   git-ignored paths named in that call's `carry` list, at most 64 MiB in all per call. The stack is
#   ~0.6 GB of wheels, so it cannot travel in one call.
# - Files the command leaves in the machine's /tmp survive between calls while the machine stays
#   warm; it is given back after about 30 s without a call (or 30 min in all), and a fresh one
#   starts bare. So the calls that bring the parts must follow one another closely.
# - Hence: here, `prepare` downloads every wheel once into a git-ignored cache, tars them and splits
#   the tar into parts of at most 58 MB (a part plus the ~1-2 MB tree stays under the limit). Then
#   one device call per part carries that part (and the tiny SHA256SUMS and MANIFEST) and runs
#   `receive`, which moves it to /tmp/gpu-stack on the machine. The last call runs `install`
#   (checks every checksum, reassembles, `pip install --no-index --no-deps --target`) and `check`.
#   A warm machine takes a 58 MB part in about 5 s; the whole sequence takes a few minutes.
# - Nothing is installed into the machine's own Python: the stack lives in /tmp/gpu-stack/site-packages and is
#   used through PYTHONPATH, which puts it ahead of the machine's packages (its transformers 5.17 and
#   tokenizers 0.23 are shadowed by the pinned ones). Ray workers inherit the variable.
#
# Usage:
#   here:   bash benchmarks/gpu_stack.sh prepare [--parts-dir DIR]   # prints one carry list per call
#   there:  bash benchmarks/gpu_stack.sh receive [--parts-dir DIR]   # every call, from the repo root
#           bash benchmarks/gpu_stack.sh install [--parts-dir DIR]   # last call, once all parts are in
#           bash benchmarks/gpu_stack.sh check                       # imports and versions
#           eval "$(bash benchmarks/gpu_stack.sh env)"                # PYTHONPATH/PATH for later commands
#           python -m benchmarks.<module> ...                          # from the repository root
#
# Environment: GPU_STACK_REMOTE (default /tmp/gpu-stack: where parts and the installed site live on
# the GPU machine; set it to simulate the machine here), GPU_STACK_PART_BYTES (default 58000000),
# PYTHON (default python3: the interpreter whose pip downloads here and installs there),
# GPU_STACK_BYTECODE (default 1: install compiles the bytecode, as an image has it; 0 skips it).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REQ="$ROOT/benchmarks/gpu_stack_requirements.txt"
PYTHON=${PYTHON:-python3}
REMOTE=${GPU_STACK_REMOTE:-/tmp/gpu-stack}
PART_BYTES=${GPU_STACK_PART_BYTES:-58000000}
CALL_LIMIT=$((64 * 1024 * 1024))   # the device tool's cap on one call's tree + carried paths
CALL_WARN=$((60 * 1024 * 1024))    # what we aim to stay under

# The target the wheels are for: the GPU machine's CPython 3.12 on x86-64 Linux. pip matches each
# manylinux_2_N tag exactly, so every N a wheel may use is listed.
TARGET_PY=3.12
PLATFORM_FLAGS=(--only-binary=:all: --python-version "$TARGET_PY" --implementation cp
  --abi cp312 --abi abi3 --abi none
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
for n in $(seq 5 39); do PLATFORM_FLAGS+=(--platform "manylinux_2_${n}_x86_64"); done

KEY=$(sha256sum "$REQ" | cut -c1-12)   # cache key: any edit of the requirements gives a new set
CACHE="$ROOT/.cache/gpu-stack/$KEY"
STORE="$REMOTE/$KEY"                   # on the GPU machine: the parts received so far
# Named site-packages on purpose: dill (which datasets uses to fingerprint a Dataset) pickles a
# module by reference only when its path lies under sys.prefix or contains "site-packages"; from
# any other folder it pickles pyarrow's module dict by value and fails ("Can't pickle <class
# 'MonthDayNano'>"), so every TRL run died in Dataset.from_list when this was /tmp/gpu-stack/site.
SITE="$REMOTE/site-packages"
PYCACHE="$REMOTE/pycache"             # the bytecode of everything the stack's Python imports (install)
STAMP="$SITE/.gpu-stack-installed"

say() { printf '[gpu-stack] %s\n' "$*" >&2; }
die() { printf '[gpu-stack] ERROR: %s\n' "$*" >&2; exit 1; }
human() { numfmt --to=iec-i --suffix=B "$1" 2>/dev/null || echo "$1 B"; }
manifest_get() { sed -n "s/^$2=//p" "$1" | head -n1; }

usage() {
  sed -n '/^# Usage:/,/^# Environment/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

# --parts-dir DIR (relative to the repo root, or absolute) for prepare/receive/install.
PARTS_REL=".cache/gpu-stack/$KEY/parts"
parse_parts_dir() {
  while (($#)); do
    case "$1" in
      --parts-dir) [[ $# -ge 2 ]] || die "--parts-dir needs a folder"; PARTS_REL=$2; shift 2 ;;
      --parts-dir=*) PARTS_REL=${1#*=}; shift ;;
      *) die "unknown argument: $1" ;;
    esac
  done
  if [[ $PARTS_REL = /* ]]; then
    PARTS=$PARTS_REL
    case "$PARTS/" in "$ROOT"/*) PARTS_REL=${PARTS#"$ROOT"/} ;; *) PARTS_REL="" ;; esac
  else
    PARTS="$ROOT/$PARTS_REL"
  fi
}

# Requirements, comments stripped: "name==version" lines, split into wheels to download and
# source-only packages (comment says sdist-only) whose pure-Python wheel is built here.
requirement_lines() {  # $1 = wheel | sdist
  local line req comment kind
  while IFS= read -r line || [[ -n $line ]]; do
    req=${line%%#*}; req=${req//[[:space:]]/}
    [[ -z $req ]] && continue
    comment=""; [[ $line == *"#"* ]] && comment=${line#*#}
    if [[ $comment == *sdist-only* ]]; then kind=sdist; else kind=wheel; fi
    if [[ $1 == "$kind" ]]; then echo "$req"; fi
  done < "$REQ"
}

# Checks that the wheel folder holds exactly one wheel per requirement, at the pinned version, and
# installable on the target; names what is missing or surplus and fails if anything is.
verify_wheels() {  # $1 = wheel folder, $2 = file with all requirements
  "$PYTHON" - "$1" "$2" <<'PY'
import os, sys
from pip._vendor.packaging import tags
from pip._vendor.packaging.utils import canonicalize_name, parse_wheel_filename
from pip._vendor.packaging.version import Version
folder, reqfile = sys.argv[1:]
plats = ["linux_x86_64"] + [f"manylinux_2_{n}_x86_64" for n in range(5, 40)] + ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
supported = set(tags.cpython_tags((3, 12), abis=["cp312", "abi3", "none"], platforms=plats))
supported |= set(tags.compatible_tags((3, 12), "cp312", plats))
want = {}
for line in open(reqfile):
    name, _, ver = line.strip().partition("==")
    if name:
        want[canonicalize_name(name)] = Version(ver)
have, problems = {}, []
for f in sorted(os.listdir(folder)):
    if not f.endswith(".whl"):
        continue
    name, ver, _, wheel_tags = parse_wheel_filename(f)
    if name in have:
        problems.append(f"two wheels for {name}: {have[name]} and {f}")
    have[name] = f
    if name not in want:
        problems.append(f"surplus wheel (not in the requirements): {f}")
    elif ver != want[name]:
        problems.append(f"{f}: version {ver}, the requirements pin {want[name]}")
    if not wheel_tags & supported:
        problems.append(f"{f}: not installable on CPython 3.12 manylinux x86_64")
for name in sorted(set(want) - set(have)):
    problems.append(f"missing wheel: {name}=={want[name]}")
for p in problems:
    print("  " + p, file=sys.stderr)
sys.exit(1 if problems else 0)
PY
}

# Estimated bytes of the working tree that the device tool sends on every call.
tree_bytes() {
  local n=0
  if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
    n=$(cd "$ROOT" && git ls-files -z -co --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -n1 | cut -f1)
  fi
  if [[ -d "$ROOT/shared" ]]; then n=$((n + $(du -sb "$ROOT/shared" | cut -f1))); fi
  echo "${n:-0}"
}

cmd_prepare() {
  parse_parts_dir "$@"
  local wheels="$CACHE/wheels" reqs="$CACHE/requirements.all"
  local wreqs="$CACHE/requirements.wheels" sreqs="$CACHE/requirements.sdist"
  mkdir -p "$wheels" "$PARTS"
  if [[ -n $PARTS_REL ]] && git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1 \
      && ! git -C "$ROOT" check-ignore -q "$PARTS_REL/part-00"; then
    die "$PARTS_REL is not git-ignored: its parts would travel in every call and burst the 64 MiB limit"
  fi
  [[ -n $PARTS_REL ]] || say "warning: $PARTS is outside the repo; the device tool carries only paths inside it"

  requirement_lines wheel > "$wreqs"; requirement_lines sdist > "$sreqs"; cat "$wreqs" "$sreqs" > "$reqs"
  say "requirements: ${REQ#"$ROOT"/}: $(wc -l < "$reqs") packages ($(wc -l < "$sreqs") built from source here), cache key $KEY"

  # 1. Wheels, once per key (pip also skips files already in the folder).
  if [[ -f "$CACHE/wheels.complete" ]] && verify_wheels "$wheels" "$reqs" 2>/dev/null; then
    say "wheels already downloaded: ${wheels#"$ROOT"/}"
  else
    rm -f "$CACHE/wheels.complete"
    say "downloading $(wc -l < "$wreqs") wheels for CPython $TARGET_PY manylinux x86_64 into ${wheels#"$ROOT"/}"
    local failed=() req name
    if "$PYTHON" -m pip download --no-deps --progress-bar off "${PLATFORM_FLAGS[@]}" -d "$wheels" -r "$wreqs" \
        2>&1 | tee "$CACHE/download.log" | grep --line-buffered -E '^(Saved|File was already downloaded)' | cat -n >&2
       [[ ${PIPESTATUS[0]} -ne 0 ]]; then
      say "the download as a whole failed; trying each package alone to name the ones with no wheel"
      while IFS= read -r req; do
        if ! "$PYTHON" -m pip download -q --no-deps --progress-bar off "${PLATFORM_FLAGS[@]}" -d "$wheels" "$req" \
            > "$CACHE/one.log" 2>&1; then
          failed+=("$req")
          say "  no wheel: $req: $(grep -m1 '^ERROR' "$CACHE/one.log" || tail -n1 "$CACHE/one.log")"
        fi
      done < "$wreqs"
    fi
    # Source-only packages: build the wheel here; verify_wheels accepts only pure-Python results.
    while IFS= read -r req; do
      name=${req%%==*}
      say "building the wheel of $req from its source archive"
      if ! "$PYTHON" -m pip wheel -q --no-deps --progress-bar off --no-binary "$name" -w "$wheels" "$req" \
          > "$CACHE/build.log" 2>&1; then
        failed+=("$req")
        say "  build failed: $req: $(grep -m1 '^ERROR' "$CACHE/build.log" || tail -n1 "$CACHE/build.log")"
      fi
    done < "$sreqs"
    ((${#failed[@]} == 0)) || die "no wheel for: ${failed[*]}"
    verify_wheels "$wheels" "$reqs" || die "the wheel folder does not match the requirements (see above)"
    touch "$CACHE/wheels.complete"
  fi
  local nwheels wheel_bytes
  nwheels=$(find "$wheels" -maxdepth 1 -name '*.whl' | wc -l)
  wheel_bytes=$(find "$wheels" -maxdepth 1 -name '*.whl' -printf '%s\n' | awk '{s+=$1} END {print s+0}')
  say "$nwheels wheels, $(human "$wheel_bytes")"

  # 2. One tar (uncompressed: wheels are zips already), split into parts. Reproducible tar, so the
  #    same wheels always give the same parts and checksums.
  local digest; digest=$(cd "$wheels" && sha256sum -- *.whl | sha256sum | cut -c1-64)
  if [[ -f "$PARTS/MANIFEST" && "$(manifest_get "$PARTS/MANIFEST" wheels_digest)" == "$digest" ]] \
      && (cd "$PARTS" && sha256sum -c --quiet --ignore-missing SHA256SUMS >/dev/null 2>&1) \
      && [[ $(find "$PARTS" -maxdepth 1 -name 'part-*' | wc -l) == "$(manifest_get "$PARTS/MANIFEST" parts)" ]]; then
    say "parts already made: ${PARTS#"$ROOT"/}"
  else
    say "packing and splitting into parts of at most $PART_BYTES bytes ($(human "$PART_BYTES")) in ${PARTS#"$ROOT"/}"
    rm -f "$PARTS"/part-* "$PARTS/SHA256SUMS" "$PARTS/MANIFEST"
    local tarball="$CACHE/wheels.tar"
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2000-01-01 00:00Z' \
      -cf "$tarball" -C "$CACHE" wheels
    local tar_bytes tar_sha
    tar_bytes=$(stat -c %s "$tarball")
    tar_sha=$(sha256sum "$tarball" | cut -d' ' -f1)
    split -b "$PART_BYTES" -d -a 2 "$tarball" "$PARTS/part-"
    rm -f "$tarball"
    ( cd "$PARTS"
      { echo "$tar_sha  wheels.tar"; sha256sum part-*; } > SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS
      { echo "key=$KEY"
        echo "requirements_sha256=$(sha256sum "$REQ" | cut -d' ' -f1)"
        echo "wheels=$nwheels"
        echo "wheels_bytes=$wheel_bytes"
        echo "wheels_digest=$digest"
        echo "tar=wheels.tar"
        echo "tar_bytes=$tar_bytes"
        echo "part_bytes=$PART_BYTES"
        echo "parts=$(find . -maxdepth 1 -name 'part-*' | wc -l)"
        for p in part-*; do echo "$p=$(stat -c %s "$p")"; done
      } > MANIFEST.tmp && mv MANIFEST.tmp MANIFEST )
  fi

  # 3. What to carry, call by call.
  local nparts tree; nparts=$(manifest_get "$PARTS/MANIFEST" parts); tree=$(tree_bytes)
  say "done: $nwheels wheels, tar $(human "$(manifest_get "$PARTS/MANIFEST" tar_bytes)"), $nparts parts"
  [[ -n $PARTS_REL ]] || return 0
  local pd_arg=""; [[ $PARTS_REL == ".cache/gpu-stack/$KEY/parts" ]] || pd_arg=" --parts-dir $PARTS_REL"
  echo
  echo "One device call per part, back to back (the machine is given back after ~30 s idle)."
  echo "Working tree that travels with each call: $(human "$tree")."
  local i=0 p bytes total
  for p in "$PARTS"/part-*; do
    p=${p##*/}
    bytes=$(stat -c %s "$PARTS/$p"); total=$((tree + bytes + $(stat -c %s "$PARTS/SHA256SUMS") + $(stat -c %s "$PARTS/MANIFEST")))
    i=$((i + 1))
    local cmd="bash benchmarks/gpu_stack.sh receive$pd_arg"
    ((i == nparts)) && cmd="bash benchmarks/gpu_stack.sh install$pd_arg && bash benchmarks/gpu_stack.sh check"
    printf 'call %d/%d (%s): carry ["%s/%s", "%s/SHA256SUMS", "%s/MANIFEST"]\n' \
      "$i" "$nparts" "$(human "$total")" "$PARTS_REL" "$p" "$PARTS_REL" "$PARTS_REL"
    printf '    command: %s\n' "$cmd"
    ((total < CALL_WARN)) || say "warning: call $i carries $(human "$total") with the tree (limit $(human "$CALL_LIMIT"))"
  done
}

# On the GPU machine: move the parts carried in this call into $STORE, each checked against
# SHA256SUMS first. Sets BAD to the carried parts that failed their checksum.
BAD=()
receive_parts() {
  mkdir -p "$STORE"
  if [[ -f "$PARTS/SHA256SUMS" && -f "$PARTS/MANIFEST" ]]; then
    [[ "$(manifest_get "$PARTS/MANIFEST" key)" == "$KEY" ]] \
      || die "$PARTS_REL/MANIFEST is for key $(manifest_get "$PARTS/MANIFEST" key), these requirements give $KEY"
    if [[ -f "$STORE/SHA256SUMS" ]] && ! cmp -s "$PARTS/SHA256SUMS" "$STORE/SHA256SUMS"; then
      say "the carried parts come from another prepare run: dropping the parts received before"
      rm -f "$STORE"/part-*
    fi
    cp "$PARTS/SHA256SUMS" "$PARTS/MANIFEST" "$STORE/"
  elif [[ ! -f "$STORE/MANIFEST" ]]; then
    local others; others=$(cd "$ROOT" && compgen -G '.cache/gpu-stack/*/parts' | tr '\n' ' ') || true
    die "no SHA256SUMS/MANIFEST carried in this call (expected in ${PARTS_REL:-$PARTS}, key $KEY) and none received before${others:+; carried folders here: $others(were the requirements edited after prepare?)}"
  fi
  local f p got=()
  for f in "$PARTS"/part-*; do
    [[ -f $f ]] || continue
    p=${f##*/}
    if [[ -f "$STORE/$p" ]] && cmp -s "$f" "$STORE/$p"; then got+=("$p"); continue; fi
    if (cd "$PARTS" && grep " $p\$" "$STORE/SHA256SUMS" | sha256sum -c --quiet - >/dev/null 2>&1); then
      cp "$f" "$STORE/.$p.tmp" && mv "$STORE/.$p.tmp" "$STORE/$p"; got+=("$p")
    else
      BAD+=("$p")
    fi
  done
  if ((${#got[@]})); then say "carried parts found and kept: ${got[*]}"
  elif ((${#BAD[@]} == 0)); then say "no part carried in this call"; fi
}

# Prints which parts are present and missing in $STORE; returns 1 if any are missing.
report_parts() {
  local n i p present=() missing=()
  n=$(manifest_get "$STORE/MANIFEST" parts)
  for ((i = 0; i < n; i++)); do
    p=$(printf 'part-%02d' "$i")
    if [[ -f "$STORE/$p" ]]; then present+=("$p"); else missing+=("$p"); fi
  done
  say "$STORE: ${#present[@]} of $n parts present${present:+: ${present[*]}}"
  if ((${#missing[@]})); then say "missing: ${missing[*]}"; return 1; fi
  say "all parts present: run install"
}

# The carried stack first, then this checkout's operator and trainer (the GPU machine has no
# install of them): `python -m benchmarks.<module>` from the repository root imports both.
env_lines() {
  echo "export PYTHONPATH=$SITE:$ROOT/trainer:$ROOT/operator\${PYTHONPATH:+:\$PYTHONPATH}"
  echo "export PATH=$SITE/bin:\$PATH"
  echo "export VLLM_USE_FLASHINFER_SAMPLER=0"
  if [[ -d $PYCACHE ]]; then echo "export PYTHONPYCACHEPREFIX=$PYCACHE"; fi
}

cmd_receive() {
  parse_parts_dir "$@"
  receive_parts
  report_parts || true
  ((${#BAD[@]} == 0)) || die "checksum mismatch, not kept: ${BAD[*]} (carry them again)"
}

cmd_install() {
  parse_parts_dir "$@"
  if [[ -f $STAMP ]] && grep -qx "key=$KEY" "$STAMP"; then
    say "already installed ($(grep '^wheels=' "$STAMP")) in $SITE; for later commands:"
    env_lines; return 0
  fi
  # A part carried in this same call counts too.
  if [[ -f "$PARTS/MANIFEST" || -f "$STORE/MANIFEST" ]]; then receive_parts; fi
  ((${#BAD[@]} == 0)) || die "checksum mismatch, not kept: ${BAD[*]} (carry them again)"
  [[ -f "$STORE/MANIFEST" ]] || die "nothing received yet for key $KEY: run receive in each call that carries a part"
  report_parts || die "cannot install: parts missing (listed above); carry them, then run install again"

  local n; n=$(manifest_get "$STORE/MANIFEST" parts)
  say "checking the $n parts"
  (cd "$STORE" && grep ' part-' SHA256SUMS | sha256sum -c --quiet -) || die "a stored part is corrupt: carry it again"
  local work="$STORE/unpack"; rm -rf "$work" "$STORE/wheels.tar"
  say "reassembling the tar"
  local parts=() i
  for ((i = 0; i < n; i++)); do parts+=("$(printf '%s/part-%02d' "$STORE" "$i")"); done
  cat "${parts[@]}" > "$STORE/wheels.tar"
  (cd "$STORE" && grep ' wheels.tar$' SHA256SUMS | sha256sum -c --quiet -) || die "the reassembled tar does not match its checksum"
  mkdir -p "$work"; tar -xf "$STORE/wheels.tar" -C "$work"; rm -f "$STORE/wheels.tar"
  local nw; nw=$(find "$work/wheels" -name '*.whl' | wc -l)
  [[ $nw == "$(manifest_get "$STORE/MANIFEST" wheels)" ]] || die "found $nw wheels, MANIFEST says $(manifest_get "$STORE/MANIFEST" wheels)"

  local cross=()
  local pyver; pyver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [[ $pyver != "$TARGET_PY" ]]; then
    say "note: $PYTHON is Python $pyver, the wheels are for $TARGET_PY: installing as for $TARGET_PY (a simulation, not importable here)"
    cross=("${PLATFORM_FLAGS[@]}")
  fi
  say "installing $nw wheels into $SITE (pip --no-index --no-deps --no-compile; bytecode after, on every core)"
  rm -rf "$SITE.new"
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
    --root-user-action=ignore "${cross[@]}" --target "$SITE.new" "$work"/wheels/*.whl || die "pip install failed"
  rm -rf "$SITE" "$work"; mv "$SITE.new" "$SITE"
  # An image has its bytecode (pip compiles at install): without it every cold start here would
  # also pay for compiling torch, vLLM and verl on import, which a pod never does. Compiling the
  # stack alone was not enough: the stacks sampled through two 4B attempts' start-up (51 and 58
  # of their 175 and 167 busy samples in Python's compiler, as many in the second attempt as in
  # the first) show the machine's own packages (its torch, numpy, sympy) compiled again in every
  # process. So everything the stack's interpreter imports from, the standard library and the
  # machine's packages too, is compiled into one tree that PYTHONPYCACHEPREFIX names for every
  # later command (and the Ray and vLLM processes they start). All cores at once;
  # GPU_STACK_BYTECODE=0 keeps everything as it was.
  rm -rf "$PYCACHE"
  if [[ ${GPU_STACK_BYTECODE:-1} == 1 && ${#cross[@]} == 0 ]]; then
    local t0=$SECONDS folders=()
    mapfile -t folders < <(PYTHONPATH=$SITE "$PYTHON" -c 'import os, sys; print("\n".join(p for p in sys.path if os.path.isdir(p)))')
    PYTHONPYCACHEPREFIX=$PYCACHE "$PYTHON" -m compileall -q -j 0 "${folders[@]}" >/dev/null 2>&1 || true
    say "compiled the bytecode of ${#folders[@]} import folders into $PYCACHE in $((SECONDS - t0)) s (GPU_STACK_BYTECODE=0 skips it)"
  fi
  { echo "key=$KEY"; echo "wheels=$nw"; echo "python=$pyver"; echo "date=$(date -u +%FT%TZ)"; } > "$STAMP"
  say "installed $nw wheels ($(du -sh "$SITE" | cut -f1)) in $SITE; for later commands:"
  env_lines
}

cmd_check() {
  [[ -f $STAMP ]] || die "nothing installed in $SITE: run install first"
  eval "$(env_lines)"
  local script; script=$(mktemp /tmp/gpu-stack-check.XXXXXX.py)
  cat > "$script" <<PY
import importlib, sys
SITE = "$SITE"
# (module, whether it must come from the carried site rather than the machine's own packages)
MODULES = [("torch", False), ("transformers", True), ("tokenizers", True), ("vllm", True), ("ray", True),
           ("verl", True), ("trl", True), ("datasets", True), ("pyarrow", True), ("tensordict", True),
           ("hydra", True), ("omegaconf", True), ("torchdata", True), ("transfer_queue", True),
           ("bitsandbytes", True), ("peft", False), ("accelerate", False)]

def main():
    print("python", sys.version.split()[0], "at", sys.executable, "| carried site:", SITE)
    failed = []
    for name, carried in MODULES:
        try:
            mod = importlib.import_module(name)
        except Exception as exc:  # report every failure, not just the first
            failed.append(name)
            print(f"{name:15} FAILED: {type(exc).__name__}: {exc}")
            continue
        where = getattr(mod, "__file__", "") or ""
        origin = "carried" if where.startswith(SITE) else "machine"
        flag = "  <-- expected the carried one" if carried and origin != "carried" else ""
        if flag:
            failed.append(name)
        print(f"{name:15} {str(getattr(mod, '__version__', '?')):24} {origin}{flag}")
    try:
        import torch
        ok = torch.cuda.is_available()
        print("torch.cuda.is_available():", ok, "|", torch.cuda.get_device_name(0) if ok else "no GPU")
    except Exception as exc:
        print("torch.cuda check FAILED:", exc)
    print("check:", "FAILED: " + ", ".join(failed) if failed else "all imports OK")
    sys.exit(1 if failed else 0)

if __name__ == "__main__":  # vLLM's engine processes re-import the main module
    main()
PY
  local rc=0; "$PYTHON" "$script" || rc=$?
  rm -f "$script"; return "$rc"
}

case "${1:-}" in
  prepare) shift; cmd_prepare "$@" ;;
  receive) shift; cmd_receive "$@" ;;
  install) shift; cmd_install "$@" ;;
  check) shift; cmd_check "$@" ;;
  env) env_lines ;;
  -h|--help|help|"") usage ;;
  *) say "unknown command: $1"; usage ;;
esac
