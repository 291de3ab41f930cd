"""Reward functions for TRL's GRPOTrainer, from `grpo_trainer.rewards`.

TRL calls each reward function with the batch's prompts and completions and every extra dataset
column as a keyword list. A builtin that has TRL-style functions (`reasoning-format`: the single-GPU LoRA recipe's
formatting and correctness pair) is used as is; other builtins have verl's per-sample
`compute_score`, which `per_sample_reward` adapts to the batch call.

A user's file never runs in the trainer's process: `sandboxed_reward` sends each batch to the
workers of `grpo_trainer.rewards.sandbox` (through `rewards.custom`, as the verl engine does), so
`sys.exit`, `os._exit`, a hang, a runaway allocation or a forked helper cannot end, stall or
outlive the run. What the function does wrong stops the run with a configuration error naming the
file (`custom_on_error=raise`, this engine's default: one device's run is short and a silently
zero reward trains nothing); `custom_on_error: zero` in reward.kwargs scores 0 instead, as verl does.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

RewardFunc = Callable[..., list[float]]


def completion_text(completion: Any) -> str:
    """The text of one completion, conversational (`[{"role", "content"}]`) or plain."""
    if isinstance(completion, list):
        if not completion:
            return ""
        content = completion[-1].get("content", "")
        if isinstance(content, list):
            return "".join(part.get("text", "") for part in content if isinstance(part, dict))
        return str(content or "")
    return str(completion or "")


def per_sample_reward(
    compute_score: Callable[..., Any], name: str, options: Mapping[str, Any] | None = None
) -> RewardFunc:
    """Wrap `compute_score(data_source, solution_str, ground_truth, extra_info, **options)` for TRL."""
    extra = dict(options or {})

    def reward(
        prompts: Sequence[Any],
        completions: Sequence[Any],
        answer: Sequence[str],
        data_source: Sequence[str] | None = None,
        extra_info: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> list[float]:
        scores = []
        for index, completion in enumerate(completions):
            info = extra_info[index] if extra_info is not None else None
            result = compute_score(
                data_source[index] if data_source is not None else name,
                completion_text(completion),
                answer[index],
                extra_info=json.loads(info) if isinstance(info, str) else info,
                **extra,
            )
            # verl allows a dict with a "score" key as well as a number.
            scores.append(float(result["score"] if isinstance(result, dict) else result))
        return scores

    reward.__name__ = f"{name.replace('-', '_')}_score"
    return reward


def builtin_reward_funcs(name: str, options: Mapping[str, Any] | None = None) -> list[RewardFunc]:
    """The reward functions of a builtin by its spec name (`reasoning-format`, `geo3k`, ...)."""
    from grpo_trainer.rewards.registry import BUILTIN_REWARDS

    if name not in BUILTIN_REWARDS:
        raise ValueError(f"unknown builtin reward {name!r}; known: {', '.join(sorted(BUILTIN_REWARDS))}")
    spec = BUILTIN_REWARDS[name]
    if spec.trl_functions:
        module = importlib.import_module(spec.module)
        return [getattr(module, function) for function in spec.trl_functions]
    return [per_sample_reward(spec.load(), name, options)]


def custom_reward_funcs(
    path: str, function: str, options: Mapping[str, Any] | None = None, *, batch: bool = False
) -> list[RewardFunc]:
    """A user's reward file (per-sample or batch function) as one sandboxed TRL reward function."""
    return [sandboxed_reward(path, function, options, batch=batch)]


# What this engine asks of the sandbox unless the job's reward.kwargs say otherwise.
SANDBOX_DEFAULTS = {"custom_on_error": "raise"}


def sandboxed_reward(
    path: str, function: str, options: Mapping[str, Any] | None = None, *, batch: bool = False
) -> RewardFunc:
    """The user's `function` of the file at `path`, called in the sandbox's worker processes.

    The file is parsed here and imported by the workers before the first step, so a typo or an
    import error fails the job at once (ConfigError naming the file); the workers start once.
    """
    from grpo_trainer.rewards import custom

    custom.check_defines(path, function)
    kwargs: dict[str, Any] = {
        **SANDBOX_DEFAULTS,
        **dict(options or {}),
        "custom_path": path,
        "custom_name": function,
        "custom_kind": "batch" if batch else "auto",
    }
    custom.start(**kwargs)

    def reward(
        prompts: Sequence[Any],
        completions: Sequence[Any],
        answer: Sequence[str],
        data_source: Sequence[str] | None = None,
        extra_info: Sequence[str | None] | None = None,
        **columns: Any,
    ) -> list[float]:
        count = len(completions)
        infos = [json.loads(i) if isinstance(i, str) else i for i in (extra_info or [None] * count)]
        results = custom.compute_score_batch(
            list(data_source) if data_source is not None else [function] * count,
            [completion_text(completion) for completion in completions],
            list(answer),
            infos,
            **kwargs,
        )
        return [float(r["score"] if isinstance(r, dict) else r) for r in results]

    reward.__name__ = function  # TRL names the metric after it: rewards/<function>/mean
    return reward
