"""FlashAttention 2 for the lent H200, built there in the background while the machine is held.

The trainer image compiles flash-attn (Dockerfile.cuda), and verl's remove-padding path needs its
varlen kernels; PyPI has no wheel of it for the GPU machine's torch (2.11, CUDA 13), and a wheel
built there cannot come back (the device tool returns files of at most 16 MB). So the build and the
runs that use it must share one machine, inside one 30-minute lease.

The whole package compiles 72 CUDA files (forward, split-KV forward and backward, each causal and
not, for six head dimensions and two element types), for four GPU generations by default: far more
than a lease. The models measured here need two head dimensions, in bf16: Qwen3-VL-4B's language
model has heads of 128, its vision tower heads of 64. So this build keeps those 12 files, for the
H200's sm_90 only, and narrows flash-attn's two dispatch switches to match (a head dimension over
128 or of 32 and less, or fp16, fails with a message instead of a missing symbol). For those shapes
the kernels are the very ones the image's full build runs.

    here:   python -m benchmarks.flash_attn_build prepare    # the sdist and the build tools' wheels
    there:  python -m benchmarks.flash_attn_build start      # unpack, narrow, build in the background
            python -m benchmarks.flash_attn_build wait --seconds 540   # follow it; check when built
            python -m benchmarks.flash_attn_build check      # the kernels against PyTorch's SDPA

`start` installs the build into the carried stack's site-packages (benchmarks/gpu_stack.sh), so
`python -m benchmarks.verl_gpu`, started after it, finds flash-attn and runs FlashAttention 2 with
remove-padding (its `attention` field says which ran).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from . import paths

VERSION = "2.8.3"
"""`CUDA_FLASH_ATTN_VERSION` in images/versions.env: the version the CUDA image compiles."""
SDIST = f"flash_attn-{VERSION}.tar.gz"
SDIST_URL = (
    "https://files.pythonhosted.org/packages/3b/b2/8d76c41ad7974ee264754709c22963447f7f8134613fd9ce80984ed0dab7/"
    + SDIST
)
SDIST_SHA256 = "1e71dd64a9e0280e0447b8a0c2541bad4bf6ac65bdeaa2f90e51a9e57de0370d"
BUILD_TOOLS = ("ninja", "setuptools", "wheel", "packaging", "psutil", "einops")
"""What setup.py imports or runs (ninja for parallel nvcc jobs; without it torch's extension
builder compiles one file at a time), and einops, which flash-attn imports at run time."""
CACHE = paths.CACHE / f"flash-attn-{VERSION}"
REMOTE = Path(os.environ.get("FLASH_ATTN_REMOTE", "/tmp/flash-attn"))
SITE = Path(os.environ.get("GPU_STACK_REMOTE", "/tmp/gpu-stack")) / "site-packages"

HEAD_DIMS = (64, 128)
DTYPE = "bf16"
ARCHS = "90"
KERNEL_SOURCE = re.compile(r'^\s*"csrc/flash_attn/src/flash_\w+?_hdim(\d+)_(fp16|bf16)\w*\.cu",\s*$')


def log(message: str) -> None:
    print(f"[flash-attn {time.strftime('%H:%M:%S')}] {message}", flush=True)


# --- narrowing the build -----------------------------------------------------------------------


def narrow_sources(setup_py: str) -> str:
    """setup.py without the kernel files of other head dimensions and element types."""
    kept, dropped = [], 0
    for line in setup_py.splitlines(keepends=True):
        found = KERNEL_SOURCE.match(line)
        if found and (int(found.group(1)) not in HEAD_DIMS or found.group(2) != DTYPE):
            dropped += 1
            continue
        kept.append(line)
    left = sum(1 for line in kept if KERNEL_SOURCE.match(line))
    if not dropped or left != 6 * len(HEAD_DIMS):
        raise SystemExit(
            f"setup.py: expected 6 kernel files per head dimension to remain, found {left} "
            f"(dropped {dropped}); flash-attn's layout changed"
        )
    return "".join(kept)


_SWITCH = r"#define {name}\((?P<args>[^)]*)\)[^\n]*\n(?:[^\n]*\\\n)*?[^\n]*\}}\(\)\n"

NARROW_FP16_SWITCH = """#define FP16_SWITCH(COND, ...)               \\
  [&] {                                      \\
    TORCH_CHECK(!(COND), "this flash-attn build has bf16 kernels only"); \\
    using elem_type = cutlass::bfloat16_t;   \\
    return __VA_ARGS__();                    \\
  }()
