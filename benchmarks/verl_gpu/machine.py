"""The GPU machine's side of every verb: where attempts live, its log lines, its age and its GPUs."""

from __future__ import annotations

import importlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any

WORK = Path("/tmp/verl-gpu-work")
"""Every part's model, data, job folder and attempts (kept while the machine is up)."""


def log(message: str) -> None:
    print(f"[verl-gpu {time.strftime('%H:%M:%S')}] {message}", flush=True)


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, default=str) + "\n")


MACHINE_HOLD_MIN = 30.0
"""A lent machine goes back after this many minutes held, whatever the device time charged for
them (which runs slower while the lease `counts` only part of the held time)."""


HELD_BEFORE_BOOT_MIN = 1.1
"""How much longer a machine has been held than it has been up: the lease starts before the boot.
Read on two machines of 2026-12-05: the first reply's `held_s` was 91 s with an uptime of 29 s,
and `start` printed 3.6 and 3.7 minutes up at 4.6 and 4.8 minutes held."""


def machine_minutes(uptime: Path = Path("/proc/uptime")) -> float:
    """Minutes since the machine booted; it has been held about HELD_BEFORE_BOOT_MIN longer (the
    device tool's `held_s` says, but a lost call never returns it)."""
    return round(float(uptime.read_text().split()[0]) / 60, 1)


def gpu_facts() -> dict[str, Any]:
    try:
        query = "name,memory.total,driver_version"
        text = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        text = "no nvidia-smi"
    versions = {}
    for name in ("torch", "vllm", "verl", "ray", "transformers"):
        try:
            versions[name] = importlib.import_module(name).__version__
        except Exception:
            versions[name] = None
    return {"gpus": text.splitlines(), "versions": versions}


def log_machine_age() -> None:
    """How long this machine has been held against the 30 minutes it may be: the next call's plan
    (another `wait`, or a pair that needs ~10 minutes) depends on it."""
    up = machine_minutes()
    held = up + HELD_BEFORE_BOOT_MIN
    log(
        f"machine up {up:.1f} min, held about {held:.1f}; it goes back at {MACHINE_HOLD_MIN:.0f} min held, "
        f"{MACHINE_HOLD_MIN - held:.1f} left"
    )
