"""The verl engine: plan one attempt's `python -m verl.trainer.main_ppo` and run it.

`plan_launch` is pure given its inputs (the job, the verl profile, resolved model and data paths,
the resume decision) and is what `grpo-train plan` prints. `run_engine` starts main_ppo attached to
the Ray cluster the Ray job runs in (main_ppo calls `ray.init()` without `num_cpus`, which joins the
existing cluster), streams its output, and classifies a failure for the operator.
"""

from __future__ import annotations

import collections
import contextlib
import os
import platform
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from grpo_operator.api.contract import Env, threads_per_device
from grpo_operator.api.v1alpha1 import ResolvedJob

from ...failures import ConfigError, Failure, classify_engine_exit
from ...host_memory import killed_since, oom_kills
from ...rewards import get_reward
from ...spec import Attempt
from .compile_cache import compile_cache_env
from .overrides import LaunchInputs, OverridePlan, Resume, RewardFunction, build_overrides
from .trl_shadow import shadowed_pythonpath, trl_needs_shadow
from .versions import VerlProfile

ENGINE_MODULE = "verl.trainer.main_ppo"
LOG_TAIL_LINES = 1000
"""Lines of the engine's output kept for classifying a crash: a Ray worker's traceback with
main_ppo's around it fits."""


@dataclass(frozen=True)
class VerlLaunch:
    """Everything needed to start main_ppo for one attempt."""

    command: list[str]
    env: dict[str, str]
    """Added to the driver's environment (the same values reach Ray workers via runtime_env)."""
    plan: OverridePlan
    profile: VerlProfile
    resume: Resume
    warnings: list[str] = field(default_factory=list)


def reward_function(job: ResolvedJob) -> RewardFunction:
    """The function verl calls, by absolute file path (loadable on every node).

    Batch rewards (the safety builtin, a custom `batch: true` or `*_batch` function) are called
    a GRPO group at a time through the grouped reward manager; the rest once per response by
    verl's naive manager.
    """
    spec = job.spec.reward
    kwargs = dict(spec.kwargs)
    if spec.builtin:
        reward = get_reward(spec.builtin)
        if reward.batched and reward.batch_function:
            why = f"builtin {reward.name}: a batch reward, as the SafeGRPO recipe calls it (compute_score_batch)"
            return RewardFunction(reward.path, reward.batch_function, kwargs, batched=True, why=why)
        return RewardFunction(
            reward.path, reward.function, kwargs, why=f"builtin {reward.name}, per response"
        )
    custom = spec.custom
    if custom is None or not job.paths.reward_file:
        raise ConfigError("reward.custom needs the reward file the operator mounts (paths.rewardFile)")
    # The user's file is loaded by our adapter, in worker processes of its own; their kwargs pass through.
    reward = get_reward("custom")
    batched = custom.batch or custom.function.endswith("_batch")
    kwargs.update(
        custom_path=job.paths.reward_file,
        custom_name=custom.function,
        custom_kind="batch" if custom.batch else "auto",
    )
    if batched:
        why = f"reward.custom {custom.function}: a batch function, called once per GRPO group"
        return RewardFunction(reward.path, "compute_score_batch", kwargs, batched=True, why=why)
    why = f"reward.custom {custom.function}, once per response, in worker processes of its own"
    return RewardFunction(reward.path, reward.function, kwargs, why=why)


