"""reasoning-format: the single-GPU LoRA recipe's two TRL reward functions, reproduced exactly."""

from __future__ import annotations

import re
from typing import Any

import pytest
from grpo_trainer.rewards import reasoning_format as rf
from hypothesis import given, settings
from hypothesis import strategies as st

# The single-GPU LoRA recipe's functions ("Dual-Tier Reward Function Implementation"), kept as the oracle.
SEED_SOLUTION_REGEX = re.compile(r"<SOLUTION>(.*?)</SOLUTION>", re.DOTALL)


def seed_format(text: str) -> float:
    has_reasoning = (
        "<REASONING>" in text
        and "</REASONING>" in text
        and text.index("</REASONING>") > text.index("<REASONING>") + len("<REASONING>")
    )
    has_solution = (
        "<SOLUTION>" in text
        and "</SOLUTION>" in text
        and text.index("</SOLUTION>") > text.index("<SOLUTION>") + len("<SOLUTION>")
    )
    if "</SOLUTION>" not in text:
        return -2.0
    if has_reasoning and has_solution:
        return 1.0
    return -1.0


def seed_correctness(text: str, ground_truth: str) -> float:
    matches = SEED_SOLUTION_REGEX.findall(text)
    if len(matches) == 1 and ground_truth.strip() == matches[0].replace("\n", "").strip():
        return 2.0
    return 0.0


TAGS = ["<REASONING>", "</REASONING>", "<SOLUTION>", "</SOLUTION>", "3.0", " ", "\n", "x", "<", "SOLUTION>"]
texts = st.lists(st.sampled_from(TAGS), max_size=14).map("".join)


@given(texts)
@settings(max_examples=500, deadline=None)
def test_format_is_the_seeds(text: str) -> None:
    assert rf.format_score(text) == seed_format(text)
    assert rf.formatting_reward_func([None], [text]) == [seed_format(text)]
    assert rf.formatting_reward_func([None], [[{"role": "assistant", "content": text}]]) == [
        seed_format(text)
    ]


@given(texts, st.sampled_from(["3.0", " 3.0 ", "3", "x"]))
@settings(max_examples=500, deadline=None)
def test_correctness_is_the_seeds(text: str, truth: str) -> None:
    assert rf.correctness_score(text, truth) == seed_correctness(text, truth)
    assert rf.correctness_reward_func([None], [text], answer=[truth]) == [seed_correctness(text, truth)]


@given(texts)
@settings(max_examples=300, deadline=None)
def test_solution_scan_is_the_seeds_findall(text: str) -> None:
    assert rf.solutions(text) == SEED_SOLUTION_REGEX.findall(text)


@pytest.mark.parametrize(
    ("text", "fmt", "correct"),
    [
        ("<REASONING>ruler reads 3</REASONING><SOLUTION>3.0</SOLUTION>", 1.0, 2.0),
        ("<REASONING>r</REASONING><SOLUTION>\n3.0\n</SOLUTION>", 1.0, 2.0),
        ("<REASONING>r</REASONING><SOLUTION>3</SOLUTION>", 1.0, 0.0),
        ("<REASONING>r</REASONING><SOLUTION>3.0", -2.0, 0.0),
        ("<REASONING></REASONING><SOLUTION>3.0</SOLUTION>", -1.0, 2.0),
        ("<SOLUTION>3.0</SOLUTION>", -1.0, 2.0),
        ("<REASONING>r</REASONING><SOLUTION>3.0</SOLUTION><SOLUTION>3.0</SOLUTION>", 1.0, 0.0),
        ("</SOLUTION><REASONING>r</REASONING><SOLUTION>3.0</SOLUTION>", -1.0, 2.0),
        ("", -2.0, 0.0),
    ],
)
def test_golden_scores(text: str, fmt: float, correct: float) -> None:
    assert rf.compute_score("visual_math", text, "3.0") == {
        "score": fmt + correct,
        "format": fmt,
        "correctness": correct,
        "acc": 1.0 if correct else 0.0,
    }


@pytest.mark.parametrize(
    "completion",
    [None, [], [{}], [{"content": None}], {"content": 3}, 42, [{"content": [{"type": "text", "text": "x"}]}]],
)
def test_inputs_that_crash_the_seed_score_as_an_empty_response(completion: Any) -> None:
    assert rf.formatting_reward_func([None], [completion]) == [-2.0]
    assert rf.correctness_reward_func([None], [completion], answer=["3.0"]) == [0.0]


def test_one_score_per_completion_even_when_answers_are_missing() -> None:
    completions = ["<SOLUTION>3.0</SOLUTION>", "<SOLUTION>4</SOLUTION>"]
    assert rf.correctness_reward_func([None, None], completions, answer=["3.0"]) == [2.0, 0.0]
    assert rf.correctness_reward_func([None, None], completions, answer="3.0") == [2.0, 0.0]
    assert rf.correctness_reward_func([None, None], completions) == [0.0, 0.0]


def test_many_unclosed_solution_tags_are_scanned_in_linear_time() -> None:
    text = "<SOLUTION>" * 200_000 + "</REASONING>"
    assert rf.compute_score("d", text, "3")["score"] == -2.0
