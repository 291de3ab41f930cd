r"""geo3k reward as the geo3k Ascend recipe scored it: verl's own geo3k rule, with a time bound.

The geo3k Ascend recipe used verl's built-in scorer (`verl.utils.reward_score.geo3k`):

    score = (1 - format_score) * acc + format_score * format          format_score = 0.1
    acc    = mathruler.grader.grade_answer(extract_boxed_content(response), ground_truth)
    format = re.fullmatch(r"<think>.*</think>.*\\boxed\{.*\}.*", response, re.DOTALL)

This module computes exactly that. mathruler's grader settles most answers by comparing
normalised text, and calls `sympy.simplify` (no time bound) only for the rest; verl calls rewards
from executor threads, where a hung call cannot be stopped. So the grade runs in two places:
mathruler's own `grade_answer` runs here with its sympy step replaced by a signal that sympy is
needed (a private copy of the module, so nothing else in the process is affected); the answers it
cannot settle that way are graded again, whole, by mathruler in a `sympy_worker` process
(`sympy_pool`), which is stopped at the deadline. The only difference from verl's score: an
answer mathruler has not graded within `timeout_s` counts as wrong (`"timeout": 1`). The format
check is verl's regular expression rewritten with `str.find` (same answers, linear time).

verl's scorer returns a float, which verl's reward manager records as the metric `acc`; so `acc`
here is the score too, and `val-core/hiyouga/geometry3k/acc/mean@N` curves read as published geo3k
runs do. The answer alone is `correct`.

kwargs (`reward.kwargs`): `format_score` 0.1 and `use_boxed` True (verl's), `timeout_s` 2.0 per
answer, and `sympy_workers` 4 (size of the worker pool, first call in a process only). The first
call in a process also waits, outside that bound, for the worker pool to start (about a second).
Result: {"score", "acc", "correct", "format", "timeout"}.

`geo3k_lenient` is the other geo3k scorer (equal values written differently count as equal);
docs/benchmarks/rewards.md lists where the two disagree. Loadable by file path (absolute imports,
no classes).
"""

from __future__ import annotations

import importlib.util
import logging
import re
import threading
from typing import Any

from grpo_trainer.rewards.batching import rows
from grpo_trainer.rewards.equivalence import DEFAULT_TIMEOUT_S, deadline_after
from grpo_trainer.rewards.options import bool_option, float_option, int_option
from grpo_trainer.rewards.responses import BOXED, as_text
from grpo_trainer.rewards.sympy_pool import DEFAULT_WORKERS, SympyPool, default_pool

DEFAULT_FORMAT_SCORE = 0.1
SCORE_RANGE = (0.0, 1.0)
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
KEYS = ("score", "acc", "correct", "format", "timeout")
STARTUP_TIMEOUT_S = 60.0

log = logging.getLogger(__name__)


def format_reward(text: str, think_opened_in_prompt: bool = False) -> float:
    r"""1.0 when `text` fully matches verl's `<think>.*</think>.*\\boxed\{.*\}.*` (DOTALL), else 0.0.

    Written with `str.find` rather than the regex: same answer, but linear time (the regex
    backtracks over every `</think>` in a long response). `think_opened_in_prompt` (geo3k-lenient
    only) accepts a response without the leading `<think>`.
    """
    if text.startswith(THINK_OPEN):
        start = len(THINK_OPEN)
    elif think_opened_in_prompt:
        start = 0
    else:
        return 0.0
    close = text.find(THINK_CLOSE, start)
    if close < 0:
        return 0.0
    box = text.find(BOXED, close + len(THINK_CLOSE))
    if box < 0:
        return 0.0
    return 1.0 if text.find("}", box + len(BOXED)) >= 0 else 0.0


def compute_score(
    data_source: Any,
    solution_str: Any,
    ground_truth: Any,
    extra_info: Any = None,
    **kwargs: Any,
) -> dict[str, float]:
    """Score one response (verl's per-sample reward contract). Never raises for a response."""
    _require_mathruler()
    text, truth = as_text(solution_str), as_text(ground_truth)
    weight = float_option(kwargs, "format_score", DEFAULT_FORMAT_SCORE)
    use_boxed = bool_option(kwargs, "use_boxed", True)
    timeout_s = float_option(kwargs, "timeout_s", DEFAULT_TIMEOUT_S)
    deadline = deadline_after(timeout_s)
    try:
        verdict = grade_without_sympy(text, truth, use_boxed)
        if verdict is None:
            pool, started = _ready_pool(int_option(kwargs, "sympy_workers", DEFAULT_WORKERS))
            if started:  # this call waited for the pool to start: that is not the answer's time
                deadline = deadline_after(timeout_s)
            verdict = pool.mathruler_equal(text, truth, deadline, use_boxed)
    except Exception:  # a reward must never stop training; see the log for the cause
        log.exception("geo3k reward failed; counting the answer as wrong")
        verdict = None
    correct = 1.0 if verdict is True else 0.0
    fmt = format_reward(text)
    score = (1.0 - weight) * correct + weight * fmt
    return {
        "score": score,
        "acc": score,
        "correct": correct,
        "format": fmt,
        "timeout": float(verdict is None),
    }


