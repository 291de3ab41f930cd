"""Crash-and-resume check for the TRL engine, one process per attempt as in a real job.

Attempt 1 trains, saves a checkpoint, then fails with a simulated CUDA out-of-memory error, so the
engine must exit with the retryable code. Attempt 2 is a new process with the same settings: it
must pick the latest checkpoint itself, start at the saved step, and hold exactly the saved
adapter weights, optimiser moments and scheduler position before its first update.

    python -m grpo_trainer.testing.resume WORKDIR first   # exits 75 (retryable)
    python -m grpo_trainer.testing.resume WORKDIR second  # exits 0, writes resume-check.json
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from grpo_operator.api.contract import checkpoint_events_file

from grpo_trainer.engines.trl.checkpoints import latest_checkpoint
from grpo_trainer.engines.trl.metrics import read_records
from grpo_trainer.engines.trl.runner import RunRequest, run

from .colour_task import make_rows
from .learning import LearningPlan, build_model_dir, learning_settings

PLAN = LearningPlan(steps=6, prompts_per_step=2, num_generations=4, learning_rate=1e-3, rows=16)
SAVE_STEPS = 2
CRASH_AT_STEP = 4


def random_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
    """Distinct rewards in every group: the optimiser moments become non-zero from step 1, so
    comparing them after the resume is not comparing zeros."""
    import random

    return [random.random() for _ in completions]


def _callbacks(phase: str, report: dict[str, Any]) -> list[Any]:
    from transformers import TrainerCallback

    class CrashAfterSave(TrainerCallback):
        """Fails like a device running out of memory, right after checkpoint CRASH_AT_STEP."""

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step == CRASH_AT_STEP:
                import torch

                raise torch.OutOfMemoryError("CUDA out of memory (simulated by the resume check)")

    class ProbeResumedState(TrainerCallback):
        """Compares the live optimiser, scheduler and adapter with the checkpoint on disk."""

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            report.update(compare_with_checkpoint(args.output_dir, state, kwargs))

    return [CrashAfterSave()] if phase == "first" else [ProbeResumedState()]


def compare_with_checkpoint(output_dir: str, state: Any, live: dict[str, Any]) -> dict[str, Any]:
    import torch
    from safetensors.torch import load_file

    checkpoint = latest_checkpoint(output_dir)
    assert checkpoint is not None, "no checkpoint to compare with"
    saved_optimizer = torch.load(
        Path(checkpoint.path) / "optimizer.pt", map_location="cpu", weights_only=False
    )
    live_optimizer = live["optimizer"].state_dict()
    moments_equal = True
    moment_count = 0
    moment_abs_sum = 0.0
    for key, saved in saved_optimizer["state"].items():
        current = live_optimizer["state"][key]
        for name in ("exp_avg", "exp_avg_sq", "step"):
            moment_count += 1
            moments_equal &= torch.equal(saved[name].cpu(), current[name].cpu())
            if name != "step":
                moment_abs_sum += float(saved[name].abs().sum())
    saved_adapter = load_file(Path(checkpoint.path) / "adapter_model.safetensors")
    live_weights = {
        name.replace(".default", ""): p.detach().cpu()
        for name, p in live["model"].named_parameters()
        if p.requires_grad
    }
    adapter_equal = all(
        torch.equal(tensor, live_weights[_live_name(name, live_weights)])
        for name, tensor in saved_adapter.items()
    )
    return {
        "checkpoint": checkpoint.path,
        "checkpoint_step": checkpoint.step,
        "state_global_step_at_begin": state.global_step,
        "optimizer_moments_equal": bool(moments_equal),
        "optimizer_tensors_compared": moment_count,
        "optimizer_moments_abs_sum": moment_abs_sum,
        "adapter_tensors_compared": len(saved_adapter),
        "adapter_weights_equal": bool(adapter_equal),
        "scheduler_last_epoch": live["lr_scheduler"].last_epoch,
    }


def _live_name(saved_name: str, live: dict[str, Any]) -> str:
    """peft saves `base_model.model.X.lora_A.weight`; the live name may lack `base_model.model.`."""
    if saved_name in live:
        return saved_name
    for name in live:
        if name.endswith(saved_name.removeprefix("base_model.model.")):
            return name
    raise KeyError(saved_name)


def request(workdir: Path, phase: str, report: dict[str, Any], *, bf16: bool) -> RunRequest:
    plan = replace(PLAN, bf16=bf16)
    settings = replace(
        learning_settings(plan, workdir / "checkpoints", vision=True),
        save_steps=SAVE_STEPS,
        keep_checkpoints=2,
    )
    return RunRequest(
        settings=settings,
        model_path=str(workdir / "model"),
        rows=make_rows(plan.rows, seed=1),
        reward_funcs=[random_reward],
        metrics_path=str(workdir / "metrics.jsonl"),
        resume=latest_checkpoint(settings.output_dir),
        callbacks=_callbacks(phase, report),
    )


def main(argv: list[str]) -> int:
    workdir, phase = Path(argv[0]), argv[1]
    bf16 = len(argv) > 2 and argv[2] == "bf16"
    if phase == "first":
        build_model_dir(workdir, PLAN)
    report: dict[str, Any] = {}
    failure = run(request(workdir, phase, report, bf16=bf16))
    code = failure.code if failure else 0
    if phase == "second":
        steps = [r["step"] for r in read_records(workdir / "metrics.jsonl") if "data" in r]
        events = [r for r in read_records(workdir / "metrics.jsonl") if "event" in r]
        events += read_records(checkpoint_events_file(str(workdir / "metrics.jsonl")))
        report["exit_code"] = int(code)
        report["logged_steps"] = steps
        report["events"] = events
        report["checkpoints_left"] = sorted(p.name for p in (workdir / "checkpoints").glob("checkpoint-*"))
        (workdir / "resume-check.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    return int(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
