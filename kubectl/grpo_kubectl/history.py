"""Points for `kubectl grpo plot`: the job's status.history, or every step of its metrics files.

Drawing is drawing.py's (the terminal chart and the PNG); this module only adds the
full-resolution source. The metrics files are read with the trainer's own parser and
folded as the reporter folds them (a retried attempt's steps replace the earlier ones), so the
numbers are the ones the status shows, only more of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from grpo_trainer.progress import TrainingState, parse_line, step_metrics

_WIRE = {
    "reward": "reward",
    "val_score": "valScore",
    "response_length": "responseLength",
    "entropy": "entropy",
    "kl": "kl",
}


def history_from_metrics(lines: Iterable[str]) -> list[dict[str, Any]]:
    """Every step of metrics-file lines, as status.history points (camelCase keys), with the
    step's entropy and KL too (the status keeps no series of them; the files have every step)."""
    state = TrainingState()
    extra: dict[int, dict[str, float]] = {}
    for line in lines:
        parsed = parse_line(line)
        if parsed:
            state.add_line(*parsed)
            values = step_metrics(parsed[1])
            # The newest line of a step is its truth, as the reporter folds them (a retry's).
            extra[state.step] = {_WIRE[k]: values[k] for k in ("entropy", "kl") if k in values}
    return [
        {
            "step": step,
            **{_WIRE[name]: value for name, value in state.history[step].items()},
            **extra.get(step, {}),
        }
        for step in sorted(state.history)
    ]


def steps_in(lines: Iterable[str]) -> int:
    """How many lines are steps' metrics: none in a file of lines means it is no metrics file."""
    return sum(1 for line in lines if parse_line(line))
