"""`grpo-train run` end to end with a stand-in verl: data, launch, status reports, export, failures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from grpo_operator.api.contract import COMPLETE_FILE, CONFIG_ERROR, OK, RETRYABLE
from grpo_operator.api.v1alpha1.status import history_points
from grpo_trainer.attempt import Options, run
from grpo_trainer.engines.base import EngineOptions
from grpo_trainer.engines.verl.compile_cache import CACHE_VARIABLES, compile_cache_env
from grpo_trainer.engines.verl.launch import engine_env
from grpo_trainer.engines.verl.overrides import _worker_env
from grpo_trainer.engines.verl.trl_shadow import SHADOWS, trl_needs_shadow
from grpo_trainer.spec import Attempt
from support.trainer_inputs import FakeAPI, example_job, hf_cached_dataset

SMALL = {"trainBatchSize": 8, "miniBatchSize": 8, "microBatchSizePerDevice": 1}
VERL_091 = Options(engine=EngineOptions(verl_version="0.9.1", progress=False))


def geo3k_job(tmp_path, **changes):
    model = tmp_path / "models" / "qwen3-vl"
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3_vl"}))
    job = example_job("geo3k-ascend-910b", tmp_path, model={"source": str(model)}, algorithm=SMALL, **changes)
    hf_cached_dataset(Path(job.paths.cache_dir), rows={"train": 16, "validation": 2, "test": 4})
    return job


def attempt(job, number=1):
    return Attempt.from_env(job, {"GRPO_ATTEMPT": str(number)})


def test_a_successful_attempt(tmp_path, fake_verl, capsys):
    job = geo3k_job(tmp_path)
    api = FakeAPI()
    assert run(job, attempt(job), VERL_091, writer=api) == OK

    out = capsys.readouterr().out
    assert "training done" in out  # the engine's output is streamed through
    log, *progress, outputs = api.patches
    # First of all, where this attempt's log is kept (as the pods mount the volume).
    assert log == {"status": {"log": {"attempt": 1, "path": f"{job.paths.metrics_dir}/attempt-1.log"}}}
    status = progress[-1]["status"]
    assert status["progress"]["steps"] == "3/30"  # 16 rows // 8 per step x 15 epochs
    assert status["metrics"]["reward"] == pytest.approx(0.6)
    assert status["metrics"]["valScore"] == 0.5
    assert [p["step"] for p in history_points(status)] == [1, 2, 3]
    assert status["checkpoint"]["latestStep"] == 3
    assert status["checkpoint"]["path"].endswith("global_step_3")

    paths = job.paths
    command = Path(paths.metrics_dir, "attempt-1.command.txt").read_text()
    assert "reward.custom_reward_function.path=" in command
    assert (Path(paths.job_dir) / COMPLETE_FILE).is_file()
    record = json.loads(Path(paths.export_dir, "export.json").read_text())
    assert record["step"] == 3
    assert record["model"] == f"{paths.export_dir}/model"
    # The export's location goes into status last, once it is on the volume.
    assert outputs == {"status": {"outputs": {"step": 3, "model": record["model"]}}}
    assert json.loads(Path(record["model"], "config.json").read_text())["from"].endswith(
        "global_step_3/actor"
    )


def test_after_training_finished_a_new_attempt_only_exports(tmp_path, fake_verl):
    job = geo3k_job(tmp_path)
    assert run(job, attempt(job), VERL_091, writer=FakeAPI()) == OK
    shutil.rmtree(job.paths.export_dir)
    api = FakeAPI()
    assert run(job, attempt(job, 2), VERL_091, writer=api) == OK
    # No engine, so no progress reports: only where its log and the export are.
    assert [set(p["status"]) for p in api.patches] == [{"log"}, {"outputs"}]
    assert json.loads(Path(job.paths.export_dir, "export.json").read_text())["step"] == 3


def test_an_engine_oom_is_retryable_and_says_why(tmp_path, fake_verl, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_VERL_MODE", "oom")
    job = geo3k_job(tmp_path)
    assert run(job, attempt(job), VERL_091, writer=FakeAPI()) == RETRYABLE
    marker = capsys.readouterr().err.strip().splitlines()[-1]
    assert marker.startswith("GRPO_FAILURE ")
    assert json.loads(marker.removeprefix("GRPO_FAILURE "))["reason"] == "OutOfMemory"
    assert not (Path(job.paths.job_dir) / COMPLETE_FILE).exists()


def test_a_config_error_fails_before_the_engine_starts(tmp_path, fake_verl, capsys):
    job = geo3k_job(tmp_path, rollout={"tensorParallelSize": 3})
    assert run(job, attempt(job), VERL_091, writer=FakeAPI()) == CONFIG_ERROR
    err = capsys.readouterr().err
    assert "tensorParallelSize=3 must divide resources.devicesPerNode=8" in err
    assert not Path(job.paths.metrics_dir, "attempt-1.jsonl").exists()


def test_resume_with_another_world_size_fails_fast(tmp_path, fake_verl, capsys):
    job = geo3k_job(tmp_path)
    actor = Path(job.paths.checkpoint_dir, "global_step_20", "actor")
    actor.mkdir(parents=True)
    (actor / "fsdp_config.json").write_text(json.dumps({"world_size": 16}))
    Path(job.paths.checkpoint_dir, "latest_checkpointed_iteration.txt").write_text("20")
    assert run(job, attempt(job, 2), VERL_091, writer=FakeAPI()) == CONFIG_ERROR
    assert "written by 16 devices" in capsys.readouterr().err


def test_ascend_environment(tmp_path):
    job = example_job("geo3k-ascend-910b", tmp_path)
    arm = engine_env(
        job,
        attempt(job),
        machine="aarch64",
        exists=lambda p: p == "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
        environ={},
    )
    assert arm["VERL_PLATFORM"] == "huawei"
    assert arm["USE_OPTIMIZED_MODEL"] == "0"
    assert arm["VLLM_ASCEND_ENABLE_NZ"] == "0"
    assert arm["HCCL_CONNECT_TIMEOUT"] == "1800"
    assert arm["LD_PRELOAD"] == "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2"
    assert arm["VERL_FILE_LOGGER_PATH"] == f"{job.paths.metrics_dir}/attempt-1.jsonl"
    # The operator's profile (tuned by the cluster admin) wins; an existing preload is kept.
    tuned = engine_env(
        job,
        attempt(job),
        machine="x86_64",
        exists=lambda p: True,
        environ={"HCCL_EXEC_TIMEOUT": "7200", "LD_PRELOAD": "/x.so"},
    )
    assert tuned["HCCL_EXEC_TIMEOUT"] == "7200"
    assert tuned["LD_PRELOAD"] == "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2:/x.so"
    without = engine_env(job, attempt(job), machine="aarch64", exists=lambda p: False, environ={})
    assert "LD_PRELOAD" not in without


def test_nvidia_environment_has_no_ascend_settings(tmp_path):
    job = example_job("safegrpo-nvidia", tmp_path)
    env = engine_env(job, attempt(job), environ={})
    # The NVIDIA profile's own variables (which the pod already has), and nothing of Ascend's.
    profile = set(job.accelerator.env)
    assert profile == {"NCCL_DEBUG", "NCCL_TIMEOUT", "TORCH_NCCL_ASYNC_ERROR_HANDLING"}
    shadow = {"PYTHONPATH"} if trl_needs_shadow() else set()  # CI has the TRL engine's trl
    caches = set(compile_cache_env(job.paths.cache_dir, {}))  # test_compile_cache.py: what they are
    assert caches >= {"VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"}
    assert all(env[name].startswith(f"{job.paths.cache_dir}/compile/") for name in CACHE_VARIABLES)
    assert (
        set(env)
        == {"VERL_FILE_LOGGER_PATH", "GRPO_METRICS_FILE", "GRPO_ATTEMPT", "OMP_NUM_THREADS"}
        | profile
        | shadow
        | caches
    )


def test_every_ray_worker_gets_the_pods_threads_or_its_devices_share_of_this_machine(tmp_path):
    """Ray gives a worker that asks for no CPUs (verl's) one math-library thread, and the actor's
    FSDP set-up at 4B shapes is a CPU copy of the weights: the pod's value (the operator's) goes to
    every worker through the runtime_env; outside a pod, each device's share of the CPUs here."""
    job = example_job("safegrpo-nvidia", tmp_path)  # 4 devices per node
    devices = job.spec.resources.devices_per_node
    assert devices == 4
    assert engine_env(job, attempt(job), environ={}, cpus=16)["OMP_NUM_THREADS"] == "4"
    assert engine_env(job, attempt(job), environ={}, cpus=18)["OMP_NUM_THREADS"] == "4"  # whole threads
    assert engine_env(job, attempt(job), environ={}, cpus=2)["OMP_NUM_THREADS"] == "1"  # at least one
    pods = engine_env(job, attempt(job), environ={"OMP_NUM_THREADS": "13"}, cpus=16)
    assert pods["OMP_NUM_THREADS"] == "13"
    workers = [o.render() for o in _worker_env(pods)]
    assert "+ray_kwargs.ray_init.runtime_env.env_vars.OMP_NUM_THREADS='13'" in workers
    # Without `cpus`, the CPUs this process may run on.
    import os

    here = len(os.sched_getaffinity(0))
    assert engine_env(job, attempt(job), environ={})["OMP_NUM_THREADS"] == str(max(1, here // devices))


def test_a_trl_that_breaks_verl_is_shadowed_for_main_ppo_and_every_ray_worker(tmp_path, monkeypatch):
    """The stand-in trl goes first on PYTHONPATH (kept behind it: the pod's own), for main_ppo and,
    through ray_init's runtime_env, for each Ray worker (tests/unit/verl_engine/test_trl_shadow.py
    runs verl's actor start-up with it)."""
    from grpo_trainer.engines.verl import launch

    job = example_job("safegrpo-nvidia", tmp_path)
    monkeypatch.setattr(launch, "trl_needs_shadow", lambda: True)
    env = engine_env(job, attempt(job), environ={"PYTHONPATH": "/site"})
    assert env["PYTHONPATH"] == f"{SHADOWS}:/site"
    workers = [o.render() for o in _worker_env(env)]
    assert f"+ray_kwargs.ray_init.runtime_env.env_vars.PYTHONPATH='{SHADOWS}:/site'" in workers
    monkeypatch.setattr(launch, "trl_needs_shadow", lambda: False)
    assert "PYTHONPATH" not in engine_env(job, attempt(job), environ={"PYTHONPATH": "/site"})


def test_a_custom_reward_that_cannot_import_fails_as_a_config_error_naming_the_file(
    tmp_path, fake_verl, capsys
):
    """Before data preparation and before verl starts Ray: not a retried crash in a reward worker."""
    job = geo3k_job(
        tmp_path, reward={"builtin": None, "custom": {"configMap": "my-reward", "key": "score.py"}}
    )
    reward = Path(job.paths.reward_file)
    reward.parent.mkdir(parents=True, exist_ok=True)
    reward.write_text(
        "import math\nimport reward_helpers_not_in_the_image\n\ndef compute_score(*a):\n    return 1.0\n"
    )
    assert run(job, attempt(job), VERL_091, writer=FakeAPI()) == CONFIG_ERROR
    err = capsys.readouterr().err
    assert (
        "reward.custom: score.py cannot be imported (line 2): "
        "ModuleNotFoundError: No module named 'reward_helpers_not_in_the_image'"
    ) in err
    assert '"reason": "ConfigError"' in err
    assert '"retryable": false' in err
    assert not Path(job.paths.metrics_dir, "attempt-1.jsonl").exists(), "verl never started"
    reward.write_text("import math\n\ndef compute_score(*a):\n    return 1.0\n")
    assert run(job, attempt(job), VERL_091, writer=FakeAPI()) == OK
