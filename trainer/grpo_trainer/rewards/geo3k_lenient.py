r"""geo3k-lenient reward: verl's geo3k weights and format rule, with an answer check that accepts
equal values written differently.

0.9 x the last `\boxed{}` answer is right + 0.1 x `<think>...</think>...\boxed{...}`, like `geo3k`
(verl's own scorer, the geo3k Ascend recipe's), but the answer check is `equivalence.compare` instead of
mathruler's `grade_answer`: it accepts equal values written differently (`\frac{1}{2}` = `0.5`,
`2\sqrt{3}` = `\sqrt{12}`, `45^\circ` = `45`, `1,000` = `1000`, `x = 5` = `5`, unreduced fractions)
and is bounded in time without a worker round trip for constant answers. Scores are therefore not
comparable with published geo3k runs; docs/benchmarks/rewards.md lists every case where the two
disagree, and why.

verl calls `compute_score` once per response, from an executor thread, with the row's
`reward_model.ground_truth`. Keyword arguments (from `reward.custom_reward_function.reward_kwargs`):

| kwarg | default | meaning |
| --- | --- | --- |
| `format_score` | 0.1 | weight of the format term (verl's name); the answer gets 1 - format_score |
| `use_boxed` | True | grade the last `\boxed{}`; False grades the whole response (verl's option) |
| `timeout_s` | 2.0 | hard bound on grading one answer; past it the answer counts as wrong |
| `rel_tol` | 1e-6 | relative tolerance when comparing numeric values |
| `think_opened_in_prompt` | False | accept a response without the leading `<think>` (chat templates of "Thinking" models open it in the prompt) |
| `sympy_workers` | 4 | size of the sympy process pool (first call in a process only) |

Result: {"score": (1 - f) * acc + f * format, "acc": 0|1, "format": 0|1, "timeout": 0|1}; score in
[0, 1]. "acc" makes verl report `val-core/<data_source>/acc/mean@N` as answer accuracy (`geo3k`
reports the score there, as verl's own scorer does).

Loaded either as `grpo_trainer.rewards.geo3k_lenient` or by file path (verl's
`custom_reward_function.path`): imports are absolute and the module defines no classes, so both work.
"""

from __future__ import annotations

import logging
from typing import Any

from grpo_trainer.rewards.batching import rows
from grpo_trainer.rewards.equivalence import (
    DEFAULT_REL_TOL,
    DEFAULT_TIMEOUT_S,
    Verdict,
    compare,
    deadline_after,
)
from grpo_trainer.rewards.geo3k import format_reward
from grpo_trainer.rewards.options import bool_option, float_option, int_option
from grpo_trainer.rewards.responses import as_text, last_boxed
from grpo_trainer.rewards.sympy_pool import DEFAULT_WORKERS, default_pool

DEFAULT_FORMAT_SCORE = 0.1
SCORE_RANGE = (0.0, 1.0)

log = logging.getLogger(__name__)


def grade(
    text: str,
    ground_truth: str,
    *,
    use_boxed: bool = True,
    deadline: float | None = None,
    rel_tol: float = DEFAULT_REL_TOL,
) -> Verdict:
    """Compare the response's answer with the ground truth."""
    answer = last_boxed(text) if use_boxed else text
    if answer is None or not ground_truth.strip():
        return Verdict.DIFFERENT
    return compare(answer, ground_truth, deadline=deadline, rel_tol=rel_tol)


def compute_score(
    data_source: Any,
    solution_str: Any,
    ground_truth: Any,
    extra_info: Any = None,
    **kwargs: Any,
) -> dict[str, float]:
    """Score one response (verl's per-sample reward contract). Never raises."""
    deadline = deadline_after(float_option(kwargs, "timeout_s", DEFAULT_TIMEOUT_S))
    try:
        default_pool(int_option(kwargs, "sympy_workers", DEFAULT_WORKERS)).start()
        return _score(as_text(solution_str), as_text(ground_truth), deadline, kwargs)
    except Exception:  # a reward must never stop training; see the log for the cause
        log.exception("geo3k-lenient reward failed; scoring 0")
        return {"score": 0.0, "acc": 0.0, "format": 0.0, "timeout": 0.0}


def compute_score_batch(
    data_sources: list[Any],
    solution_strs: list[Any],
    ground_truths: list[Any],
    extra_infos: list[Any] | None = None,
    **kwargs: Any,
) -> list[dict[str, float]]:
    """Score many responses (the batch contract); each answer keeps its own time bound."""
    try:
        default_pool(int_option(kwargs, "sympy_workers", DEFAULT_WORKERS)).start()
    except Exception:
        log.exception("cannot start the sympy pool")
    return [
        compute_score(source, solution, truth, info, **kwargs)
        for source, solution, truth, info in rows(data_sources, solution_strs, ground_truths, extra_infos)
    ]


def _score(text: str, ground_truth: str, deadline: float, kwargs: dict[str, Any]) -> dict[str, float]:
    weight = float_option(kwargs, "format_score", DEFAULT_FORMAT_SCORE)
    verdict = grade(
        text,
        ground_truth,
        use_boxed=bool_option(kwargs, "use_boxed", True),
        deadline=deadline,
        rel_tol=float_option(kwargs, "rel_tol", DEFAULT_REL_TOL),
    )
    acc = 1.0 if verdict is Verdict.EQUAL else 0.0
    fmt = format_reward(text, bool_option(kwargs, "think_opened_in_prompt", False))
    return {
        "score": (1.0 - weight) * acc + weight * fmt,
        "acc": acc,
        "format": fmt,
        "timeout": 1.0 if verdict is Verdict.TIMEOUT else 0.0,
    }
