"""Built-in rewards by name, and where an engine finds each one.

The verl engine writes `reward.custom_reward_function.path=<spec.path>` (an absolute file path:
verl loads it with `spec_from_file_location`, and 0.7 accepts nothing else) and `.name=<spec.function>`;
engines that batch use `spec.batch_function`; the TRL engine imports `spec.trl_functions` from
`spec.module`. `score_range` is what the reward can return, for checks and plots. `batched`
rewards are graded a GRPO group at a time (the verl engine's grouped reward manager calls
`batch_function`), as their reference recipes call them with verl's batch reward manager.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_PACKAGE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class RewardSpec:
    name: str
    module: str
    function: str
    batch_function: str | None
    trl_functions: tuple[str, ...]
    score_range: tuple[float, float]
    description: str
    batched: bool = False

    @property
    def path(self) -> str:
        """Absolute path of the module file, for `reward.custom_reward_function.path`."""
        return str(_PACKAGE_DIR / f"{self.module.rsplit('.', 1)[-1]}.py")

    @property
    def pkg_uri(self) -> str:
        """verl 0.9's `pkg://` form of the same module."""
        return f"pkg://{self.module}"

    def load(self) -> Callable[..., Any]:
        """The per-sample function verl calls."""
        function: Callable[..., Any] = getattr(importlib.import_module(self.module), self.function)
        return function

    def load_batch(self) -> Callable[..., list[Any]] | None:
        if self.batch_function is None:
            return None
        function: Callable[..., list[Any]] = getattr(
            importlib.import_module(self.module), self.batch_function
        )
        return function


BUILTIN_REWARDS: dict[str, RewardSpec] = {
    spec.name: spec
    for spec in (
        RewardSpec(
            name="geo3k",
            module="grpo_trainer.rewards.geo3k",
            function="compute_score",
            batch_function="compute_score_batch",
            trl_functions=(),
            score_range=(0.0, 1.0),
            description=(
                "verl's geo3k score (the geo3k Ascend recipe's): 0.9 x mathruler grades the last \\boxed{} right "
                "+ 0.1 x <think>...</think>...\\boxed{}"
            ),
        ),
        RewardSpec(
            name="geo3k-lenient",
            module="grpo_trainer.rewards.geo3k_lenient",
            function="compute_score",
            batch_function="compute_score_batch",
            trl_functions=(),
            score_range=(0.0, 1.0),
            description=(
                "geo3k's weights and format, but equal values written differently count as the same "
                "answer (not comparable with verl's geo3k score)"
            ),
        ),
        RewardSpec(
            name="reasoning-format",
            module="grpo_trainer.rewards.reasoning_format",
            function="compute_score",
            batch_function=None,
            trl_functions=("formatting_reward_func", "correctness_reward_func"),
            score_range=(-2.0, 3.0),
            description="<REASONING>/<SOLUTION> format (+1/-1/-2) + exact solution match (+2)",
        ),
        RewardSpec(
            name="safety",
            module="grpo_trainer.rewards.safety",
            function="compute_score",
            batch_function="compute_score_batch",
            trl_functions=(),
            score_range=(-1.0, 1.0),
            description="refuse unsafe prompts, answer safe ones (over-refusal penalised), format bonus",
            batched=True,
        ),
    )
}

CUSTOM_REWARD = RewardSpec(
    name="custom",
    module="grpo_trainer.rewards.custom",
    function="compute_score",
    batch_function="compute_score_batch",
    trl_functions=(),
    score_range=(float("-inf"), float("inf")),
    description="the user's function from reward kwarg custom_path (custom_name, custom_kind)",
)


def get_reward(name: str) -> RewardSpec:
    """The spec of a built-in reward (a key of BUILTIN_REWARDS) or of "custom"."""
    if name == CUSTOM_REWARD.name:
        return CUSTOM_REWARD
    try:
        return BUILTIN_REWARDS[name]
    except KeyError:
        known = ", ".join([*BUILTIN_REWARDS, CUSTOM_REWARD.name])
        raise ValueError(f"unknown reward {name!r}; expected one of: {known}") from None
