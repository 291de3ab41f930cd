"""geo3k-lenient: verl's weights and format rule, last-box extraction, equal values accepted, the time bound."""

from __future__ import annotations

import re
import time

import pytest
from grpo_trainer.rewards import geo3k_lenient as geo3k
from grpo_trainer.rewards.responses import last_boxed
from hypothesis import given, settings
from hypothesis import strategies as st

# verl's geo3k format rule, verbatim: our str.find version must agree with it everywhere.
VERL_FORMAT = re.compile(r"<think>.*</think>.*\\boxed\{.*\}.*", re.DOTALL)
FRAGMENTS = ["<think>", "</think>", "\\boxed{", "}", "{", "x", " ", "\n", "5", "<", "think>", "\\boxed"]


def reference_last_boxed(text: str) -> str | None:
    """mathruler's extraction rule: last `\\boxed{`, then the text up to its matching brace."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth = 0
    content = text[start + len("\\boxed{") :]
    for index, char in enumerate(content):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth == -1:
            return content[:index].strip()
    return None


@pytest.mark.parametrize(
    ("response", "truth", "expected"),
    [
        ("<think>AB = 2, so the area is half.</think> The answer is \\boxed{\\frac{1}{2}}.", "0.5", 1.0),
        ("<think>...</think>\\boxed{2\\sqrt{3}}", "2 \\sqrt { 3 }", 1.0),
        ("<think>...</think>\\boxed{45^{\\circ}}", "45", 1.0),
        ("<think>...</think>\\boxed{x = 12}", "12", 1.0),
        ("<think>...</think>\\boxed{1,024}", "1024", 1.0),
        ("<think>...</think>\\boxed{2\\pi}", "6.283185307179586", 1.0),
        ("<think>...</think>\\boxed{7}", "8", 0.1),
        ("\\boxed{0.5}", "\\frac{1}{2}", 0.9),
        (" <think>...</think>\\boxed{0.5}", "0.5", 0.9),
        ("<think>...</think> the answer is 0.5", "0.5", 0.0),
        ("<think>unclosed \\boxed{0.5}", "0.5", 0.9),
        ("<think>...</think>\\boxed{\\frac{1}{2}", "0.5", 0.1),
        ("<think>...</think>\\boxed{3} then \\boxed{0.5}", "0.5", 1.0),
        ("<think>...</think>\\boxed{0.5} then \\boxed{3}", "0.5", 0.1),
        ("", "0.5", 0.0),
    ],
)
def test_golden_scores(response: str, truth: str, expected: float) -> None:
    result = geo3k.compute_score("hiyouga/geometry3k", response, truth)
    assert result["score"] == pytest.approx(expected)
    assert set(result) == {"score", "acc", "format", "timeout"}


def test_format_weight_and_boxed_switch_follow_verls_kwargs() -> None:
    response = "<think>...</think>\\boxed{5}"
    assert geo3k.compute_score("d", response, "5", format_score=0.5)["score"] == pytest.approx(1.0)
    assert geo3k.compute_score("d", response, "4", format_score=0.5)["score"] == pytest.approx(0.5)
    assert geo3k.compute_score("d", "5", "5", use_boxed=False)["acc"] == 1.0


def test_thinking_models_may_omit_the_opening_tag() -> None:
    response = "reasoning...</think>\\boxed{5}"
    assert geo3k.compute_score("d", response, "5")["format"] == 0.0
    assert geo3k.compute_score("d", response, "5", think_opened_in_prompt=True)["format"] == 1.0


@given(st.lists(st.sampled_from(FRAGMENTS), max_size=12).map("".join))
@settings(max_examples=400, deadline=None)
def test_format_rule_is_verls_regex(text: str) -> None:
    assert geo3k.format_reward(text) == (1.0 if VERL_FORMAT.fullmatch(text) else 0.0)


@given(st.lists(st.sampled_from(FRAGMENTS), max_size=12).map("".join))
@settings(max_examples=400, deadline=None)
def test_last_boxed_is_mathrulers_extraction(text: str) -> None:
    assert last_boxed(text) == reference_last_boxed(text)


def test_an_answer_sympy_cannot_settle_in_time_scores_format_only() -> None:
    response = "<think>...</think>\\boxed{((x+y)(x-y))^{900}}"
    started = time.monotonic()
    result = geo3k.compute_score("d", response, "(x^2-y^2)^{900}", timeout_s=0.5)
    elapsed = time.monotonic() - started
    assert result == {"score": pytest.approx(0.1), "acc": 0.0, "format": 1.0, "timeout": 1.0}
    assert elapsed < 0.5


def test_symbolic_answers_are_proven_by_sympy() -> None:
    result = geo3k.compute_score("d", "<think>.</think>\\boxed{(x+1)^2}", "x^2+2x+1", timeout_s=10)
    assert result["acc"] == 1.0


def test_batch_form_scores_like_the_per_sample_form() -> None:
    responses = ["<think>.</think>\\boxed{0.5}", "\\boxed{3}", None, "<think>.</think>\\boxed{\\frac{1}{2}}"]
    truths = ["\\frac{1}{2}", "3", "3", "0.4"]
    batch = geo3k.compute_score_batch(["d"] * 4, responses, truths, [None] * 4)
    assert batch == [geo3k.compute_score("d", r, t) for r, t in zip(responses, truths, strict=True)]


def test_batch_form_keeps_one_result_per_response_when_columns_are_short() -> None:
    assert len(geo3k.compute_score_batch(["d"], ["\\boxed{1}", "\\boxed{2}"], ["1"], None)) == 2
