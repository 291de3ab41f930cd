"""The learning test: GRPO through the TRL engine on the colour task, with and without vision.

Both runs start from the same blind tiny model (see `tiny_vlm.blind_projector`) and differ in one
thing: the full run has LoRA on the vision encoder and projector, the control has the vision
layers frozen and their output detached. The full run must climb from chance to near the maximum
reward; the control can learn to name *a* colour but, seeing nothing, stays near 1/4. Passing needs
gradients to reach the vision tower, which is the single-GPU LoRA recipe's "visual feature detachment" failure.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from grpo_trainer import metric_keys as keys
from grpo_trainer.engines.trl.metrics import read_records
from grpo_trainer.engines.trl.runner import RunRequest, RunResult, train
from grpo_trainer.engines.trl.settings import TrlSettings

from .colour_task import WORDS, colour_reward, make_rows
from .tiny_vlm import TINY, VlmShape, build_tiny_vlm


@dataclass(frozen=True)
class LearningPlan:
    """Sizes of one learning run; the CPU test and the GPU benchmark differ only here."""

    steps: int = 150
    prompts_per_step: int = 16
    num_generations: int = 8
    learning_rate: float = 3e-3
    rows: int = 256
    lora_rank: int = 16
    shape: VlmShape = TINY
    bf16: bool = False
    seed: int = 0
    overrides: tuple[str, ...] = ()
    # The rollout path (engines/trl/generation.py): the GPU benchmark re-runs the test on the fast
    # ones; vLLM then gets this much of the device (a tiny model needs little).
    generation: str = "eager"
    vllm_memory_gib: float = 4.0
    # vLLM only: the policy's weights wait in host memory while vLLM generates (engines/trl/parking.py),
    # as a 4B model's do within the single-GPU LoRA recipe's 16 GB.
    park_policy: bool = False


# CI on CPU: 150 steps (the curve it reaches: docs/benchmarks/trl-engine.md).
CI_PLAN = LearningPlan()
# The GPU run: longer, in bf16 as the single-GPU LoRA recipe trains.
GPU_PLAN = LearningPlan(steps=200, bf16=True)


def build_model_dir(workdir: str | os.PathLike[str], plan: LearningPlan) -> Path:
    return build_tiny_vlm(Path(workdir) / "model", words=WORDS, shape=plan.shape, seed=plan.seed, blind=True)


def learning_settings(plan: LearningPlan, output_dir: str | os.PathLike[str], *, vision: bool) -> TrlSettings:
    """The single-GPU LoRA recipe's settings, changed only where the tiny task needs it.

    One answer token (so a completion is one word), a larger group and batch (16 prompts x 8:
    every step sees every colour, so blind guesses cancel out and what the image says adds up),
    a larger constant learning rate (a random tiny model has far to go), and no gradient
    checkpointing (nothing to save on a tiny model).
    """
    return replace(
        TrlSettings(),
        output_dir=str(output_dir),
        learning_rate=plan.learning_rate,
        lr_scheduler_type="constant",
        max_grad_norm=1.0,
        num_generations=plan.num_generations,
        per_device_train_batch_size=plan.prompts_per_step * plan.num_generations,
        max_completion_length=1,
        max_prompt_length=64,
        max_steps=plan.steps,
        save_steps=plan.steps,
        keep_checkpoints=1,
        lora_rank=plan.lora_rank,
        lora_alpha=plan.lora_rank,
        lora_vision_layers=vision,
        bf16=plan.bf16,
        gradient_checkpointing=False,
        seed=plan.seed,
        overrides=plan.overrides,
        generation=plan.generation,
        vllm_memory_gib=plan.vllm_memory_gib if plan.generation == "vllm" else None,
        vllm_park_policy=plan.park_policy and plan.generation == "vllm",
    )


def detach_vision(model: Any) -> None:
    """Cut the autograd graph at the vision tower's output (the control run's 'detached')."""

    def hook(module: Any, args: Any, output: Any) -> Any:
        return _detached(output)

    model.model.visual.register_forward_hook(hook)


def _detached(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, list | tuple):
        return type(value)(_detached(v) for v in value)
    if isinstance(value, dict):
        # ModelOutput is a dict subclass that also keeps its fields as attributes.
        for key in list(value.keys()):
            value[key] = _detached(value[key])
        return value
    return value


def run_colour_grpo(
    workdir: str | os.PathLike[str], model_dir: str | os.PathLike[str], plan: LearningPlan, *, vision: bool
) -> tuple[list[float], RunResult]:
    """Train once; return the mean reward of every step and the run's result."""
    name = "vision" if vision else "frozen-vision"
    out = Path(workdir) / name
    request = RunRequest(
        settings=learning_settings(plan, out / "checkpoints", vision=vision),
        model_path=str(model_dir),
        rows=make_rows(plan.rows, seed=plan.seed + 1),
        reward_funcs=[colour_reward],
        metrics_path=str(out / "metrics.jsonl"),
        prepare_model=None if vision else detach_vision,
    )
    result = train(request)
    return reward_curve(out / "metrics.jsonl"), result


def reward_curve(metrics_path: str | os.PathLike[str]) -> list[float]:
    return [r["data"][keys.REWARD] for r in read_records(metrics_path) if "data" in r]


def window_mean(values: list[float], size: int) -> float:
    tail = values[-size:]
    return sum(tail) / len(tail)
