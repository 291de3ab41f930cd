"""A retried verl attempt finds the compile caches of the attempt before it on the job's volume."""

from __future__ import annotations

import getpass
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

from grpo_trainer.engines.verl.compile_cache import (
    cache_key,
    compile_cache_env,
    prune_stale,
    torch_default_inductor_dir,
)


def versions(**found: str):
    def version(package: str) -> str:
        if package not in found:
            raise importlib.metadata.PackageNotFoundError(package)
        return found[package]

    return version


CUDA_IMAGE = versions(torch="2.11.0+cu130", vllm="0.24.0", triton="3.6.0")
SEED_ASCEND = versions(torch="2.7.1", vllm="0.11.0")


def test_the_caches_live_on_the_volume_under_the_versions_that_invalidate_them() -> None:
    env = compile_cache_env("/grpo/checkpoints/job-1a2b3c4d/cache", {}, CUDA_IMAGE)
    root = "/grpo/checkpoints/job-1a2b3c4d/cache/compile/torch-2.11.0.cu130_vllm-0.24.0_triton-3.6.0"
    assert env == {
        "VLLM_CACHE_ROOT": f"{root}/vllm",
        "TORCHINDUCTOR_CACHE_DIR": f"{root}/inductor",
        "TRITON_CACHE_DIR": f"{root}/triton",
        # FlashInfer builds its kernels with nvcc under this base (the image has none prebuilt).
        "FLASHINFER_WORKSPACE_BASE": f"{root}/flashinfer",
        # verl turns vLLM's cache off; torch 2.11 writes Inductor's artifacts atomically.
        "VLLM_DISABLE_COMPILE_CACHE": "0",
    }


def test_an_older_torch_keeps_vllms_cache_off_and_a_pods_own_values_win() -> None:
    env = compile_cache_env("/c", {"TRITON_CACHE_DIR": "/fast/triton"}, SEED_ASCEND)
    assert "VLLM_DISABLE_COMPILE_CACHE" not in env
    assert env["TRITON_CACHE_DIR"] == "/fast/triton"
    assert env["VLLM_CACHE_ROOT"] == "/c/compile/torch-2.7.1_vllm-0.11.0_triton-none/vllm"
    assert (
        compile_cache_env("/c", {"VLLM_DISABLE_COMPILE_CACHE": "1"}, CUDA_IMAGE)["VLLM_DISABLE_COMPILE_CACHE"]
        == "1"
    )


def test_a_new_image_removes_the_old_images_caches(tmp_path: Path) -> None:
    old = tmp_path / "compile" / cache_key(SEED_ASCEND)
    current = tmp_path / "compile" / cache_key(CUDA_IMAGE)
    for folder in (old / "vllm", current / "triton"):
        folder.mkdir(parents=True)
    assert prune_stale(str(tmp_path), CUDA_IMAGE) == [old.name]
    assert not old.exists()
    assert current.is_dir()
    assert prune_stale(str(tmp_path), CUDA_IMAGE) == []
    assert prune_stale(str(tmp_path / "nothing-yet"), CUDA_IMAGE) == []


def test_torchs_own_default_does_not_count_as_the_pods_value() -> None:
    """torch writes its default Inductor folder into the environment of the process that asked
    for it; the trainer's imports do, so that value must not keep the cache off the volume."""
    torch_set = {"TORCHINDUCTOR_CACHE_DIR": torch_default_inductor_dir()}
    env = compile_cache_env("/c", torch_set, CUDA_IMAGE)
    assert env["TORCHINDUCTOR_CACHE_DIR"] == "/c/compile/torch-2.11.0.cu130_vllm-0.24.0_triton-3.6.0/inductor"
    pods = {"TORCHINDUCTOR_CACHE_DIR": "/fast/inductor"}
    assert compile_cache_env("/c", pods, CUDA_IMAGE)["TORCHINDUCTOR_CACHE_DIR"] == "/fast/inductor"


def test_the_default_is_the_one_torch_writes(tmp_path: Path) -> None:
    """torch's own code, in a process of its own: what it writes is what we recognise."""
    script = (
        "import os, json\n"
        "from torch._inductor.runtime.cache_dir_utils import cache_dir\n"
        "cache_dir()\n"
        "from grpo_trainer.engines.verl.compile_cache import compile_cache_env, torch_default_inductor_dir\n"
        "print(json.dumps([os.environ['TORCHINDUCTOR_CACHE_DIR'], torch_default_inductor_dir(),\n"
        "    compile_cache_env('/c', os.environ)['TORCHINDUCTOR_CACHE_DIR']]))\n"
    )
    environ = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    environ["TMPDIR"] = str(tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", script], env=environ, capture_output=True, text=True, check=True
    )
    written, ours, chosen = json.loads(out.stdout.strip().splitlines()[-1])
    assert written == ours == str(tmp_path / f"torchinductor_{getpass.getuser()}")
    assert chosen.startswith("/c/compile/")
