"""Every reward, on any output: never raises, stays within its bound, stays within its range."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from grpo_trainer.rewards import BUILTIN_REWARDS, geo3k, reasoning_format, safety
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TIMEOUT_S = 0.5
SLACK_S = 0.25  # scheduling noise on a loaded 2-core machine, on top of the configured bound

PIECES = [
    "<think>", "</think>", "\\boxed{", "}", "{", "<REASONING>", "</REASONING>", "<SOLUTION>",
    "</SOLUTION>", "\\frac{", "\\sqrt{", "^{", "(", ")", "x", "y", "2", "0", ".", ",", "=", "-", "/",
    "\\pi", "^", "\\circ", "I'm sorry, but I can't help with that.", "抱歉，我无法提供", "∞", "\x00",
    "\ud7ff", "😀", " ", "\n", "((x+y)(x-y))^{900}", "(x^2-y^2)^{900}", "9^{9^{9^{9}}}", "\\left(",
]  # fmt: skip
texts = st.one_of(
    st.text(max_size=300),
    st.lists(st.sampled_from(PIECES), max_size=40).map("".join),
    st.builds(lambda piece, count: piece * count, st.sampled_from(PIECES), st.integers(0, 20_000)),
)
anything = st.one_of(
    texts, st.none(), st.integers(), st.floats(), st.binary(max_size=50), st.just([{"a": 1}])
)
infos = st.one_of(
    st.none(),
    st.just({"safety_label": "unsafe"}),
    st.dictionaries(st.sampled_from(["safety_label", "answer", "index"]), anything, max_size=3),
)
REWARDS: dict[str, Callable[..., Any]] = {
    "geo3k": geo3k.compute_score,
    "reasoning-format": reasoning_format.compute_score,
    "safety": safety.compute_score,
}
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(name: str, solution: Any, truth: Any, info: Any) -> None:
    started = time.monotonic()
    result = REWARDS[name]("data", solution, truth, info, timeout_s=TIMEOUT_S)
    elapsed = time.monotonic() - started
    low, high = BUILTIN_REWARDS[name].score_range
    assert isinstance(result, dict)
    assert low <= result["score"] <= high
    assert all(isinstance(value, float) for value in result.values())
    assert elapsed <= TIMEOUT_S + SLACK_S, f"{name} took {elapsed:.3f}s"


@pytest.mark.parametrize("name", sorted(REWARDS))
@given(solution=anything, truth=anything, info=infos)
@FAST
def test_any_input_scores_within_range_and_bound(name: str, solution: Any, truth: Any, info: Any) -> None:
    check(name, solution, truth, info)


@pytest.mark.parametrize("name", sorted(REWARDS))
@given(
    solution=texts, truth=st.sampled_from(["0.5", "\\frac{1}{2}", "x+1", "(x^2-y^2)^{900}", "unsafe", "3.0"])
)
@FAST
def test_realistic_truths_score_within_range_and_bound(name: str, solution: str, truth: str) -> None:
    check(name, solution, truth, None)


@pytest.mark.parametrize("name", sorted(REWARDS))
def test_huge_responses_are_graded_quickly(name: str) -> None:
    huge = "<think>" + "x = \\frac{1}{2} " * 400_000 + "</think>\\boxed{" + "{" * 50_000
    started = time.monotonic()
    REWARDS[name]("data", huge, "0.5", None)
    assert time.monotonic() - started < 1.0


@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
@FAST
def test_trl_functions_never_raise(text: str) -> None:
    completions = [text, [{"content": text}], None]
    assert len(reasoning_format.formatting_reward_func([None] * 3, completions)) == 3
    assert len(reasoning_format.correctness_reward_func([None] * 3, completions, answer=[text, None, 3])) == 3
