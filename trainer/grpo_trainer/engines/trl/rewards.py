"""Reward functions for TRL's GRPOTrainer, from `grpo_trainer.rewards`.

TRL calls each reward function with the batch's prompts and completions and every extra dataset
column as a keyword list. A builtin that has TRL-style functions (`reasoning-format`: the single-GPU LoRA recipe's
formatting and correctness pair) is used as is; other builtins and custom files have verl's
per-sample `compute_score`, which `per_sample_reward` adapts to the batch call.
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
    path: str, function: str, options: Mapping[str, Any] | None = None
) -> list[RewardFunc]:
    """A user's reward file (per-sample or batch function) as one TRL reward function."""
    from grpo_trainer.rewards.custom import load_sample_function

    return [per_sample_reward(load_sample_function(path, function), function, options)]
