"""Where the benchmarks find the repository's files and write their committed results."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
"""The repository root: `python -m benchmarks.<module>` runs from here."""
BENCHMARKS = REPO / "benchmarks"
DATA = REPO / "docs" / "benchmarks" / "data"
"""The committed results the benchmark pages read."""
EXAMPLES = REPO / "examples"
CRDS = REPO / "crds"
CACHE = REPO / ".cache"
"""Git-ignored: downloads made here for the GPU machine, the local cluster's files."""


def shown(path: Path) -> str:
    """`path` as a log line names it: relative to the repository root when it lies under it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)
