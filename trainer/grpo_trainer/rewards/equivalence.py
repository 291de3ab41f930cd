r"""Is a model's answer the same quantity as the reference? Cheap checks first, sympy last.

1. Text: after `answer_parse.normalize` (wrappers, units, degree marks, thousands separators,
   `x =` prefixes removed) the two strings are equal, ignoring spaces and case.
2. Numbers: both parse and have no variables: evaluate with floats and compare with a relative
   tolerance (`\frac{1}{2}` = `0.5`, `2\sqrt{3}` = `\sqrt{12}`, `2\pi` = `6.2832...`, within 1e-6 by
   default). Decisive either way; answers that overflow or leave the reals count as different.
3. Variables: evaluate both at a few fixed points; any disagreement is decisive, otherwise sympy
   (in a worker process, `sympy_pool`) must prove the difference is zero before the deadline.

Differences from mathruler's `grade_answer` (verl's geo3k grader): equal values always match
(mathruler rejects `\frac{6}{2}` for `3` and unreduced fractions), a bare decimal must agree to the
tolerance (mathruler needs exact equality after `simplify`), and nothing here can hang.
"""

from __future__ import annotations

import enum
import functools
import math
import operator
import time
from collections.abc import Callable

from grpo_trainer.rewards.answer_parse import Node, free_symbols, normalize, parse, squash
from grpo_trainer.rewards.sympy_pool import SympyPool, default_pool

DEFAULT_REL_TOL = 1e-6
DEFAULT_TIMEOUT_S = 2.0
RESERVE_S = 0.02
RESERVE_FRACTION = 0.05
_ABS_TOL = 1e-9
_POINTS = (0.5377, 1.8339, -2.2588, 0.8622, 3.3188)
_MATH = {
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "cot": lambda x: 1.0 / math.tan(x),
    "sec": lambda x: 1.0 / math.cos(x),
    "csc": lambda x: 1.0 / math.sin(x),
    "arcsin": math.asin,
    "arccos": math.acos,
    "arctan": math.atan,
    "ln": math.log,
    "log": math.log,
    "exp": math.exp,
}


class Verdict(enum.Enum):
    EQUAL = "equal"
    DIFFERENT = "different"
    TIMEOUT = "timeout"


def compare(
    given: str,
    truth: str,
    *,
    deadline: float | None = None,
    rel_tol: float = DEFAULT_REL_TOL,
    pool: SympyPool | None = None,
) -> Verdict:
    """Compare two answer strings; only the sympy step waits, and never past `deadline`.

    `deadline` is a `time.monotonic()` value (default: DEFAULT_TIMEOUT_S from now).
    """
    if deadline is None:
        deadline = deadline_after(DEFAULT_TIMEOUT_S)
    given_text, truth_text = normalize(given), normalize(truth)
    if given_text is None or truth_text is None or not given_text:
        return Verdict.DIFFERENT
    if squash(given_text) == squash(truth_text):
        return Verdict.EQUAL
    given_items, truth_items = parse(given_text), parse(truth_text)
    if given_items is None or truth_items is None or len(given_items) != len(truth_items):
        return Verdict.DIFFERENT
    undecided = []
    for a, b in zip(given_items, truth_items, strict=True):
        verdict = numeric_verdict(a, b, rel_tol)
        if verdict is Verdict.DIFFERENT:
            return verdict
        if verdict is None:
            undecided.append((a, b))
    for a, b in undecided:
        proven = (pool or default_pool()).equal(a, b, deadline)
        if proven is None:
            return Verdict.TIMEOUT
        if not proven:
            return Verdict.DIFFERENT
    return Verdict.EQUAL


@functools.lru_cache(maxsize=16384)
def numeric_verdict(a: Node, b: Node, rel_tol: float = DEFAULT_REL_TOL) -> Verdict | None:
    """EQUAL / DIFFERENT when floats settle it, None when sympy has to (variables agree so far)."""
    symbols = sorted(free_symbols(a) | free_symbols(b))
    if not symbols:
        try:
            return Verdict.EQUAL if _close(evaluate(a, {}), evaluate(b, {}), rel_tol) else Verdict.DIFFERENT
        except (ArithmeticError, ValueError, RecursionError):
            return Verdict.DIFFERENT
    for shift in range(len(_POINTS)):
        env = {name: _POINTS[(shift + k) % len(_POINTS)] * (k + 1) for k, name in enumerate(symbols)}
        try:
            left, right = evaluate(a, env), evaluate(b, env)
        except (ArithmeticError, ValueError, RecursionError):
            continue
        if not _close(left, right, rel_tol):
            return Verdict.DIFFERENT
    return None


_BINARY: dict[str, Callable[[float, float], float]] = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
    "pow": math.pow,
}
"""The two-operand nodes, by kind: one table instead of a branch each."""


def evaluate(node: Node, env: dict[str, float]) -> float:
    """Real value of a tree; raises ArithmeticError / ValueError outside the reals or on overflow."""
    value = _value(node, env)
    if not math.isfinite(value):
        raise OverflowError("not finite")
    return value


def _value(node: Node, env: dict[str, float]) -> float:
    kind = node[0]
    if kind == "num":
        return float(node[1])
    if kind == "sym":
        return env[node[1]]
    if kind == "pi":
        return math.pi
    if kind == "neg":
        return -evaluate(node[1], env)
    if kind == "sqrt":
        return math.sqrt(evaluate(node[1], env))
    if kind == "root":
        return _root(evaluate(node[2], env), evaluate(node[1], env))
    if kind == "fn":
        return _MATH[node[1]](evaluate(node[2], env))
    binary = _BINARY.get(kind)
    if binary is None:
        raise ValueError(f"unknown node {kind!r}")
    return binary(evaluate(node[1], env), evaluate(node[2], env))


def _root(value: float, index: float) -> float:
    if index == 0:
        raise ZeroDivisionError("zeroth root")
    if value < 0 and float(index).is_integer() and int(index) % 2 == 1:
        return -math.pow(-value, 1.0 / index)
    return math.pow(value, 1.0 / index)


def _close(a: float, b: float, rel_tol: float) -> bool:
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=_ABS_TOL)


def deadline_after(seconds: float) -> float:
    """A deadline for `compare` such that grading one answer ends within `seconds` from now.

    Part of the bound is kept back for what follows the wait on sympy: scoring, returning, and
    first getting the interpreter back. With verl's executor threads competing for the lock (and
    the two cores), a thread woken at its deadline waited up to 76 ms for it (8 threads,
    benchmarks/rewards_bench.py --time-bound); so 5% of the bound is kept, and at least RESERVE_S.
    """
    return time.monotonic() + max(0.0, seconds - reserve_for(seconds))


def reserve_for(seconds: float) -> float:
    """How much of a time bound is kept back from the waiting itself."""
    return max(RESERVE_S, RESERVE_FRACTION * seconds)
