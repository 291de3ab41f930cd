"""Training curves from a job's status history: a PNG for people and a chart for the terminal.

The status keeps a bounded, downsampled history of the run (`status.history`: a line of numbers
per series, step, reward, validation score, response length, read back by `history_points`); that is enough to see whether a job learns without any
dashboard. The terminal chart is plain text (no colours, no terminal size detection), so it reads
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
    ("reward", "reward"),
    ("valScore", "validation score"),
    ("responseLength", "response length"),
)


@dataclass(frozen=True)
class Curve:
    name: str
    steps: list[int]
    values: list[float]


def curves(history: Sequence[dict[str, Any]]) -> list[Curve]:
    """The series present in a status history (wire form: camelCase keys), each in step order."""
    points = sorted((p for p in history if isinstance(p.get("step"), int)), key=lambda p: p["step"])
    found = []
    for key, name in SERIES:
        pairs = [(p["step"], float(p[key])) for p in points if _finite(p.get(key))]
        if pairs:
            found.append(Curve(name, [s for s, _ in pairs], [v for _, v in pairs]))
    return found


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def terminal_chart(curve: Curve, *, width: int = 60, height: int = 10) -> str:
    """`curve` as rows of text: a y axis with its range, one column per bucket of steps."""
    if not curve.values:
        return f"{curve.name}: no points yet"
    low, high = min(curve.values), max(curve.values)
    if low == high:
        return f"{curve.name}: {low:.4g} at every step ({curve.steps[0]} .. {curve.steps[-1]})"
    span = high - low or 1.0
    columns = min(width, len(curve.values))
    buckets = [
        curve.values[len(curve.values) * i // columns : len(curve.values) * (i + 1) // columns]
        for i in range(columns)
    ]
    levels = [round((sum(b) / len(b) - low) / span * (height - 1)) for b in buckets]
    rows = []
    for row in range(height - 1, -1, -1):
        label = f"{low + span * row / (height - 1):>8.3g} |" if row in (0, height - 1) else "         |"
        rows.append(label + "".join("*" if level == row else " " for level in levels))
    rows.append("         +" + "-" * columns)
    recent = curve.values[-10:]
    rows.append(
        f"          step {curve.steps[0]} .. {curve.steps[-1]}   {curve.name}: last {curve.values[-1]:.3g}, "
        f"mean of the last {len(recent)} {sum(recent) / len(recent):.3g}"
    )
    return "\n".join(rows)


def write_png(found: Sequence[Curve], path: str | Path, title: str) -> Path:
    """One panel per series, sharing the step axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    target = Path(path)
    figure, axes = plt.subplots(len(found), 1, figsize=(7, 2.4 * len(found)), sharex=True, squeeze=False)
    for axis, curve in zip(axes[:, 0], found, strict=True):
        axis.plot(curve.steps, curve.values, marker="." if len(curve.steps) < 40 else None)
        axis.set_ylabel(curve.name)
        axis.grid(alpha=0.3)
        if min(curve.values) == max(curve.values):
            # A flat series: a readable axis around it (matplotlib would zoom into +-4 %) and its value.
            value = curve.values[0]
            margin = max(abs(value), 1.0)
            axis.set_ylim(value - margin, value + margin)
            axis.annotate(f"{value:g} at every step", (0.01, 0.85), xycoords="axes fraction")
    axes[-1, 0].set_xlabel("step")
    figure.suptitle(title)
    figure.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(target, dpi=110)
    plt.close(figure)
    return target


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
        print(terminal_chart(curve))
        print()
    if args.png:
        print(f"curves: {write_png(found, args.png, name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
