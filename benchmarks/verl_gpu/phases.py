"""The start-up's phases: the marks in an attempt's output, stamped with its seconds."""

from __future__ import annotations

import re
from pathlib import Path

FIRST_STEP = re.compile(r"step:\d+ - ")
"""verl's line at the end of a step: the start-up's sampling stops at the first."""

PHASES = (
    # (phase, the first output line that ends it), in the order start-up passes them
    ("trainer", re.compile(r"engine command:")),
    ("engine_process", re.compile(r"ray init kwargs")),
    ("ray", re.compile(r"Started a local Ray instance|Connected to Ray cluster")),
    ("data", re.compile(r"train and validate dataloader initialized")),
    ("actor_and_reference", re.compile(r"actor and ref model engine initialized")),
    ("rollout_server", re.compile(r"checkpoint engine manager initialized")),
    ("first_step", re.compile(r"step:\d+ - ")),
)
"""Marks in an attempt's output, in the order start-up passes them (a raw main_ppo run has no
"engine command" line: its first phase is then empty)."""
STAMP = re.compile(r"^\[\s*([\d.]+)s\] ")
STARTUP_END = "rollout_server"
"""The last phase before step 1: by its mark the compile caches a retry reuses are written."""
STARTED = dict(PHASES)[STARTUP_END]


def phases(log_file: Path) -> dict[str, float | None]:
    """Seconds from the attempt's start to the first line of each phase's mark."""
    found: dict[str, float | None] = {name: None for name, _ in PHASES}
    if not log_file.is_file():
        return found
    for line in log_file.read_text(errors="replace").splitlines():
        stamp = STAMP.match(line)
        if not stamp:
            continue
        for name, mark in PHASES:
            if found[name] is None and mark.search(line):
                found[name] = float(stamp.group(1))
    return found


STEP_END = re.compile(r"^\[\s*([\d.]+)s\] .*?step:(\d+) - ")