def compute_score_batch(
    data_sources: list[Any],
    solution_strs: list[Any],
    ground_truths: list[Any],
    extra_infos: list[Any] | None = None,
    **kwargs: Any,
) -> list[dict[str, float]]:
    """Score many responses (the batch contract); each answer keeps its own time bound."""
    return [
        compute_score(source, solution, truth, info, **kwargs)
        for source, solution, truth, info in rows(data_sources, solution_strs, ground_truths, extra_infos)
    ]


class _SympyNeededError(Exception):
    """Raised where mathruler would call sympy: this answer is graded in a worker process."""


def _sympy_needed(ground_truth: str, given: str) -> bool:
    """mathruler's `are_equal_under_sympy`, where it needs no sympy: two integer literals are equal
    exactly when their values are (sympy's answer for them); anything else goes to a worker."""
    if _INTEGER.fullmatch(ground_truth) and _INTEGER.fullmatch(given):
        return int(ground_truth) == int(given)
    raise _SympyNeededError


_SYMPY_CHECK = "are_equal_under_sympy"
"""mathruler.grader's sympy comparison, which the private copy of the grader gets in place of its own."""
_grader: Any = None
_grader_lock = threading.Lock()
_IN_PROCESS_MAX_CHARS = 512
_INTEGER = re.compile(r"-?\d{1,300}", re.ASCII)


def grade_without_sympy(response: str, truth: str, use_boxed: bool = True) -> bool | None:
    """mathruler's grade when it settles without sympy; None when sympy (or a long answer) decides."""
    grader = _mathruler_without_sympy()
    given = grader.extract_boxed_content(response) if use_boxed else response
    if len(given) > _IN_PROCESS_MAX_CHARS or len(truth) > _IN_PROCESS_MAX_CHARS:
        return None  # long text: its normalisation is the worker's, within the bound
    try:
        return bool(grader.grade_answer(given, truth))
    except _SympyNeededError:
        return None


def _mathruler_without_sympy() -> Any:
    """A private copy of mathruler.grader whose sympy step raises _SympyNeededError instead of running."""
    global _grader
    if _grader is not None:
        return _grader
    with _grader_lock:
        if _grader is None:
            import importlib.util

            source = importlib.util.find_spec("mathruler.grader")
            origin = source.origin if source is not None else None
            name = "mathruler._grpo_grader_without_sympy"
            spec = importlib.util.spec_from_file_location(name, origin) if origin else None
            if spec is None or spec.loader is None:
                raise ImportError("mathruler.grader cannot be loaded")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            setattr(module, _SYMPY_CHECK, _sympy_needed)
            _grader = module
    return _grader


_checked = False
_warm: set[int] = set()
_warm_lock = threading.Lock()


def _ready_pool(workers: int) -> tuple[SympyPool, bool]:
    """(the process's worker pool, started and answering; whether this call waited for that).

    Its start-up (importing sympy and mathruler, a second or two, once per process) is not charged
    to the first answers' time bound."""
    pool = default_pool(workers)
    if id(pool) in _warm:
        return pool, False
    with _warm_lock:
        if id(pool) not in _warm:
            if not pool.warm_up(STARTUP_TIMEOUT_S):
                log.error("the geo3k grading worker did not start within %.0f s", STARTUP_TIMEOUT_S)
            _warm.add(id(pool))
    return pool, True


def _require_mathruler() -> None:
    """mathruler is the geo3k Ascend recipe's grader: without it every answer would silently count as wrong."""
    global _checked
    if _checked:
        return
    if importlib.util.find_spec("mathruler") is None:
        raise ImportError(
            "the geo3k reward needs mathruler (verl's geo3k grader): pip install mathruler==0.1.0, "
            "or use reward.builtin: geo3k-lenient"
        )
    _checked = True
