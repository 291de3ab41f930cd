"""`grpo-train run` watches its attempt from a process of its own: exit 0 only for a finished attempt.

Ray reports the entrypoint's exit code, and the operator reads exit 0 as Succeeded. Inside the
attempt's process anything may end it with 0 — the TRL engine trains there, among libraries
that call `os._exit` — and nothing in a process outlives `os._exit` to say otherwise. So the
entrypoint runs the attempt as its child and passes its exit code on, except that an exit 0 counts
only when the job's completion record (`attempt.mark_complete`) says that this attempt went on to
the end: training finished and the export done or not asked for (`attempt.mark_exported`).
Otherwise it is a failure, `ExitedWithoutFinishing`, with one `GRPO_FAILURE` line that names what
is missing, also appended to the attempt's log.

Signals the entrypoint gets (a stopped Ray job, Ctrl-C) are passed on to the attempt; an attempt
killed by a signal ends the entrypoint with the same signal, so Ray reports what it always did.
The attempt's process dies with the entrypoint (Linux's parent-death signal, SIGKILL): an
entrypoint killed outright would otherwise leave its attempt training, unseen, and writing the
job's folder beside the next attempt (seen on the real node: the orphan went on to save on the
old pods' stop).

A planned stop (`stopping.py`): before the attempt starts, a stop request or exit record left by an
earlier run of the same attempt is removed; while it runs, the supervisor's heartbeat says it
lives; once it has ended, however it ended, the exit record says so, which is what the stopping
pods' hooks wait for (or for the heartbeat to stop, should the supervisor itself be killed).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Sequence

from grpo_operator.api.contract import OK, UNKNOWN, Failure
from grpo_operator.api.v1alpha1 import ResolvedJob

from .attempt import fail, log_file, unfinished
from .spec import Attempt
from .stopping import AttemptFiles

ATTEMPT_PROCESS_FLAG = "--attempt-process"
"""`grpo-train run` with this flag runs the attempt itself: what the supervisor starts."""
SUPERVISOR_PID_ENV = "GRPO_SUPERVISOR_PID"
_CHILD = (
    "import os, sys; from grpo_trainer.supervisor import die_with_parent; "
    f"die_with_parent(os.environ.get({SUPERVISOR_PID_ENV!r})); "
    "from grpo_trainer.cli import main; sys.exit(main())"
)
_PR_SET_PDEATHSIG = 1
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def supervise(argv: Sequence[str], job: ResolvedJob, attempt: Attempt) -> int:
    """Run `grpo-train run argv` as a child and return what the attempt really achieved."""
    files = AttemptFiles(attempt.metrics_file)
    files.clear_stale()
    env = {**os.environ, SUPERVISOR_PID_ENV: str(os.getpid())}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, *argv, ATTEMPT_PROCESS_FLAG], env=env)
    beating = files.beating()

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in _FORWARDED}
    try:
        code = child.wait()
    finally:
        beating.set()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if code < 0:  # killed by a signal: end the same way, so Ray sees what it saw before
        files.write_exit(128 - code)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP have no handler to reset
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    if code == OK:
        code = judge_exit_0(job, attempt)
    files.write_exit(code)
    return code


def die_with_parent(expected: str | None) -> None:
    """SIGKILL this process when its parent ends; end now if the parent `expected` (its pid) has
    ended already (the request is made after the fork, so that race is checked). A no-op where
    prctl is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):
        return
    if expected and expected.isdigit() and os.getppid() != int(expected):
        os._exit(128 + signal.SIGKILL)


def judge_exit_0(job: ResolvedJob, attempt: Attempt) -> int:
    """OK when the completion record shows this attempt finished; else the failure that says why."""
    missing = unfinished(job, attempt.number)
    if missing is None:
        return OK
    failure = Failure(
        UNKNOWN,
        "ExitedWithoutFinishing",
        f"attempt {attempt.number} exited with code 0 but {missing}: something ended its process early",
    )
    with contextlib.suppress(OSError), open(log_file(job, attempt), "a", encoding="utf-8") as out:
        out.write(failure.line() + "\n")
    return fail(failure)