"""

NARROW_HEADDIM_SWITCH = """#define HEADDIM_SWITCH(HEADDIM, ...)       \\
  [&] {                                    \\
    TORCH_CHECK(HEADDIM > 32 && HEADDIM <= 128, "this flash-attn build has kernels for head dimensions 33 to 128 only"); \\
    if (HEADDIM <= 64) {                   \\
      constexpr static int kHeadDim = 64;  \\
      return __VA_ARGS__();                \\
    } else {                               \\
      constexpr static int kHeadDim = 128; \\
      return __VA_ARGS__();                \\
    }                                      \\
  }()
"""


def narrow_switches(static_switch_h: str) -> str:
    """static_switch.h whose element-type and head-dimension switches reach only the kept kernels.

    A head dimension from 33 to 64 runs the 64 kernel and one from 65 to 128 the 128 kernel, as in
    the full build (the kernel masks the columns past the head's own dimension); 32 and less, which
    the full build gives a kernel of its own, and anything over 128 fail with a message."""
    text = static_switch_h
    for name, narrow in (("FP16_SWITCH", NARROW_FP16_SWITCH), ("HEADDIM_SWITCH", NARROW_HEADDIM_SWITCH)):
        text, count = re.subn(_SWITCH.format(name=name), lambda _, n=narrow: n, text, count=1)
        if count != 1:
            raise SystemExit(f"static_switch.h: no {name} definition found; flash-attn's layout changed")
    return text


def narrow_tree(source: Path) -> None:
    setup_py = source / "setup.py"
    setup_py.write_text(narrow_sources(setup_py.read_text()))
    switch = source / "csrc" / "flash_attn" / "src" / "static_switch.h"
    switch.write_text(narrow_switches(switch.read_text()))


# --- here --------------------------------------------------------------------------------------


def prepare() -> int:
    CACHE.mkdir(parents=True, exist_ok=True)
    sdist = CACHE / SDIST
    if not sdist.is_file() or _sha256(sdist) != SDIST_SHA256:
        log(f"downloading {SDIST}")
        cert = ["--cacert", os.environ["PIP_CERT"]] if os.environ.get("PIP_CERT") else []
        subprocess.run(["curl", "-fsS", *cert, "-o", str(sdist), SDIST_URL], check=True)
        if _sha256(sdist) != SDIST_SHA256:
            raise SystemExit(f"{SDIST}: checksum mismatch")
    tools = CACHE / "tools"
    tools.mkdir(exist_ok=True)
    platforms = ["manylinux2014_x86_64", "any", *(f"manylinux_2_{n}_x86_64" for n in range(5, 40))]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312", "--abi", "abi3",
         "--abi", "none", *(f"--platform={p}" for p in platforms), "-d", str(tools), *BUILD_TOOLS],
        check=True,
    )  # fmt: skip
    carry = [str(p.relative_to(paths.REPO)) for p in (sdist, tools)]
    log(f"ready: carry {carry} with `start`")
    return 0


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# --- there -------------------------------------------------------------------------------------


def find_nvcc() -> Path | None:
    """The machine's nvcc: on PATH, or in a CUDA toolkit under /usr/local (the lent machine's)."""
    found = shutil.which("nvcc") or next(iter(sorted(Path("/usr/local").glob("cuda*/bin/nvcc"))), None)
    return Path(found) if found else None


def start(jobs: int) -> int:
    sdist, tools = CACHE / SDIST, CACHE / "tools"
    if not sdist.is_file() or not tools.is_dir():
        raise SystemExit(
            f"carry {sdist.relative_to(paths.REPO)} and {tools.relative_to(paths.REPO)} (run `prepare` here)"
        )
    if _sha256(sdist) != SDIST_SHA256:
        raise SystemExit(f"{SDIST}: checksum mismatch")
    nvcc = find_nvcc()
    if nvcc is None:
        raise SystemExit("no nvcc on this machine: flash-attn cannot be built here")
    shutil.rmtree(REMOTE, ignore_errors=True)
    REMOTE.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        tar.extractall(REMOTE, filter="data")
    source = REMOTE / f"flash_attn-{VERSION}"
    narrow_tree(source)
    tool_site = REMOTE / "tools"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target",
         str(tool_site), *map(str, sorted(tools.glob("*.whl")))],
        check=True,
    )  # fmt: skip
    cuda_home = str(Path(nvcc).resolve().parents[1])
    env = {
        **os.environ,
        "PATH": f"{tool_site / 'bin'}:{Path(nvcc).parent}:{os.environ['PATH']}",
        "PYTHONPATH": f"{tool_site}:{os.environ.get('PYTHONPATH', '')}",
        "CUDA_HOME": cuda_home,
        "FLASH_ATTN_CUDA_ARCHS": ARCHS,
        "FLASH_ATTENTION_FORCE_BUILD": "TRUE",  # no prebuilt wheel to look for: nothing is reachable
        "MAX_JOBS": str(jobs),
        "NVCC_THREADS": "2",
    }
    script = (
        f"set -o pipefail; cd {source} && "
        f"{sys.executable} -m pip wheel --no-deps --no-build-isolation --no-index -v -w {REMOTE / 'dist'} . "
        f"&& {sys.executable} -m pip install --no-deps --no-index --upgrade --target {SITE} "
        f"{REMOTE / 'dist'}/flash_attn-*.whl {tools}/einops-*.whl; echo $? > {REMOTE / 'rc'}"
    )
    with open(REMOTE / "build.log", "w") as out:
        process = subprocess.Popen(
            ["bash", "-c", script], stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    (REMOTE / "pid").write_text(str(process.pid))
    (REMOTE / "started").write_text(str(time.time()))
    log(f"building flash-attn {VERSION} (sm_{ARCHS}, {DTYPE}, head dims {HEAD_DIMS}) with {jobs} jobs, "
        f"nvcc {nvcc}; pid {process.pid}, log {REMOTE / 'build.log'}")  # fmt: skip
    return 0


def wait(seconds: float) -> int:
    rc_file, started = REMOTE / "rc", float((REMOTE / "started").read_text())
    deadline = time.time() + seconds
    while not rc_file.is_file() and time.time() < deadline:
        time.sleep(5)
    compiled = sum(1 for line in _log_lines() if re.search(r"\[\d+/\d+\].*\.cu", line))
    log(f"{time.time() - started:.0f} s since start, {compiled} compile steps seen")
    for line in _log_lines()[-6:]:
        print("    " + line[:300])
    if not rc_file.is_file():
        log("still building")
        return 0
    code = int(rc_file.read_text().strip() or 1)
    log(f"build ended with exit code {code} after {rc_file.stat().st_mtime - started:.0f} s")
    return check() if code == 0 else 1


def _log_lines() -> list[str]:
    path = REMOTE / "build.log"
    return path.read_text(errors="replace").splitlines() if path.is_file() else []


def check() -> int:
    """The kept kernels, forward and backward, against PyTorch's SDPA on the same packed batch."""
    sys.path.insert(0, str(SITE))
    import torch
    from flash_attn import flash_attn_varlen_func
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    torch.manual_seed(0)
    lengths = [37, 128, 301]
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    worst = 0.0
    for head_dim in HEAD_DIMS:
        q, k, v = (
            torch.randn(sum(lengths), 8, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(3)
        )
        out = flash_attn_varlen_func(q, k, v, cu, cu, max(lengths), max(lengths), causal=True)
        out.float().square().sum().backward()
        for start, length in zip(cu[:-1].tolist(), lengths, strict=True):
            rows = slice(start, start + length)
            # (tokens, heads, dim) -> (1, heads, tokens, dim), in float32: the reference
            ref_q, ref_k, ref_v = (
                t.detach()[rows].transpose(0, 1)[None].float().requires_grad_() for t in (q, k, v)
            )
            expected = sdpa(ref_q, ref_k, ref_v, is_causal=True)
            expected.square().sum().backward()
            for got, want in ((out.detach()[rows], expected.detach()), (q.grad[rows], ref_q.grad)):
                got = got.transpose(0, 1)[None].float()
                worst = max(worst, float((got - want).abs().max() / want.abs().max()))
    ok = worst < 0.02
    log(f"varlen forward and backward, head dims {HEAD_DIMS}, bf16, causal: largest difference from "
        f"SDPA {worst:.2%} of the largest value ({'ok' if ok else 'too large'})")  # fmt: skip
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("verb", choices=["prepare", "start", "wait", "check"])
    parser.add_argument("--jobs", type=int, default=16, help="parallel nvcc jobs (the machine has 16 cores)")
    parser.add_argument("--seconds", type=float, default=540)
    args = parser.parse_args(argv)
    if args.verb == "prepare":
        return prepare()
    if args.verb == "start":
        return start(args.jobs)
    if args.verb == "wait":
        return wait(args.seconds)
    return check()


if __name__ == "__main__":
    sys.exit(main())
