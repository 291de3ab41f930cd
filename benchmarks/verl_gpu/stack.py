"""What `grpo-train run` needs beyond the carried GPU stack: fetched here, installed there if missing."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks import paths

from .machine import log, write_json

WHEELS = paths.CACHE / "verl-gpu" / "wheels"
EXTRA_SITE = Path("/tmp/verl-gpu-extra")
# What `grpo-train run` imports beyond the carried GPU stack (benchmarks/gpu_stack_requirements.txt),
# pure Python or small: fetched here by `prepare`, installed there only if missing.
EXTRA_WHEELS = (
    "lightkube==1.0.1",
    "lightkube-models==1.37.0.8",
    "PyYAML==6.0.4",
    # lightkube's HTTP client, in case the machine has none (appended after the stack: theirs win).
    "httpx==0.28.1",
    "httpcore==1.0.9",
    "h11==0.16.0",
    "anyio==4.16.0",
    "idna==3.20",
    "certifi==2026.10.19.post1",
    # `--sample-stacks`: the stacks of every Python process through start-up (a static binary).
    "py-spy==0.4.3",
    # `jit-check`: FlashInfer builds its sampling kernels with ninja (a static binary), and
    # imports pynvml, which the carried stack leaves out.
    "ninja==1.13.0",
    "nvidia-ml-py==13.615.71",
    # `jit-check` without the stack: FlashInfer itself, and the FFI its kernels build against (the
    # stack's own versions, which win where the stack is installed).
    "flashinfer-python==0.6.12",
    "apache-tvm-ffi==0.1.9",
)
NEEDED = (
    "yaml",
    "lightkube",
    "pydantic",
    "pyarrow",
    "PIL",
    "tqdm",
    "huggingface_hub",
    "hydra",
    "torch",
    "transformers",
    "peft",
    "ray",
    "vllm",
    "verl",
    "tensordict",
    "transfer_queue",
    "torchdata",
    "qwen_vl_utils",
    "mathruler",
    "codetiming",
)


def prepare() -> int:
    """Here: download the extra wheels (CPython 3.12 manylinux, as benchmarks/gpu_stack.sh does)."""
    WHEELS.mkdir(parents=True, exist_ok=True)
    platforms = ["manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux1_x86_64", "any"]
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        "--abi",
        "cp312",
        "--abi",
        "abi3",
        "--abi",
        "none",
        *[arg for platform in platforms for arg in ("--platform", platform)],
        "-d",
        str(WHEELS),
        *EXTRA_WHEELS,
    ]
    subprocess.run(command, check=True)
    files = sorted(p.name for p in WHEELS.glob("*.whl"))
    log(f"{len(files)} wheels in {paths.shown(WHEELS)}: {', '.join(files)}")
    print(json.dumps({"carry": [paths.shown(WHEELS)]}))
    return 0


def preflight(out: Path, *, sampler: bool = False) -> list[str]:
    """Import what `grpo-train run` needs; install the carried extra wheels for what is missing
    (py-spy too, when the stacks are to be sampled)."""
    if EXTRA_SITE.is_dir():  # an earlier start on this machine installed them
        use_extra_site()
    missing = _missing()
    extra = {"yaml", "lightkube"} & set(missing)
    if sampler and py_spy() is None:
        extra.add("py-spy")
    if extra and WHEELS.is_dir():
        install_carried(extra)
        missing = _missing()
    if sampler and py_spy() is None:
        missing.append("py-spy")
    if missing:
        log(
            f"cannot run: missing {', '.join(missing)} (carry the GPU stack first: docs/benchmarks/verl-gpu.md)"
        )
        write_json(out / "summary.json", {"ok": False, "missing": missing})
    return missing


def install_carried(wanted: set[str]) -> None:
    """The carried extra wheels into EXTRA_SITE, which goes after the stack on every path: the
    stack's packages win where both have one."""
    log(f"installing the carried wheels for {', '.join(sorted(wanted))} into {EXTRA_SITE}")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target",
         str(EXTRA_SITE), *map(str, WHEELS.glob("*.whl"))],
        check=True,
    )  # fmt: skip
    use_extra_site()


def use_extra_site() -> None:
    """EXTRA_SITE on this process's path and its children's, once (a later `start` on the same
    machine finds the wheels installed and skips pip)."""
    if str(EXTRA_SITE) not in sys.path:
        sys.path.append(str(EXTRA_SITE))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(EXTRA_SITE) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([*paths, str(EXTRA_SITE)])
    importlib.invalidate_caches()


def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
    except Exception:  # ImportError, or a broken install
        return False
    return True


def _missing() -> list[str]:
    return [name for name in NEEDED if not _importable(name)]


def py_spy() -> str | None:
    """The py-spy binary: on the PATH, beside this Python (a virtualenv's), or where `preflight`
    installs the carried wheel."""
    for found in (
        shutil.which("py-spy"),
        Path(sys.executable).with_name("py-spy"),
        EXTRA_SITE / "bin" / "py-spy",
    ):
        if found and Path(found).is_file():
            return str(found)
    return None
