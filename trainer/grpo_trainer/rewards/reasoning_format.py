"""reasoning-format reward: the single-GPU LoRA recipe's `<REASONING>` / `<SOLUTION>` rules, exactly.

format (the recipe's `formatting_reward_func`):
    -2.0  "</SOLUTION>" does not occur (the response was cut off)
    +1.0  both `<REASONING>...</REASONING>` and `<SOLUTION>...</SOLUTION>` are present with the
          closing tag starting after the end of the first opening tag (non-empty span)
    -1.0  otherwise (missing or out-of-order tags)
correctness (the recipe's `correctness_reward_func`):
    +2.0  exactly one `<SOLUTION>(.*?)</SOLUTION>` match, and it equals `ground_truth.strip()` after
          removing newlines and stripping
     0.0  otherwise
The TRL functions below keep the single-GPU LoRA recipe's names and signatures; `compute_score` is the verl form and
returns {"score": format + correctness, "format", "correctness", "acc"}; score in [-2, 3].

Where the single-GPU LoRA recipe would raise (None or empty completions, missing answers, non-string content) these
score as an empty response instead, and the solution tags are found with `str.find` rather than the
recipe's lazy regex, which is quadratic on a response full of unclosed `<SOLUTION>` tags. Loaded
either as a package module or by file path: absolute imports only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from grpo_trainer.rewards.responses import as_text, completion_text

SOLUTION_START = "<SOLUTION>"
SOLUTION_END = "</SOLUTION>"
REASONING_START = "<REASONING>"
REASONING_END = "</REASONING>"
SCORE_RANGE = (-2.0, 3.0)

log = logging.getLogger(__name__)


def format_score(text: str) -> float:
    """The single-GPU LoRA recipe's formatting reward for one response."""
    if SOLUTION_END not in text:
        return -2.0
    if _spans(text, REASONING_START, REASONING_END) and _spans(text, SOLUTION_START, SOLUTION_END):
        return 1.0
    return -1.0


def correctness_score(text: str, ground_truth: Any) -> float:
    """The single-GPU LoRA recipe's correctness reward for one response."""
    if not isinstance(ground_truth, str):
        if ground_truth is None:
            return 0.0
        ground_truth = as_text(ground_truth)
    matches = solutions(text, limit=2)
    if len(matches) == 1 and ground_truth.strip() == matches[0].replace("\n", "").strip():
        return 2.0
    return 0.0


def solutions(text: str, limit: int | None = None) -> list[str]:
    """What `re.findall(r"<SOLUTION>(.*?)</SOLUTION>", text, re.DOTALL)` returns, in linear time.

    After an opening tag with no closing tag behind it the regex cannot match again, so the scan
    stops there; `limit` stops it early when only the count up to `limit` matters.
    """
    found: list[str] = []
    position = 0
    while limit is None or len(found) < limit:
        start = text.find(SOLUTION_START, position)
        if start < 0:
            break
        content = start + len(SOLUTION_START)
        end = text.find(SOLUTION_END, content)
        if end < 0:
            break
        found.append(text[content:end])
        position = end + len(SOLUTION_END)
    return found


def formatting_reward_func(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """TRL reward function: the single-GPU LoRA recipe's format score for each completion."""
    return [_guard(format_score, completion_text(c), fallback=-2.0) for c in completions or []]


def correctness_reward_func(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    answer: Sequence[Any] | str | None = None,
    **kwargs: Any,
) -> list[float]:
    """TRL reward function: the single-GPU LoRA recipe's correctness score, one per completion (dataset column `answer`)."""
    completions = list(completions or [])
    answers = _answers(answer, len(completions))
    return [
        _guard(correctness_score, completion_text(completion), truth)
        for completion, truth in zip(completions, answers, strict=True)
    ]


def compute_score(
    data_source: Any,
    solution_str: Any,
    ground_truth: Any,
    extra_info: Any = None,
    **kwargs: Any,
) -> dict[str, float]:
    """verl's per-sample form: format + correctness, with both parts. Never raises."""
    text = as_text(solution_str)
    fmt = _guard(format_score, text, fallback=-2.0)
    correct = _guard(correctness_score, text, ground_truth)
    return {"score": fmt + correct, "format": fmt, "correctness": correct, "acc": 1.0 if correct > 0 else 0.0}


def _spans(text: str, start_tag: str, end_tag: str) -> bool:
    """The single-GPU LoRA recipe's check: both tags present and the first end tag begins after the first start tag ends."""
    return (
        start_tag in text and end_tag in text and text.index(end_tag) > text.index(start_tag) + len(start_tag)
    )


def _answers(answer: Sequence[Any] | str | None, count: int) -> list[Any]:
    if isinstance(answer, str) or answer is None:
        return [answer] * count
    try:
        values = list(answer)
    except TypeError:
        return [answer] * count
    return (values + [None] * count)[:count]


def _guard(score: Any, *args: Any, fallback: float = 0.0) -> float:
    try:
        return float(score(*args))
    except Exception:
        log.exception("reasoning-format reward failed; scoring %s", fallback)
        return fallback
