"""A job's curves — reward, validation score, response length — as a PNG and in the terminal.

The points come from the job's `status.history` (at most 120, downsampled by the trainer over the
whole run) or, at full resolution, from its metrics files (one line per step, every attempt),
read with the trainer's own parser so the numbers are the ones the status shows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_trainer.report import TrainingState, parse_line

SERIES = (
    ("reward", "reward", "mean reward per step"),
    ("val_score", "validation score", "validation score"),
    ("response_length", "response length", "mean response length (tokens)"),
)


@dataclass
class Curves:
    title: str
    points: dict[str, list[tuple[int, float]]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not any(self.points.values())


def from_history(title: str, history: Iterable[dict[str, Any]]) -> Curves:
    """Points of `status.history` (camelCase, as the API server stores it)."""
    wire = {"reward": "reward", "val_score": "valScore", "response_length": "responseLength"}
    curves = Curves(title, {name: [] for name, _, _ in SERIES})
    for point in history:
        for name, key in wire.items():
            value = point.get(key)
            if isinstance(value, int | float) and math.isfinite(value):
                curves.points[name].append((int(point["step"]), float(value)))
    return curves


def from_metrics(title: str, lines: Iterable[str]) -> Curves:
    """Every step of the metrics files, attempts in order (a retry's steps replace the earlier ones)."""
    state = TrainingState()
    for line in lines:
        parsed = parse_line(line)
        if parsed:
            state.add_line(*parsed)
    curves = Curves(title, {name: [] for name, _, _ in SERIES})
    for step in sorted(state.history):
        for name in curves.points:
            if name in state.history[step]:
                curves.points[name].append((step, state.history[step][name]))
    return curves


def terminal_chart(curves: Curves, width: int = 64, height: int = 8) -> str:
    """One small chart per series, drawn with text: a dot per column, the range on the left."""
    out = [curves.title]
    for name, label, _ in SERIES:
        points = curves.points.get(name) or []
        out.append("")
        if not points:
            out.append(f"{label}: no points yet")
            continue
        steps = [s for s, _ in points]
        values = [v for _, v in points]
        low, high = min(values), max(values)
        span = (high - low) or 1.0
        first, last = steps[0], steps[-1]
        grid = [[" "] * width for _ in range(height)]
        for step, value in points:
            col = 0 if last == first else round((step - first) / (last - first) * (width - 1))
            row = height - 1 - round((value - low) / span * (height - 1))
            grid[row][col] = "•"
        label_width = max(len(_fmt(high)), len(_fmt(low)))
        out.append(f"{label} (last {_fmt(values[-1])} at step {steps[-1]})")
        for index, row in enumerate(grid):
            axis = _fmt(high) if index == 0 else _fmt(low) if index == height - 1 else ""
            out.append(f"{axis:>{label_width}} ┤{''.join(row)}")
        out.append(f"{'':>{label_width}} └{'─' * width}")
        left, right = f"step {first}", f"step {last}"
        out.append(" " * (label_width + 2) + left + right.rjust(width - len(left)))
    return "\n".join(out)


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def save_png(curves: Curves, path: Path) -> Path:
    """Three panels sharing the step axis; matplotlib's Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    for axis, (name, label, description) in zip(axes, SERIES, strict=True):
        points = curves.points.get(name) or []
        if points:
            axis.plot(
                [s for s, _ in points], [v for _, v in points], marker="o" if len(points) < 40 else None
            )
        else:
            axis.text(0.5, 0.5, "no points yet", ha="center", va="center", transform=axis.transAxes)
        axis.set_ylabel(label)
        axis.set_title(description, fontsize=9, loc="left")
        axis.grid(alpha=0.3)
    axes[-1].set_xlabel("step")
    figure.suptitle(curves.title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
