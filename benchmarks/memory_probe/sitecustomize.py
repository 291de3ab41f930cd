"""Where a Python process's memory sits: tracemalloc in a process started with this folder first on
PYTHONPATH and GRPO_MEMORY_PROBE naming a file (benchmarks/operator_burst.py --memory-probe).

Python imports `sitecustomize` at start-up, so the operator needs no code of its own for this. Only
the process whose command line names `GRPO_MEMORY_PROBE_MODULE` (default `grpo_operator`) traces: the
benchmark's client, which inherits the same environment, does not. On SIGUSR2 the process appends
one report to the file: the traced memory now and at its peak, and the largest allocation sites
grouped by line and by file. A report is written from the main thread between bytecodes, so it
costs the process one pause of about a second per report.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import tracemalloc

_PATH = os.environ.get("GRPO_MEMORY_PROBE")
_MODULE = os.environ.get("GRPO_MEMORY_PROBE_MODULE", "grpo_operator")
FRAMES = 10
"""Frames kept per allocation: enough to see which of our calls a library's allocation serves."""


def _report(signum: int, frame: object) -> None:
    del signum, frame
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [
            tracemalloc.Filter(False, tracemalloc.__file__),
            tracemalloc.Filter(False, "<frozen importlib._bootstrap*>"),
        ]
    )
    current, peak = tracemalloc.get_traced_memory()
    lines = [
        f"## report at {time.strftime('%H:%M:%S')}: traced {current / 2**20:.1f} MiB now, {peak / 2**20:.1f} MiB at peak"
    ]
    for group in ("lineno", "filename"):
        stats = snapshot.statistics(group)
        total = sum(s.size for s in stats)
        lines.append(f"### by {group} (total {total / 2**20:.1f} MiB)")
        for stat in stats[:25]:
            where = stat.traceback[0]
            lines.append(
                f"{stat.size / 2**20:8.2f} MiB {stat.count:9d} blocks  {where.filename}:{where.lineno}"
            )
    lines.append("### the 12 largest call paths, innermost frame first")
    for stat in snapshot.statistics("traceback")[:12]:
        lines.append(f"{stat.size / 2**20:8.2f} MiB {stat.count:9d} blocks")
        lines.extend(f"      {frame.filename}:{frame.lineno}" for frame in stat.traceback)
    with open(_PATH, "a", encoding="utf-8") as out:  # type: ignore[arg-type]
        out.write("\n".join(lines) + "\n\n")


if _PATH and any(_MODULE in arg for arg in getattr(sys, "orig_argv", ())):
    tracemalloc.start(FRAMES)
    signal.signal(signal.SIGUSR2, _report)
