"""Detached attempts: each runs under a supervisor in a session of its own, which outlives the call
that started it; `wait` in a later call only reads the attempt's folder.

An attempt's folder (WORK/<part>/attempt-<n>/) holds `command.json` (what runs, its environment),
`pid`, `output.log` (every line of the attempt, stamped with the seconds since it started) and,
once it has ended, `rc`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from grpo_operator.api.contract import metrics_file

from benchmarks import paths

from . import machine
from .machine import log, write_json
from .monitor import HOST_SAMPLE_S, sample_stacks, start_gpu_monitor, watch_host
from .phases import FIRST_STEP, STARTUP_END, phases

PARTS = ("tiny", "shapes-4b", "raw-4b")
"""The parts `start` runs (parts.START has one function for each)."""


@dataclass(frozen=True)
class Attempt:
    part: str
    number: int

    @property
    def folder(self) -> Path:
        return machine.WORK / self.part / folder_name(self.number)

    def rc(self) -> int | None:
        file = self.folder / "rc"
        return int(file.read_text()) if file.is_file() else None

    def pid(self) -> int | None:
        file = self.folder / "pid"
        return int(file.read_text()) if file.is_file() else None

    def running(self) -> bool:
        pid = self.pid()
        if pid is None or self.rc() is not None:
            return False
        return alive(pid)


def folder_name(number: int | str) -> str:
    """An attempt's folder under its part's: the supervisor's, not the trainer's metrics file."""
    return f"attempt-{number}"


def metrics_name(number: int) -> str:
    """The name the trainer gives an attempt's metrics file (the contract's); raw verl's file
    logger writes the same name into the attempt's folder."""
    return PurePosixPath(metrics_file("", number)).name


def attempts(part: str) -> list[Attempt]:
    found = sorted((machine.WORK / part).glob(folder_name("*")), key=lambda p: int(p.name.rpartition("-")[2]))
    return [Attempt(part, int(p.name.rpartition("-")[2])) for p in found]


def launch(attempt: Attempt, command: list[str], env: dict[str, str], *, sample_every: float = 0) -> int:
    """Start `command` under the supervisor, detached; returns the supervisor's pid. With
    `sample_every`, the supervisor samples every Python process's stack that often until the
    first step ends (`stacks.log`)."""
    for other in (a for p in PARTS for a in attempts(p)):
        if other.running():
            raise SystemExit(f"{other.part} attempt {other.number} is still running: wait for it or stop it")
    folder = attempt.folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    write_json(
        folder / "command.json",
        {"command": command, "env": env, "started": time.time(), "sample_every": sample_every},
    )
    supervisor = [sys.executable, "-m", "benchmarks.verl_gpu", "_supervise", str(folder)]
    with open(folder / "supervisor.log", "w") as out:
        process = subprocess.Popen(
            supervisor,
            cwd=paths.REPO,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    (folder / "pid").write_text(str(process.pid))
    log(
        f"{attempt.part} attempt {attempt.number} started (pid {process.pid}); follow it with `wait {attempt.part}`"
    )
    return process.pid


def supervise(folder: Path) -> int:
    """Run the attempt's command to its end: stamped output, its exit code, then Ray stopped."""
    spec = json.loads((folder / "command.json").read_text())
    env = {**os.environ, **spec["env"]}
    started = time.monotonic()
    first_step = threading.Event()
    monitor = start_gpu_monitor(folder / "gpu.log", started)
    ended = threading.Event()
    threading.Thread(
        target=watch_host, args=(folder / "host.log", started, ended, HOST_SAMPLE_S), daemon=True
    ).start()
    with open(folder / "output.log", "w") as out:
        process = subprocess.Popen(
            spec["command"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        (folder / "child-pid").write_text(str(process.pid))
        if spec.get("sample_every"):
            threading.Thread(
                target=sample_stacks,
                args=(folder / "stacks.log", process.pid, float(spec["sample_every"]), started, first_step),
                daemon=True,
            ).start()
        assert process.stdout is not None
        for line in process.stdout:
            out.write(f"[{time.monotonic() - started:8.1f}s] {line}")
            out.flush()
            if not first_step.is_set() and FIRST_STEP.search(line):
                first_step.set()
        code = process.wait()
        first_step.set()
        ended.set()
    if monitor is not None:
        monitor.terminate()
        monitor.wait(timeout=30)
    (folder / "rc").write_text(str(code))
    stop_ray()
    return code


def terminate(attempt: Attempt) -> None:
    """SIGTERM to the attempt's process group, as a pod's stop would send it."""
    child = attempt.folder / "child-pid"
    if child.is_file():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(child.read_text()), signal.SIGTERM)


def stop(part: str) -> int:
    for attempt in attempts(part):
        if attempt.running():
            terminate(attempt)
            log(f"{part} attempt {attempt.number}: stopped")
    stop_ray()
    return 0


def _started(attempt: Attempt) -> bool:
    """Whether the attempt's output shows its start-up over (the rollout server's mark)."""
    return phases(attempt.folder / "output.log")[STARTUP_END] is not None


def stop_attempt(attempt: Attempt, seconds: float = 120) -> None:
    """Stop one attempt, then wait for its supervisor to exit, which is what a `--then` chain
    waits for to start the next one."""
    terminate(attempt)
    deadline = time.monotonic() + seconds
    while attempt.running() and time.monotonic() < deadline:
        time.sleep(1)
    log(f"{attempt.part} attempt {attempt.number}: stopped at the end of its start-up")


def stop_ray() -> None:
    """What a finished or stopped run's local Ray left behind (this machine runs nothing else on Ray)."""
    subprocess.run(
        [sys.executable, "-m", "ray.scripts.scripts", "stop", "--force"],
        capture_output=True,
        timeout=120,
        check=False,
    )


PROGRESS = re.compile(r"step:\d+ |GRPO_FAILURE|Traceback|Error|engine command|exported|training-complete")


def follow(attempt: Attempt, seconds: float, until: re.Pattern[str] | None = None) -> int | None:
    """Print the attempt's progress lines until it ends or `seconds` pass; its exit code, if it ended.

    With `until`, also return (None) at the first output line that matches it."""
    log_file = attempt.folder / "output.log"
    deadline = time.monotonic() + seconds
    position = 0
    while True:
        if log_file.is_file():
            with log_file.open(errors="replace") as text:
                text.seek(position)
                for line in text:
                    reached = until is not None and until.search(line) is not None
                    if reached or (PROGRESS.search(line) and "Warning" not in line):
                        print("    " + line.rstrip()[:240], flush=True)
                    if reached:
                        return None
                position = text.tell()
        code = attempt.rc()
        if code is not None or not attempt.running() or time.monotonic() >= deadline:
            return code
        time.sleep(5)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
