"""Training curves from a job's status history: a PNG for people and a chart for the terminal.

The status keeps a bounded, downsampled history of the run (`status.history`: a line of numbers
per series, step, reward, validation score, response length, read back by `history_points`); the
metrics files add entropy and KL. That is enough to see whether a job learns without any
dashboard: the reward with its moving average (and a baseline, such as chance, to beat), its mean
over the last ten steps in the title, a series that never moved said in one line of text. The terminal chart is plain text (no colours, no terminal size detection), so it reads
the same in a CI log, over ssh and in a notebook.

    kubectl get grpojob NAME -o json | python -m grpo_kubectl.drawing --png reward.png
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_operator.api.v1alpha1.status import history_points

SERIES = (
    ("reward", "reward", "mean per response"),
    ("valScore", "validation score", "mean accuracy"),
    ("responseLength", "response length", "tokens"),
    ("entropy", "entropy", "nats per token"),
    ("kl", "KL", "nats per token"),
)
"""Wire key, name and unit of each curve, in drawing order. Entropy and KL come from the metrics
files (`--full`, `--metrics-file`); status.history keeps the first three."""
RECENT = 10
"""The steps of the headline figure: the mean reward of the last ten."""


@dataclass(frozen=True)
class Curve:
    name: str
    steps: list[int]
    values: list[float]
    unit: str = ""

    @property
    def flat(self) -> bool:
        return min(self.values) == max(self.values)

    @property
    def label(self) -> str:
        return f"{self.name} ({self.unit})" if self.unit else self.name

    def in_words(self) -> str:
        """A flat series as one line: its value, unit and steps."""
        unit = f" {self.unit}" if self.unit in ("tokens",) else ""
        return f"{self.name}: {self.values[0]:.4g}{unit} at every step ({self.steps[0]} .. {self.steps[-1]})"


def curves(history: Sequence[dict[str, Any]]) -> list[Curve]:
    """The series present in a status history (wire form: camelCase keys), each in step order."""
    points = sorted((p for p in history if isinstance(p.get("step"), int)), key=lambda p: p["step"])
    found = []
    for key, name, unit in SERIES:
        pairs = [(p["step"], float(p[key])) for p in points if _finite(p.get(key))]
        if pairs:
            found.append(Curve(name, [s for s, _ in pairs], [v for _, v in pairs], unit))
    return found


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def moving_average(values: Sequence[float], window: int) -> list[float]:
    """The mean of each value and the `window - 1` before it (fewer at the start)."""
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value - (values[i - window] if i >= window else 0.0)
        out.append(total / min(i + 1, window))
    return out


def window_for(count: int) -> int:
    """Steps a moving average spans: a tenth of the run, 3 to 25."""
    return max(3, min(25, count // 10))


def headline(found: Sequence[Curve]) -> str:
    """The reward of the last RECENT steps, for the title: the number a person asks for first."""
    reward = next((c for c in found if c.name == "reward"), None)
    if reward is None:
        return ""
    recent = reward.values[-RECENT:]
    return f"reward, mean of the last {len(recent)} steps: {sum(recent) / len(recent):.3g}"


def terminal_chart(
    curve: Curve, *, width: int = 60, height: int = 10, baseline: float | None = None, smooth: bool = False
) -> str:
    """`curve` as rows of text: a y axis with its range, one column per bucket of steps; with
    `smooth`, its moving average as `-` under the points, and a `baseline` as a row of `.`."""
    if not curve.values:
        return f"{curve.name}: no points yet"
    if curve.flat:
        return curve.in_words()
    low, high = min(curve.values), max(curve.values)
    if baseline is not None:  # on the chart, however far from the points
        low, high = min(low, baseline), max(high, baseline)
    span = high - low or 1.0
    columns = min(width, len(curve.values))

    def levels(values: Sequence[float]) -> list[int]:
        buckets = [
            values[len(values) * i // columns : len(values) * (i + 1) // columns] for i in range(columns)
        ]
        return [round((sum(b) / len(b) - low) / span * (height - 1)) for b in buckets]

    points = levels(curve.values)
    average = levels(moving_average(curve.values, window_for(len(curve.values)))) if smooth else []
    line = round((baseline - low) / span * (height - 1)) if baseline is not None else None
    rows = []
    for row in range(height - 1, -1, -1):
        label = f"{low + span * row / (height - 1):>8.3g} |" if row in (0, height - 1) else "         |"
        cells = [
            "*" if points[i] == row else "-" if average and average[i] == row else "." if line == row else " "
            for i in range(columns)
        ]
        rows.append(label + "".join(cells))
    rows.append("         +" + "-" * columns)
    recent = curve.values[-RECENT:]
    rows.append(
        f"          step {curve.steps[0]} .. {curve.steps[-1]}   {curve.label}: last {curve.values[-1]:.3g}, "
        f"mean of the last {len(recent)} {sum(recent) / len(recent):.3g}"
    )
    if smooth:
        rows.append(
            f"          * each step   - mean of {window_for(len(curve.values))} steps"
            + (f"   . baseline {baseline:g}" if baseline is not None else "")
        )
    return "\n".join(rows)


def write_png(found: Sequence[Curve], path: str | Path, title: str, *, baseline: float | None = None) -> Path:
    """The figure of `found` as a PNG at `path`."""
    import matplotlib.pyplot as plt

    target = Path(path)
    drawn = figure(found, title, baseline=baseline)
    target.parent.mkdir(parents=True, exist_ok=True)
    drawn.savefig(target, dpi=110)
    plt.close(drawn)
    return target


def figure(found: Sequence[Curve], title: str, *, baseline: float | None = None) -> Any:
    """One panel per series that moves, sharing the step axis; a flat one is a line of text under
    them. The reward panel has its moving average and the baseline; the title its recent mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    moving = [c for c in found if not c.flat] or list(found[:1])
    flat = [c for c in found if c.flat and c not in moving]
    height = 2.3 * len(moving) + 0.9 + 0.25 * len(flat)
    drawn, axes = plt.subplots(len(moving), 1, figsize=(7.5, height), sharex=True, squeeze=False)
    for axis, curve in zip(axes[:, 0], moving, strict=True):
        if curve.name == "reward":
            _reward_panel(axis, curve, baseline)
        else:
            axis.plot(curve.steps, curve.values, marker="." if len(curve.steps) < 40 else None, color="C0")
        axis.set_ylabel(curve.label, fontsize=9)
        axis.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("step (training steps)")
    drawn.suptitle(f"{title}\n{headline(found)}" if headline(found) else title, fontsize=11)
    bottom = 0.0
    if flat:
        drawn.text(0.02, 0.01, "\n".join(c.in_words() for c in flat), fontsize=9, color="0.3", va="bottom")
        bottom = (0.3 * len(flat) + 0.1) / height
    drawn.tight_layout(rect=(0, bottom, 1, 1))
    return drawn