def engine_env(
    job: ResolvedJob,
    attempt: Attempt,
    machine: str | None = None,
    exists: Callable[[str], bool] = os.path.exists,
    environ: Mapping[str, str] | None = None,
    cpus: int | None = None,
) -> dict[str, str]:
    """Environment main_ppo and every Ray worker need for this attempt.

    The metrics file goes to verl's file logger (which truncates on open: one file per attempt).
    The accelerator's platform variables (on Ascend, VERL_PLATFORM=huawei, without which verl's
    device detection overwrites trainer.device=npu) come from the job's resolved accelerator,
    unless the pod already has a value (the operator's profile, which cluster admins tune, wins);
    the profile's preload libraries go in front of LD_PRELOAD when the image has them for this CPU;
    a stand-in trl goes first on PYTHONPATH when the installed one would break verl (trl_shadow.py);
    the compile caches go on the job's volume, so a retried attempt reuses them (compile_cache.py);
    every worker gets the pod's math-library threads (the operator sets them from the worker pods'
    CPUs), or, outside a pod, each device's share of this machine's `cpus`: Ray would give verl's
    workers one thread each.
    """
    environ = os.environ if environ is None else environ
    env = {
        "VERL_FILE_LOGGER_PATH": str(attempt.metrics_file),
        Env.METRICS_FILE: str(attempt.metrics_file),
        Env.ATTEMPT: str(attempt.number),
    }
    if trl_needs_shadow():
        env["PYTHONPATH"] = shadowed_pythonpath(environ)
    env.update(compile_cache_env(job.paths.cache_dir, environ))
    threads = environ.get(Env.THREADS)
    if not threads:
        here = len(os.sched_getaffinity(0)) if cpus is None else cpus
        threads = str(threads_per_device(here, job.spec.resources.devices_per_node))
    env[Env.THREADS] = threads
    if job.spec.logging.tensorboard:
        env["TENSORBOARD_DIR"] = f"{job.paths.job_dir}/tensorboard"
    accelerator = job.accelerator
    env.update({key: environ.get(key, default) for key, default in accelerator.env.items()})
    preload = environ.get("LD_PRELOAD", "")
    for pattern in accelerator.preload_libraries:
        library = pattern.format(arch=machine or platform.machine())
        if exists(library) and library not in preload.split(":"):
            preload = f"{library}:{preload}" if preload else library
            env["LD_PRELOAD"] = preload
    return env


def plan_launch(
    job: ResolvedJob,
    profile: VerlProfile,
    attempt: Attempt,
    *,
    model_path: str,
    train_files: list[str],
    val_files: list[str],
    resume: Resume,
    env: dict[str, str] | None = None,
) -> VerlLaunch:
    env = engine_env(job, attempt) if env is None else env
    inputs = LaunchInputs(
        model_path=model_path,
        train_files=train_files,
        val_files=val_files,
        reward=reward_function(job),
        resume=resume,
        worker_env=env,
    )
    plan = build_overrides(job, profile, inputs)
    command = [sys.executable, "-m", ENGINE_MODULE, *plan.rendered()]
    return VerlLaunch(command, env, plan, profile, resume, list(plan.warnings))


def run_engine(
    launch: VerlLaunch, out: TextIO | None = None, base_env: Mapping[str, str] | None = None
) -> Failure | None:
    """Run main_ppo to the end, echoing its output; None on success, else the classified failure.

    A SIGTERM to the trainer (the Ray job being stopped, the pod deleted) is passed on to the
    engine's whole process group, so no orphaned workers keep the devices.
    """
    out = out or sys.stdout
    env = {**(os.environ if base_env is None else base_env), **launch.env}
    tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
    before = oom_kills()  # a kill for host memory during the attempt is its cause (host_memory.py)
    process = subprocess.Popen(
        launch.command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        text=True,
        errors="replace",
        bufsize=1,
    )
    restore = _forward_signals(process)
    try:
        assert process.stdout is not None
        for line in process.stdout:
            out.write(line)
            tail.append(line)
        returncode = process.wait()
    finally:
        restore()
    if returncode == 0:
        return None
    after = oom_kills()
    killed = killed_since(before, after)
    host_oom = after.describe(killed) if after is not None and killed else ""
    return classify_engine_exit(returncode, "".join(tail), host_oom)


def _forward_signals(process: subprocess.Popen[str]) -> Callable[[], None]:
    """Install SIGTERM/SIGINT handlers that signal the engine's process group; returns an undo."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore


def write_overrides(launch: VerlLaunch, path: Path) -> None:
    """Keep the attempt's exact command next to its metrics, for whoever debugs it later."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(launch.command) + "\n", encoding="utf-8")
