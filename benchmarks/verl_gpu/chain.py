"""`start A --then B`: B starts, with A's options, from a detached process once A has ended; a
`wait` follows the chain's attempts one after the other."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import paths

from .attempts import Attempt, alive, attempts
from .machine import log, write_json

THEN_POLL_S = 5.0
THEN_LIMIT_S = 2 * 3600.0
THEN_REQUEST = "then.json"
"""In the first attempt's folder: the `start` arguments its `--then` runs once it has ended."""
THEN_STARTED = "then-rc"
"""In the first attempt's folder, once its `--then` has tried to start the next part: `start`'s
exit code (a `wait` reads it to know whether there is an attempt to follow on to)."""


def then_argv(argv: list[str], part: str, then: str, attempt: int = 1) -> list[str]:
    """`start PART ... --then THEN`'s command line for THEN: the same options, the other part; or,
    when THEN is PART, its next attempt (a retry of it, started as `--attempt N+1` would)."""
    out: list[str] = []
    skip = False
    replaced = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ("--then", "--attempt"):
            skip = True
            continue
        if arg.startswith(("--then=", "--attempt=")):
            continue
        if arg == part and not replaced:
            out.append(then)
            replaced = True
            continue
        out.append(arg)
    return [*out, "--attempt", str(attempt + 1)] if then == part else out


def start_then(first: Attempt, argv: list[str]) -> int:
    """Start the next part once `first` has ended, from a detached process of its own.

    So a comparison's second run starts the moment the first ends, not when a device call comes
    to start it: a call that waits and then starts can run past the call's limit, and a machine
    left without a call for ~30 s is given back with everything on it.
    """
    folder = first.folder
    write_json(folder / THEN_REQUEST, {"argv": argv})
    with open(folder / "then.log", "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.verl_gpu", "_then", str(folder)],
            cwd=paths.REPO,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    log(f"then: `{' '.join(argv)}` once {first.part} attempt {first.number} has ended (pid {process.pid})")
    return process.pid


def run_then(folder: Path) -> int:
    """The detached side of `--then`: wait for the first attempt's supervisor to exit (its exit
    code written and its Ray stopped), then start the next part as `start` would."""
    argv = json.loads((folder / THEN_REQUEST).read_text())["argv"]
    pid_file = folder / "pid"
    deadline = time.monotonic() + THEN_LIMIT_S
    while time.monotonic() < deadline:
        pid = int(pid_file.read_text()) if pid_file.is_file() else None
        if pid is not None and not alive(pid):
            break
        time.sleep(THEN_POLL_S)
    else:
        log(f"then: gave up after {THEN_LIMIT_S:.0f} s: the first attempt is still running")
        return 1
    rc = folder / "rc"
    ended = rc.read_text().strip() if rc.is_file() else "unknown"
    log(f"then: the first attempt ended (exit code {ended}); `{' '.join(argv)}`")
    from . import cli  # the `start` it runs: cli imports this module

    started = 1
    try:
        started = cli.main(argv)
    except SystemExit as refused:  # `start` refuses with a message: a `wait` must still hear of it
        started = refused.code if isinstance(refused.code, int) else 1
        raise
    finally:
        (folder / THEN_STARTED).write_text(str(started))
    return started


def chained(first: Attempt, deadline: float) -> Attempt | None:
    """The attempt `--then` started after `first` (which has ended), waiting until `deadline` for
    its start; None when `first` chains nothing, or the next one did not start in time.

    So one `wait` call follows a cold attempt and then its retry: a `wait` called in the seconds
    between the two used to find only the ended attempt and return, and the call after it came
    too late for a machine that is given back after 30 s without one.
    """
    request = first.folder / THEN_REQUEST
    if not request.is_file():
        return None
    part = json.loads(request.read_text())["argv"][1]
    marker = first.folder / THEN_STARTED
    while not marker.is_file():
        if time.monotonic() >= deadline:
            return None
        time.sleep(THEN_POLL_S)
    started = marker.read_text().strip()
    if started != "0":
        log(f"then: the next part did not start (exit code {started}; then.log says why)")
        return None
    found = attempts(part)
    return found[-1] if found and found[-1] != first else None
