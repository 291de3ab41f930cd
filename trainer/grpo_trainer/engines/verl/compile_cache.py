"""Compile caches that a retried attempt reuses: vLLM's torch.compile, Inductor's, Triton's and
FlashInfer's.

A verl attempt at Qwen3-VL-4B shapes spends about six minutes before its first step, and part of
that is compiling: vLLM's torch.compile of the model (Inductor, then Triton kernels) for the
rollout server. Left at their defaults these caches live in the pod's home folder and die with
it, and verl's runtime environment turns vLLM's off altogether (VLLM_DISABLE_COMPILE_CACHE=1,
for cache files that concurrent engines corrupted, verl's note cites). torch 2.10 and later
write Inductor's artifacts atomically, which is what corrupted them; with such a torch the engine
turns vLLM's cache back on.

FlashInfer's is a build, not a compile of the model: the CUDA image ships FlashInfer without its
prebuilt kernels, so a kernel's first use compiles it with nvcc into
`$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/<version>/<arch>/cached_ops` (the base defaults to
the home folder, which dies with the pod). Its sampling module alone took 126 s on the lent
H200's 16 cores. verl's rollout does not use that one (it asks vLLM for processed log-probs, for
which vLLM keeps its own sampler); whatever else of FlashInfer's vLLM picks is built once a job.

They go on the job's volume, under its cache folder (kept across attempts), in a folder named
for the versions that invalidate them: a new image starts a fresh folder and the old ones are
removed, so the volume does not fill with caches nothing reads.

A value the pod sets wins, but torch sets one itself: the first time anything in a process asks
Inductor for its cache folder, torch writes its default (`<tmp>/torchinductor_<user>`) into that
process's environment. The trainer imports verl's code before it launches main_ppo, so on the H200
every attempt inherited torch's default and Inductor's cache stayed in the pod's /tmp. That value
is torch's, not the pod's, and does not count as set.
"""

from __future__ import annotations

import getpass
import importlib.metadata
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from packaging.version import InvalidVersion, Version

CACHE_VARIABLES = {
    "VLLM_CACHE_ROOT": "vllm",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TRITON_CACHE_DIR": "triton",
    "FLASHINFER_WORKSPACE_BASE": "flashinfer",
}
"""Each cache's variable -> its folder under the versioned cache folder. FlashInfer names its own
folder below the base for its version and the GPU's architecture."""
KEYED_BY = ("torch", "vllm", "triton")
"""The packages whose versions invalidate the caches."""
ATOMIC_TORCH = Version("2.10")
"""The first torch that writes Inductor's artifacts atomically."""
FOLDER = "compile"


def cache_key(version: Callable[[str], str] = importlib.metadata.version) -> str:
    """`torch-2.11.0_vllm-0.24.0_triton-3.6.0` (a package that is not installed reads `none`)."""
    parts = []
    for package in KEYED_BY:
        try:
            found = version(package)
        except importlib.metadata.PackageNotFoundError:
            found = "none"
        parts.append(f"{package}-{re.sub(r'[^A-Za-z0-9.]+', '.', found)}")
    return "_".join(parts)


def _atomic(version: Callable[[str], str]) -> bool:
    try:
        return Version(version("torch")).release[:2] >= ATOMIC_TORCH.release
    except (importlib.metadata.PackageNotFoundError, InvalidVersion):
        return False


def torch_default_inductor_dir() -> str:
    """The folder torch's Inductor uses, and writes into its process's environment, when
    TORCHINDUCTOR_CACHE_DIR is unset (torch/_inductor/runtime/cache_dir_utils.py)."""
    user = re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())
    return os.path.join(tempfile.gettempdir(), f"torchinductor_{user}")


def _pods_own(name: str, environ: Mapping[str, str]) -> str | None:
    value = environ.get(name) or None
    if name == "TORCHINDUCTOR_CACHE_DIR" and value == torch_default_inductor_dir():
        return None  # torch's own default, written by this process's imports
    return value


def compile_cache_env(
    cache_dir: str, environ: Mapping[str, str], version: Callable[[str], str] = importlib.metadata.version
) -> dict[str, str]:
    """The variables for main_ppo and every Ray worker; values the pod already has win."""
    root = f"{cache_dir}/{FOLDER}/{cache_key(version)}"
    env = {name: _pods_own(name, environ) or f"{root}/{sub}" for name, sub in CACHE_VARIABLES.items()}
    if _atomic(version):
        env["VLLM_DISABLE_COMPILE_CACHE"] = environ.get("VLLM_DISABLE_COMPILE_CACHE", "0")
    return env


def prune_stale(cache_dir: str, version: Callable[[str], str] = importlib.metadata.version) -> list[str]:
    """Remove the cache folders of other versions; returns their names."""
    folder = Path(cache_dir) / FOLDER
    keep = cache_key(version)
    removed = []
    for child in sorted(folder.iterdir()) if folder.is_dir() else []:
        if child.is_dir() and child.name != keep:
            shutil.rmtree(child, ignore_errors=True)
            removed.append(child.name)
    return removed
