"""`python -m benchmarks.verl_gpu jit-check` and the attempts' `jit_builds`: FlashInfer's kernel builds.

The CUDA image has FlashInfer without its prebuilt kernels, so a kernel module's first use builds
it with nvcc, and the engine keeps FlashInfer's workspace on the job's volume. `jit-check` times
the sampling module's build with the lent machine's nvcc, cold then warm; each attempt's summary
says which FlashInfer modules it built and which it found in the job's cache.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from grpo_trainer.engines.verl.compile_cache import compile_cache_env

from benchmarks.verl_gpu import cli, jit


def tool(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_flashinfers_builds_use_the_machines_nvcc_and_the_carried_ninja(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvcc = tool(tmp_path / "cuda-13.0" / "bin", "nvcc")
    ninja = tool(tmp_path / "extra" / "ninja" / "data" / "bin", "ninja")
    monkeypatch.setenv("PATH", str(nvcc.parent))  # no system ninja: the carried one is found
    monkeypatch.setattr(jit, "NINJA_DIRS", (ninja.parent,))
    env = jit.flashinfer_build_env({"PATH": "/usr/bin:/bin"})
    assert env["CUDA_HOME"] == str(tmp_path / "cuda-13.0")
    assert env["PATH"].split(os.pathsep) == [str(ninja.parent), str(nvcc.parent), "/usr/bin", "/bin"]


def test_without_nvcc_or_flashinfer_jit_check_never_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jit, "find_nvcc", lambda: None)
    monkeypatch.setattr(jit, "find_ninja", lambda: tmp_path / "ninja")
    monkeypatch.setattr(jit, "WHEELS", tmp_path / "nothing-carried")
    with pytest.raises(SystemExit, match="nvcc"):
        jit.flashinfer_build_env()
    monkeypatch.setattr(jit, "_importable", lambda name: name != "flashinfer")
    with pytest.raises(SystemExit, match="nvcc, ninja and flashinfer"):
        cli.main(["jit-check", "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out" / "jit-check.json").exists()


def test_a_cold_attempt_builds_the_kernels_and_its_retry_finds_them(tmp_path: Path) -> None:
    """Where the engine points FlashInfer (compile_cache.py) and FlashInfer's own layout below it
    (`.cache/flashinfer/<version>/<arch>/cached_ops/<module>`: flashinfer/jit/env.py, 0.6.12) are
    where the summary looks."""
    work = tmp_path / "shapes-4b"
    cache_dir = work / "grpo" / "checkpoints" / "verl-4b" / "cache"
    base = Path(compile_cache_env(str(cache_dir), {})["FLASHINFER_WORKSPACE_BASE"])
    module = base / ".cache" / "flashinfer" / "0.6.12" / "90a" / "cached_ops" / "sampling"
    module.mkdir(parents=True)
    (module / "build.ninja").write_text("rule cuda_compile\n")
    (module / "sampling.so").write_bytes(b"\x7fELF")
    os.utime(module / "build.ninja", (1010.0, 1010.0))
    os.utime(module / "sampling.so", (1095.0, 1095.0))

    cold = jit.jit_builds(work, started=1000.0)
    assert cold == [
        {"module": "sampling", "build_file_s": 10.0, "library_s": 95.0, "built_by_this_attempt": True}
    ]
    retry = jit.jit_builds(work, started=2000.0)
    assert retry == [
        {"module": "sampling", "build_file_s": -990.0, "library_s": -905.0, "built_by_this_attempt": False}
    ]
    assert jit.jit_builds(tmp_path / "tiny", started=1000.0) == []


FAKE_CALL = """
import json, os, pathlib, sys, time
module = pathlib.Path(os.environ["FLASHINFER_WORKSPACE_BASE"], ".cache/flashinfer/0.6.12/90a/cached_ops/sampling")
if not (module / "sampling.so").exists():  # a cold workspace: FlashInfer builds the module
    module.mkdir(parents=True)
    (module / "build.ninja").write_text("rule cuda_compile")
    time.sleep(1.2)
    (module / "sampling.so").write_bytes(b"ELF")
if os.environ.get("FAIL"):
    sys.exit("nvcc fatal: unsupported gpu architecture")
print(json.dumps({"import_s": 0.1, "calls_s": [1.0, 0.01], "flashinfer": "0.6.12"}))
"""


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A machine with nvcc, ninja and FlashInfer, whose first sampling call builds a module."""
    nvcc = tool(tmp_path / "cuda" / "bin", "nvcc")
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.48'\n")
    monkeypatch.setattr(jit, "find_nvcc", lambda: nvcc)
    monkeypatch.setattr(jit, "find_ninja", lambda: tool(tmp_path / "tools", "ninja"))
    monkeypatch.setattr(jit, "_importable", lambda name: True)
    monkeypatch.setattr(jit, "gpu_facts", lambda: {"gpus": ["H200"]})
    monkeypatch.setattr(jit, "JIT_CALL", FAKE_CALL)
    monkeypatch.setattr(jit.tempfile, "tempdir", str(tmp_path))
    return tmp_path / "out"


def test_jit_check_times_a_cold_build_and_a_warm_load(machine: Path) -> None:
    assert cli.main(["jit-check", "--out", str(machine), "--seconds", "60"]) == 0
    found = json.loads((machine / "jit-check.json").read_text())
    assert found["nvcc"]["version"] == "Cuda compilation tools, release 13.0, V13.0.48"
    cold, warm = found["cold"], found["warm"]
    assert cold["exit_code"] == warm["exit_code"] == 0
    assert cold["calls_s"] == [1.0, 0.01]
    (built,) = cold["jit_builds"]
    assert built["module"] == "sampling"
    assert built["built_by_this_attempt"]
    assert built["library_s"] - built["build_file_s"] >= 1.0  # the build, from the files' times
    (found_again,) = warm["jit_builds"]
    assert not found_again["built_by_this_attempt"]
    assert found_again["library_s"] <= 0


def test_a_failed_build_says_why_and_stops(machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIL", "1")
    assert cli.main(["jit-check", "--out", str(machine), "--seconds", "60"]) == 1
    found = json.loads((machine / "jit-check.json").read_text())
    assert found["cold"]["exit_code"] == 1
    assert "unsupported gpu architecture" in found["cold"]["stderr_tail"]
    assert "warm" not in found
