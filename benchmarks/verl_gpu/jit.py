"""FlashInfer's kernel builds: the tools they need, the modules an attempt built, and `jit-check`."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from grpo_operator.api.contract import CHECKPOINT_MOUNT, JOB_SUBDIRS

from benchmarks.flash_attn_build import find_nvcc

from .machine import gpu_facts, log, write_json
from .stack import EXTRA_SITE, WHEELS, _importable, install_carried

NINJA_DIRS = (EXTRA_SITE / "ninja" / "data" / "bin", EXTRA_SITE / "bin")
"""Where the carried ninja wheel puts its binary (and its wrapper) in the extra site."""


def find_ninja() -> Path | None:
    found = shutil.which("ninja") or shutil.which("ninja", path=os.pathsep.join(map(str, NINJA_DIRS)))
    return Path(found) if found else None


def flashinfer_build_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """What FlashInfer's kernel builds need: CUDA_HOME for nvcc's headers, ninja and nvcc on PATH."""
    nvcc, ninja = find_nvcc(), find_ninja()
    if nvcc is None or ninja is None:
        raise SystemExit(
            "FlashInfer's builds need nvcc and ninja on this machine (carry .cache/verl-gpu/wheels)"
        )
    path = (environ if environ is not None else os.environ).get("PATH", "")
    return {
        "CUDA_HOME": str(nvcc.resolve().parents[1]),
        "PATH": os.pathsep.join(filter(None, [str(ninja.parent), str(nvcc.parent), path])),
    }


JIT_MODULES = f"{CHECKPOINT_MOUNT.lstrip('/')}/*/{JOB_SUBDIRS['cache_dir']}/compile/*/flashinfer/.cache/flashinfer/*/*/cached_ops/*"
"""FlashInfer's kernel builds under the compile caches ours keeps on the job's volume."""


def jit_builds(work: Path, started: float, pattern: str = JIT_MODULES) -> list[dict[str, Any]]:
    """Each FlashInfer module in the job's cache: when its build file and its library were last
    written, in seconds from the attempt's start. FlashInfer rewrites the build file only when it
    changes and ninja relinks only what is stale, so a module built by this attempt has both times
    positive (the build took the difference) and one it found on the volume has both negative."""

    def at(file: Path) -> float | None:
        return round(file.stat().st_mtime - started, 1) if file.is_file() else None

    builds = []
    for folder in sorted(work.glob(pattern)):
        library = folder / f"{folder.name}.so"
        builds.append(
            {
                "module": folder.name,
                "build_file_s": at(folder / "build.ninja"),
                "library_s": at(library),
                "built_by_this_attempt": library.is_file() and library.stat().st_mtime > started,
            }
        )
    return builds


JIT_CALL = """
import json, time
started = time.monotonic()
import torch, flashinfer, flashinfer.sampling
imported = time.monotonic() - started
rows, vocab = 8, 151936  # a batch of Qwen3-VL's vocabulary, as vLLM's sampler warm-up samples it
logits = torch.randn(rows, vocab, device="cuda")
top_k = torch.full((rows,), vocab - 1, device="cuda", dtype=torch.int32)
top_p = torch.full((rows,), 0.9, device="cuda")
calls = []
for _ in range(2):
    call = time.monotonic()
    flashinfer.sampling.top_k_top_p_sampling_from_logits(logits, top_k, top_p)
    torch.cuda.synchronize()
    calls.append(round(time.monotonic() - call, 2))
print(json.dumps({"import_s": round(imported, 2), "calls_s": calls, "flashinfer": flashinfer.__version__}))
"""
"""What vLLM's sampler warm-up asks of FlashInfer (top-k and top-p from logits) where the engine
lets vLLM sample with it, in a process of its own: its first call builds FlashInfer's `sampling`
module when the workspace is cold. (verl's rollout never does: docs/verl.md.)"""
WORKSPACE_MODULES = ".cache/flashinfer/*/*/cached_ops/*"


def cmd_jit_check(args: argparse.Namespace) -> int:
    """FlashInfer's sampling kernels built with this machine's nvcc, timed: once in a cold
    workspace (what a kernel module's first use costs an image without FlashInfer's prebuilt
    kernels), once more in a new process on the same workspace (what a retry pays with the
    workspace on the job's volume). Writes `jit-check.json` into --out after each."""
    if (not _importable("flashinfer") or find_ninja() is None) and WHEELS.is_dir():
        install_carried({"flashinfer", "ninja"})
    nvcc = find_nvcc()
    if nvcc is None or find_ninja() is None or not _importable("flashinfer"):
        raise SystemExit("jit-check needs nvcc, ninja and flashinfer (carry .cache/verl-gpu/wheels)")
    version = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True).stdout.strip()
    workspace = Path(tempfile.mkdtemp(prefix="flashinfer-jit-"))
    env = {**os.environ, **flashinfer_build_env(), "FLASHINFER_WORKSPACE_BASE": str(workspace)}
    result: dict[str, Any] = {
        "machine": gpu_facts(),
        "nvcc": {"path": str(nvcc), "version": version.splitlines()[-1] if version else None},
        "workspace": str(workspace),
    }
    for name in ("cold", "warm"):
        started = time.time()
        log(f"jit-check: {name} workspace, a process of its own (up to {args.seconds:.0f} s)")
        try:
            done = subprocess.run(
                [sys.executable, "-c", JIT_CALL],
                env=env,
                capture_output=True,
                text=True,
                timeout=args.seconds,
            )
            code, output, tail = done.returncode, done.stdout.strip(), done.stderr[-2000:]
        except subprocess.TimeoutExpired as timeout:
            code, output, tail = None, "", f"still building after {args.seconds:.0f} s: {timeout}"
        run: dict[str, Any] = {"exit_code": code, "wall_s": round(time.time() - started, 1)}
        if code == 0 and output:
            run.update(json.loads(output.splitlines()[-1]))
        else:
            run["stderr_tail"] = tail
        run["jit_builds"] = jit_builds(workspace, started, WORKSPACE_MODULES)
        result[name] = run
        write_json(args.out / "jit-check.json", result)
        log(f"jit-check: {name}: {json.dumps(run)[:400]}")
        if code != 0:
            return 1
    return 0