def _reward_panel(axis: Any, curve: Curve, baseline: float | None) -> None:
    window = window_for(len(curve.values))
    axis.plot(curve.steps, curve.values, color="C0", alpha=0.35, linewidth=1, label="each step")
    axis.plot(
        curve.steps,
        moving_average(curve.values, window),
        color="C0",
        linewidth=2.2,
        label=f"mean of {window} steps",
    )
    if baseline is not None:
        axis.axhline(baseline, color="C3", linestyle="--", linewidth=1.2, label=f"baseline {baseline:g}")
    axis.legend(loc="best", fontsize=8, frameon=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grpo_kubectl.drawing", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "job", nargs="?", default="-", help="a GRPOJob as JSON (kubectl get -o json); - reads stdin"
    )
    parser.add_argument("--png", type=Path, help="also write the curves to this PNG file")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the output quietly
    try:
        text = sys.stdin.read() if args.job == "-" else Path(args.job).read_text(encoding="utf-8")
        job = json.loads(text)
    except (OSError, ValueError) as exc:
        print(f"error: cannot read a GRPOJob as JSON from {args.job}: {exc}", file=sys.stderr)
        return 2
    name = (job.get("metadata") or {}).get("name", "job")
    found = curves(history_points(job.get("status") or {}))
    if not found:
        print(f"{name}: no training history in its status yet")
        return 0
    for curve in found:
        print(terminal_chart(curve, smooth=curve.name == "reward"))
        print()
    if args.png:
        print(f"curves: {write_png(found, args.png, name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
