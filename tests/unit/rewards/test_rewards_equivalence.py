"""Answer equivalence: the forms geo3k answers take, and the ones that must not match."""

from __future__ import annotations

import pytest
from grpo_trainer.rewards.answer_parse import normalize, parse
from grpo_trainer.rewards.equivalence import Verdict, compare, deadline_after

EQUAL = [
    ("\\frac{1}{2}", "0.5"),
    ("0.5", "\\frac{1}{2}"),
    ("\\dfrac{40}{3}", "\\frac { 40 } { 3 }"),
    ("\\frac12", "0.5"),
    ("2\\sqrt{3}", "\\sqrt{12}"),
    ("2 \\sqrt { 221 }", "2\\sqrt{221}"),
    ("\\frac{\\sqrt{3}}{2}", "0.8660254"),
    ("\\sqrt[3]{8}", "2"),
    ("45^\\circ", "45"),
    ("45^{\\circ}", "45"),
    ("45°", "45"),
    ("45 degrees", "45"),
    ("2\\pi", "6.283185307"),
    ("\\frac{\\pi}{2}", "1.5707963"),
    ("1,000", "1000"),
    ("12,345.5", "12345.5"),
    ("x = 5", "5"),
    ("m \\angle B = 62", "62"),
    ("5 cm", "5"),
    ("5\\text{ cm}^2", "5"),
    ("24 \\text{ square units}", "24"),
    ("\\text{5}", "5"),
    ("$7$", "7"),
    ("25\\%", "25"),
    ("3.0", "3"),
    ("7\\frac{3}{4}", "7.75"),
    ("-\\frac{1}{2}", "-0.5"),
    ("−3", "-3"),
    ("10\\sqrt{2} \\approx 14.14", "10\\sqrt{2}"),
    ("3 \\cdot 4", "12"),
    ("2^{10}", "1024"),
    ("3, 4", "3,4"),
    ("A", "a"),
    ("x + 1", "1 + x"),
    ("(x+1)^2", "x^2+2x+1"),
    ("\\sin^2 x + \\cos^2 x", "1"),
]

DIFFERENT = [
    ("3", "4"),
    ("13.3", "\\frac{40}{3}"),
    ("\\frac{1}{3}", "0.33"),
    ("2\\sqrt{3}", "3.46"),
    ("3,4", "4,3"),
    ("3", "3,4"),
    ("x + 2", "x + 1"),
    ("x", "5"),
    ("2^{2^{2^{2^{2^{2}}}}}", "1"),
    ("\\sqrt{-4}", "2"),
    ("\\frac{1}{0}", "1"),
    ("", "5"),
    ("five", "5"),
    ("\\infty", "5"),
    ("1" * 300, "1" * 300),
]


@pytest.mark.parametrize(("given", "truth"), EQUAL)
def test_equal_forms_match(given: str, truth: str) -> None:
    assert compare(given, truth, deadline=deadline_after(10)) is Verdict.EQUAL


@pytest.mark.parametrize(("given", "truth"), DIFFERENT)
def test_different_values_do_not_match(given: str, truth: str) -> None:
    assert compare(given, truth, deadline=deadline_after(10)) is Verdict.DIFFERENT


def test_relative_tolerance_is_configurable() -> None:
    assert compare("3.464", "2\\sqrt{3}") is Verdict.DIFFERENT
    assert compare("3.464", "2\\sqrt{3}", rel_tol=1e-3) is Verdict.EQUAL


def test_parser_refuses_what_it_cannot_read_rather_than_guessing() -> None:
    for text in ("\\int x dx", "\\log_2 8", "x!", "\\overline{AB}", "((((", "2 +", "abcd"):
        assert parse(normalize(text) or "") is None, text


def test_answers_longer_than_the_limit_are_not_graded() -> None:
    assert normalize("1" * 257) is None
