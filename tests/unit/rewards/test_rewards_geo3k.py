"""geo3k, the geo3k Ascend recipe's scorer: verl's own geo3k rule, its answer graded by mathruler, within a time bound.

The oracle below is verl's `verl/utils/reward_score/geo3k.py` rule written out (mathruler's
grade_answer on its extract_boxed_content, and verl's format regex); tests/unit/verl_engine runs
verl's own module on the same answers. The table of cases where geo3k-lenient scores differently
is docs/benchmarks/rewards.md's; the test reads it, so the documentation cannot drift.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from grpo_trainer.rewards import geo3k, geo3k_lenient
from hypothesis import given, settings
from hypothesis import strategies as st
from mathruler.grader import extract_boxed_content, grade_answer

VERL_FORMAT = re.compile(r"<think>.*</think>.*\\boxed\{.*\}.*", re.DOTALL)
DOC = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "rewards.md"
T = "<think>r</think> "
# Hand-made answers in the forms geo3k's ground truths and Qwen's answers take, and around them.
CASES = [
    # integers
    (T + "\\boxed{5}", "5"),
    (T + "\\boxed{5.0}", "5"),
    (T + "\\boxed{05}", "5"),
    (T + "\\boxed{+5}", "5"),
    (T + "\\boxed{-5}", "-5"),
    (T + "\\boxed{5}", "-5"),
    (T + "\\boxed{ 5 }", "5"),
    (T + "\\boxed{5.}", "5"),
    # units / degrees
    (T + "\\boxed{5 cm}", "5"),
    (T + "\\boxed{5\\text{ cm}}", "5"),
    (T + "\\boxed{60^\\circ}", "60"),
    (T + "\\boxed{60^{\\circ}}", "60"),
    (T + "\\boxed{60°}", "60"),
    (T + "\\boxed{60 degrees}", "60"),
    (T + "\\boxed{12 units}", "12"),
    (T + "\\boxed{25 \\text{ units}^2}", "25"),
    (T + "\\boxed{5 m}", "5"),
    (T + "\\boxed{5 inches}", "5"),
    (T + "\\boxed{5\\,\\text{cm}^2}", "5"),
    # text wrappers, dollars, percent
    (T + "\\boxed{\\text{5}}", "5"),
    (T + "\\boxed{\\mathrm{5}}", "5"),
    (T + "\\boxed{\\$5}", "5"),
    (T + "\\boxed{$5$}", "5"),
    (T + "\\boxed{50\\%}", "50"),
    (T + "\\boxed{\\textbf{5}}", "5"),
    # x = prefixes
    (T + "\\boxed{x=5}", "5"),
    (T + "\\boxed{x = 5}", "5"),
    (T + "\\boxed{AB = 5}", "5"),
    (T + "\\boxed{m\\angle 1 = 60}", "60"),
    # thousands separators
    (T + "\\boxed{1,000}", "1000"),
    (T + "\\boxed{1{,}000}", "1000"),
    (T + "\\boxed{1\\,000}", "1000"),
    # decimals
    (T + "\\boxed{12.5}", "12.5"),
    (T + "\\boxed{12.50}", "12.5"),
    (T + "\\boxed{12.49}", "12.5"),
    (T + "\\boxed{0.5}", "0.5"),
    (T + "\\boxed{.5}", "0.5"),
    (T + "\\boxed{6.3}", "6.32"),
    (T + "\\boxed{3.4641016}", "2 \\sqrt { 3 }"),
    # fractions
    (T + "\\boxed{\\frac{1}{2}}", "0.5"),
    (T + "\\boxed{1/2}", "\\frac{1}{2}"),
    (T + "\\boxed{\\dfrac{1}{2}}", "\\frac{1}{2}"),
    (T + "\\boxed{\\frac{2}{4}}", "\\frac{1}{2}"),
    (T + "\\boxed{\\frac{6}{2}}", "3"),
    (T + "\\boxed{\\frac{40}{3}}", "\\frac { 40 } { 3 }"),
    (T + "\\boxed{13.33}", "\\frac { 40 } { 3 }"),
    (T + "\\boxed{13.3333333333}", "\\frac { 40 } { 3 }"),
    (T + "\\boxed{\\frac{40}{3}}", "13.3"),
    (T + "\\boxed{0.5}", "\\frac{1}{2}"),
    (T + "\\boxed{\\tfrac12}", "\\frac{1}{2}"),
    (T + "\\boxed{\\frac12}", "\\frac{1}{2}"),
    (T + "\\boxed{2\\frac{1}{2}}", "2.5"),
    (T + "\\boxed{-\\frac{1}{2}}", "-0.5"),
    # roots
    (T + "\\boxed{2\\sqrt{3}}", "2 \\sqrt { 3 }"),
    (T + "\\boxed{\\sqrt{12}}", "2 \\sqrt { 3 }"),
    (T + "\\boxed{2 \\sqrt 3}", "2 \\sqrt { 3 }"),
    (T + "\\boxed{2\\sqrt{221}}", "2 \\sqrt { 221 }"),
    (T + "\\boxed{\\sqrt{884}}", "2 \\sqrt { 221 }"),
    (T + "\\boxed{29.73}", "2 \\sqrt { 221 }"),
    (T + "\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac { \\sqrt { 3 } } { 2 }"),
    (T + "\\boxed{\\frac{1}{\\sqrt{3}}}", "\\frac { \\sqrt { 3 } } { 3 }"),
    (T + "\\boxed{3\\sqrt{2}}", "4.24"),
    # pi
    (T + "\\boxed{6\\pi}", "6 \\pi"),
    (T + "\\boxed{6 \\pi}", "6\\pi"),
    (T + "\\boxed{18.85}", "6 \\pi"),
    (T + "\\boxed{\\pi \\cdot 6}", "6 \\pi"),
    (T + "\\boxed{2\\pi}", "6.283185307179586"),
    # symbolic
    (T + "\\boxed{(x+1)^2}", "x^2+2x+1"),
    (T + "\\boxed{x^2+2x+1}", "x^2+2x+1"),
    (T + "\\boxed{2x+1}", "1+2x"),
    (T + "\\boxed{x^{2}+2x+1}", "x^2+2x+1"),
    # tuples, choices, text
    (T + "\\boxed{(1,2)}", "(1,2)"),
    (T + "\\boxed{(1, 2)}", "(1,2)"),
    (T + "\\boxed{1,2}", "(1,2)"),
    (T + "\\boxed{B}", "B"),
    (T + "\\boxed{b}", "B"),
    (T + "\\boxed{\\text{B}}", "B"),
    (T + "\\boxed{(B)}", "B"),
    # format / extraction
    ("\\boxed{5}", "5"),
    ("<think>r</think>\\boxed{7}", "5"),
    ("the answer is 5", "5"),
    (T + "5", "5"),
    (T + "\\boxed{}", "5"),
    (T + "\\boxed{5", "5"),
    (T + "\\boxed{3} then \\boxed{5}", "5"),
    (T + "\\boxed{5} then \\boxed{3}", "5"),
    ("reasoning</think>\\boxed{5}", "5"),
    (" <think>r</think>\\boxed{5}", "5"),
    ("<think>\n</think>\\boxed{5} trailing", "5"),
    (T + "\\boxed{\\boxed{5}}", "5"),
    (T + "\\boxed{{5}}", "5"),
    (T + "\\boxed{5}.", "5"),
    (T + "\\fbox{5}", "5"),
    (T + "\\boxed{\\left(5\\right)}", "5"),
    (T + "\\boxed{5}\\boxed{}", "5"),
    (T + "\\boxed{\\text{none}}", "None"),
    ("<think>r</think>", "None"),
]


def verl_score(response: str, truth: str) -> float:
    """verl's geo3k.compute_score: 0.9 x mathruler's grade of the last box + 0.1 x the format regex."""
    accuracy = 1.0 if grade_answer(extract_boxed_content(response), truth) else 0.0
    return 0.9 * accuracy + 0.1 * (1.0 if VERL_FORMAT.fullmatch(response) else 0.0)


def documented_differences() -> dict[tuple[str, str], tuple[float, float]]:
    """(response, truth) -> (geo3k, geo3k-lenient) from the table in docs/benchmarks/rewards.md."""
    text = DOC.read_text(encoding="utf-8")
    table = text.split("<!-- geo3k-differences -->", 1)[1].split("<!-- /geo3k-differences -->", 1)[0]
    rows = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0].startswith("`"):
            continue
        response = cells[0].strip("`").replace("\\n", "\n")
        rows[(response, cells[1].strip("`"))] = (float(cells[2]), float(cells[3]))
    return rows


@pytest.mark.parametrize(("response", "truth"), CASES)
def test_scores_exactly_as_verls_geo3k(response: str, truth: str) -> None:
    result = geo3k.compute_score("hiyouga/geometry3k", response, truth)
    assert result["score"] == pytest.approx(verl_score(response, truth))
    assert result["acc"] == result["score"]  # verl records its float score as acc
    assert set(result) == set(geo3k.KEYS)
    assert result["timeout"] == 0.0


def test_every_difference_from_geo3k_lenient_is_documented_with_both_scores() -> None:
    documented = documented_differences()
    found = {}
    for response, truth in CASES:
        exact = round(geo3k.compute_score("d", response, truth)["score"], 6)
        lenient = round(geo3k_lenient.compute_score("d", response, truth)["score"], 6)
        if exact != lenient:
            found[(response, truth)] = (exact, lenient)
    assert found == documented
    stricter = [case for case, (exact, lenient) in found.items() if lenient < exact]
    # The one place lenient is stricter: mathruler grades a response with no box as the text "None".
    assert stricter == [("<think>r</think>", "None")]


@given(
    st.lists(
        st.sampled_from(
            ["<think>", "</think>", "\\boxed{", "}", "5", "x", " ", "\n", "\\frac{1}{2}", "0.5", "=", "{"]
        ),
        max_size=10,
    ).map("".join),
    st.sampled_from(["5", "0.5", "\\frac{1}{2}", "x"]),
)
@settings(max_examples=150, deadline=None)
def test_any_text_scores_as_verls_rule(response: str, truth: str) -> None:
    assert geo3k.compute_score("d", response, truth)["score"] == pytest.approx(verl_score(response, truth))


def test_format_weight_and_boxed_switch_are_verls_kwargs() -> None:
    response = "<think>...</think>\\boxed{5}"
    assert geo3k.compute_score("d", response, "5", format_score=0.5)["score"] == pytest.approx(1.0)
    assert geo3k.compute_score("d", response, "4", format_score=0.5)["score"] == pytest.approx(0.5)
    assert geo3k.compute_score("d", "5", "5", use_boxed=False)["correct"] == 1.0


def test_an_answer_mathruler_cannot_grade_in_time_counts_as_wrong_within_the_bound() -> None:
    geo3k.compute_score("d", "<think>.</think>\\boxed{1}", "1")  # the worker pool is up
    # mathruler hands this to sympy.simplify (no "^{" or "^(" to refuse it), which runs for minutes.
    response = "<think>.</think>\\boxed{((x+y)*(x-y))**900}"
    started = time.monotonic()
    result = geo3k.compute_score("d", response, "(x**2-y**2)**900", timeout_s=0.5)
    elapsed = time.monotonic() - started
    assert result == {
        "score": pytest.approx(0.1),
        "acc": pytest.approx(0.1),
        "correct": 0.0,
        "format": 1.0,
        "timeout": 1.0,
    }
    assert elapsed < 0.5


def test_without_mathruler_the_reward_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(geo3k, "_checked", False)
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mathruler" else real(name, *a)
    )
    hint = "pip install mathruler==0.1.0, or use reward.builtin: geo3k-lenient"
    with pytest.raises(ImportError, match=re.escape(hint)):
        geo3k.compute_score("d", "\\boxed{5}", "5")


def test_answers_mathruler_settles_as_text_never_reach_sympy_and_mathruler_itself_is_untouched() -> None:
    import mathruler.grader

    assert geo3k.grade_without_sympy("\\boxed{5}", "5") is True
    assert geo3k.grade_without_sympy("\\boxed{6}", "5") is False  # integer truth: text only
    assert geo3k.grade_without_sympy("\\boxed{(x+1)^2}", "x^2+2x+1") is None  # sympy decides: a worker does
    assert geo3k.compute_score("d", "\\boxed{(x+1)^2}", "x^2+2x+1")["correct"] == 1.0
    # The copy without sympy is private: other users of mathruler in the process keep the real one.
    assert mathruler.grader.grade_answer("\\frac{1}{2}", "0.5") is True
