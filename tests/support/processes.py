"""Finding processes on this host through /proc: the tests' view of what the real Ray head runs.

A job's processes carry its ``GRPO_WORKDIR`` in their environment, and every process of a Ray head
started by hack/cluster-lib.sh carries ``GRPO_RAY_HEAD_OF=<cluster dir>``; Ray's renamed workers
and dashboard modules hide their environment, but stay in the session ``ray start`` led.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie has ended: it only waits to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def cmdline(pid: int) -> bytes:
    """The command line, spaces for NULs; empty for a zombie or a process gone meanwhile."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").strip()
    except OSError:
        return b""


def processes_with_env(entry: str) -> list[int]:
    """Pids whose environment holds ``entry`` (``NAME=value``)."""
    wanted = entry.encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if wanted in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except OSError:  # gone meanwhile, or not ours
            continue
    return found


def processes_in_session(session: int) -> list[int]:
    """Live (not zombie) pids of a session."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if os.getsid(int(proc.name)) == session and cmdline(int(proc.name)):
                found.append(int(proc.name))
        except OSError:  # gone meanwhile
            continue
    return found


def wait_no_processes_with_env(entry: str, timeout: float) -> None:
    """Until no process carries ``entry``; fail with their command lines after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while pids := processes_with_env(entry):
        if time.monotonic() > deadline:
            raise AssertionError(
                f"processes with {entry} still run after {timeout} s: { ({pid: cmdline(pid) for pid in pids}) }"
            )
        time.sleep(0.5)


def processes_with(marker: str) -> list[int]:
    """Live (not zombie) pids whose command line holds `marker` (a test's unique string)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in command and state != "Z":
            found.append(int(entry.name))
    return found


def gone(marker: str, within_s: float = 5.0) -> bool:
    """Whether every process with `marker` in its command line ends within `within_s`."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not processes_with(marker):
            return True
        time.sleep(0.1)
    return False
