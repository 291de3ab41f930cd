"""What a `wait` writes into --out: each part's summary (its attempts' steps, start-up, host and
failure) and its logs in one archive."""

from __future__ import annotations

import argparse
import json
import tarfile
import time
from pathlib import Path
from typing import Any

from grpo_operator.api.contract import EXPORT_RECORD
from grpo_trainer import metric_keys

from . import machine
from .attempts import Attempt, _started, attempts, follow, metrics_name, stop_attempt
from .chain import chained
from .inputs import ATTENTION, reward_calls
from .jit import jit_builds
from .machine import gpu_facts, log, log_machine_age, write_json
from .monitor import host_extremes
from .phases import STARTED, phases

COMMAND_SUFFIX = ".command.txt"
"""Beside an attempt's metrics file, the engine's command line (engines/verl/engine.py)."""


def metrics(file: Path) -> list[dict[str, Any]]:
    """The steps of a metrics file, read with the trainer's own parser: {"step": N, "data": {...}}."""
    from grpo_trainer.progress import parse_line  # pydantic and YAML: `preflight` may install them

    if not file.is_file():
        return []
    found = (parse_line(line) for line in file.read_text().splitlines())
    return [{"step": step, "data": data} for step, data in filter(None, found)]


def pick(data: dict[str, Any], *prefixes: str) -> dict[str, Any]:
    return {k: v for k, v in sorted(data.items()) if k.startswith(prefixes)}


def metrics_of(attempt: Attempt) -> list[dict[str, Any]]:
    if attempt.part == "raw-4b":
        return metrics(attempt.folder / metrics_name(attempt.number))
    work = machine.WORK / ("shapes-4b" if attempt.part == "shapes-4b" else "tiny")
    return metrics(next(iter((work / "grpo").rglob(metrics_name(attempt.number))), work / "none"))


def attempt_summary(attempt: Attempt) -> dict[str, Any]:
    steps = metrics_of(attempt)
    command = json.loads((attempt.folder / "command.json").read_text())
    command_file = Path(metrics_name(attempt.number)).with_suffix(COMMAND_SUFFIX).name
    engine_command = next(iter((machine.WORK / attempt.part).rglob(command_file)), None)
    host_log = attempt.folder / "host.log"
    return {
        "attempt": attempt.number,
        "exit_code": attempt.rc(),
        "running": attempt.running(),
        "seconds": round(time.time() - command["started"]),
        "startup_s": phases(attempt.folder / "output.log"),
        "host": host_extremes(host_log.read_text()) if host_log.is_file() else {},
        "steps": [m["step"] for m in steps],
        "per_step": [
            {
                "step": m["step"],
                **pick(
                    m["data"],
                    metric_keys.TIMING_PREFIX,
                    metric_keys.PERF_PREFIX,
                    metric_keys.ACTOR_PERF_PREFIX,
                    metric_keys.RESPONSE_LENGTH,
                    metric_keys.PROMPT_LENGTH,
                    metric_keys.REWARD,
                ),
            }
            for m in steps
        ],
        "failure": failure_line(attempt.folder / "output.log"),
        # raw-4b leaves FlashInfer's cache in the home folder, as verl does
        "jit_builds": []
        if attempt.part == "raw-4b"
        else jit_builds(machine.WORK / attempt.part, command["started"]),
        "engine_overrides": (
            engine_command.read_text().split("\n")[3:] if engine_command else command["command"][3:]
        ),
    }


def failure_line(log_file: Path) -> dict[str, Any] | None:
    from grpo_operator.api.contract import failure_in

    return failure_in(log_file.read_text(errors="replace")) if log_file.is_file() else None


def summary(part: str) -> dict[str, Any]:
    work = machine.WORK / ("shapes-4b" if part != "tiny" else "tiny")
    found = {f"attempt_{a.number}": attempt_summary(a) for a in attempts(part)}
    out: dict[str, Any] = {
        "part": part,
        "machine": gpu_facts(),
        "attention": ATTENTION["implementation"],
        "attempts": found,
    }
    if part == "tiny":
        record = next(iter(work.rglob(EXPORT_RECORD)), None)
        out["checkpoints"] = sorted(p.name for p in work.rglob("global_step_*") if p.is_dir())
        out["export"] = json.loads(record.read_text()) if record else None
        out["reward_calls"] = reward_calls(work)
        first, second = found.get("attempt_1", {}), found.get("attempt_2", {})
        out["ok"] = (
            first.get("exit_code") == 0
            and second.get("exit_code") == 0
            and first.get("steps", [])[-1:] == [2]
            and second.get("steps", [])[:1] == [3]
            and second.get("steps", [])[-1:] == [4]
            and bool(out["export"])
            and out["export"].get("step") == 4
        )
    else:
        shapes = work / f"{part}.shapes.json"
        out["shapes"] = json.loads(shapes.read_text()) if shapes.is_file() else None
        out["ok"] = all(a["exit_code"] == 0 and len(a["steps"]) >= 1 for a in found.values()) and bool(found)
    return out


def cmd_wait(args: argparse.Namespace) -> int:
    """Follow the part's newest attempt, and the attempts its `--then` chain starts after it,
    until the chain's last one ends or the time is up."""
    found = attempts(args.part)
    if not found:
        raise SystemExit(f"no {args.part} attempt has been started")
    attempt: Attempt | None = found[-1]
    deadline = time.monotonic() + args.seconds
    log_machine_age()
    followed: list[tuple[Attempt, int | None]] = []
    stopped: set[Attempt] = set()
    while attempt is not None:
        left = max(0.0, deadline - time.monotonic())
        log(f"following {attempt.part} attempt {attempt.number} for up to {left:.0f} s")
        code = follow(attempt, left, STARTED if args.stop_at_startup else None)
        if code is None and args.stop_at_startup and _started(attempt):
            stop_attempt(attempt)
            stopped.add(attempt)
            code = attempt.rc()
        followed.append((attempt, code))
        if code is None and attempt.running():
            break
        attempt = chained(attempt, deadline)
    results = {part: summary(part) for part in dict.fromkeys(a.part for a, _ in followed)}
    for part, result in results.items():
        write_json(args.out / f"{part}-summary.json", result)
        archive_logs(args.out, machine.WORK / part, part)
    last, code = followed[-1]
    if last in stopped:
        state = f"stopped at the end of its start-up, exit code {code}"
    elif code is None and last.running():
        state = "still running"
    else:
        state = f"ended, exit code {code}"
    steps = results[last.part]["attempts"][f"attempt_{last.number}"]["steps"]
    log(f"{last.part} attempt {last.number}: {state}; steps {steps}")
    log_machine_age()
    # An attempt this wait stopped exits as a stopped pod does (not 0), and that is what was asked
    # for: so `wait --stop-at-startup && start ... --attempt N` goes on to the next retry in one call.
    failed = [a for a, c in followed if c not in (0, None) and a not in stopped]
    return 1 if failed else 0


def archive_logs(out: Path, work: Path, name: str) -> None:
    """The run logs, metrics and commands in one file (the device tool returns at most 8)."""
    with tarfile.open(out / f"{name}-logs.tar.gz", "w:gz") as tar:
        for path in sorted(work.rglob("*")):
            if path.is_file() and path.suffix in {".log", ".jsonl", ".txt", ".yaml", ".json"}:
                tar.add(path, arcname=str(path.relative_to(work)))
