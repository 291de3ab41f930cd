"""What a retry's Python imports cost, package by package, in new processes as a retry starts them.

A retry of a verl attempt pays every process's imports again: main_ppo, the TaskRunner, the actor
worker, the vLLM server's Ray actor and vLLM's engine process each import torch, transformers and
vLLM or verl from scratch (the retry's vLLM server alone spent ~33 s importing vLLM twice). This
script imports the modules those processes import, each in a fresh interpreter with
`-X importtime`, and sums Python's own per-module figures by top-level package, so the packages
that take the time are named rather than guessed:

    python -m benchmarks.import_time [--repeat 2] [--json out.json] [MODULE ...]

Only the first process reads the files from disk, as a pod's first start does; every later one
finds them in the page cache, as a retry on the same node does, and `--repeat` shows the spread. With no modules named, it times the ones a verl attempt's
processes import (`DEFAULT_MODULES`). Needs only the interpreter and what it imports; no GPU is
touched by the imports themselves.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

DEFAULT_MODULES = (
    "torch",
    "transformers",
    "vllm",
    "vllm.v1.engine.async_llm",
    "vllm.entrypoints.openai.api_server",
    "verl.trainer.main_ppo",
    "verl.workers.fsdp_workers",
    "verl.workers.rollout.vllm_rollout.vllm_async_server",
)
"""The modules a verl attempt's processes start with: torch and transformers under everything,
vLLM's engine and server (the vLLM server's Ray actor and its engine process), verl's entry point,
its FSDP workers and its vLLM server."""

LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)\s*$")
"""`-X importtime`'s lines: self microseconds, cumulative microseconds, the module indented by depth."""


def parse(stderr: str) -> list[tuple[str, int, int, int]]:
    """(module, self µs, cumulative µs, depth) for each module the interpreter imported."""
    out = []
    for line in stderr.splitlines():
        found = LINE.match(line)
        if found:
            self_us, cumulative_us, indent, module = found.groups()
            out.append((module, int(self_us), int(cumulative_us), (len(indent) - 1) // 2))
    return out


def by_package(rows: list[tuple[str, int, int, int]]) -> dict[str, float]:
    """Seconds of each top-level package's own import work (the self times of its modules)."""
    total: dict[str, int] = defaultdict(int)
    for module, self_us, _, _ in rows:
        total[module.partition(".")[0]] += self_us
    return {name: round(us / 1e6, 3) for name, us in sorted(total.items(), key=lambda kv: -kv[1])}


def time_import(module: str, python: str = sys.executable) -> dict[str, Any]:
    """Import `module` in a fresh interpreter: its wall time, and where Python says the time went."""
    began = time.perf_counter()
    done = subprocess.run(
        [python, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )
    wall = time.perf_counter() - began
    rows = parse(done.stderr)
    top = next((r for r in reversed(rows) if r[0] == module), None)
    failed = done.returncode != 0
    return {
        "module": module,
        "ok": not failed,
        "error": done.stderr.strip().splitlines()[-1][:300] if failed and done.stderr.strip() else None,
        "wall_s": round(wall, 3),
        "cumulative_s": round(top[2] / 1e6, 3) if top else None,
        "modules": len(rows),
        "packages_s": dict(list(by_package(rows).items())[:12]),
    }


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "load": os.getloadavg(),
        "bytecode_prefix": os.environ.get("PYTHONPYCACHEPREFIX"),
    }


def main(argv: list[str] | None = None) -> int:
    options = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    options.add_argument("modules", nargs="*", default=list(DEFAULT_MODULES))
    options.add_argument(
        "--repeat", type=int, default=2, help="fresh processes per module (first: cold files)"
    )
    options.add_argument("--json", type=Path, help="write the figures here too")
    args = options.parse_args(argv)
    runs: list[dict[str, Any]] = []
    summary = {"machine": machine(), "runs": runs}
    for module in args.modules:
        for n in range(1, args.repeat + 1):
            result = {**time_import(module), "run": n}
            runs.append(result)
            if args.json:  # after every run: a run cut short by its call's limit still leaves its figures
                args.json.parent.mkdir(parents=True, exist_ok=True)
                args.json.write_text(json.dumps(summary, indent=2) + "\n")
            if result["ok"]:
                heaviest = ", ".join(f"{k} {v:.1f}" for k, v in list(result["packages_s"].items())[:5])
                print(f"[import-time] {module} run {n}: {result['wall_s']:.1f} s ({heaviest})", flush=True)
            else:
                print(f"[import-time] {module} run {n}: failed: {result['error']}", flush=True)
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
