"""Call a user's reward function in worker processes, never waiting past a deadline.

`SandboxPool(path, name)` keeps up to `size` `sandbox_worker` processes that have imported the
user's file. `call(args, kwargs, deadline)` sends one call to an idle worker and returns an
`Outcome`: the value, or why there is none — "error" (the function raised, `SystemExit`
included), "crash" (the process died: `os._exit`, a segfault, out of memory), "timeout" (no answer
by the deadline: the worker is killed and a fresh one started at once, so the next call does not
pay for the import). Every thread of the process may call at the same time.

Each worker leads a process group of its own, and every way a worker ends kills the whole group:
a process the user's function starts (a helper server, a forked sleeper) dies with the worker
that started it, when the pool retires or closes it, and when the trainer itself is gone (the
worker's watchdog, `sandbox_worker._watch_parent`). A process that leaves the group on purpose
(`setsid`) is the one thing this does not reach.

A file that cannot be imported, or has no such function, raises `RewardLoadError` from `start`,
with the file's own error: that is a configuration problem and should stop the run.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import pickle
import queue
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WORKER_FILE = Path(__file__).with_name("sandbox_worker.py")
DEFAULT_WORKERS = 4
START_TIMEOUT_S = 300.0
_HEADER = struct.Struct(">I")

log = logging.getLogger(__name__)


class RewardLoadError(RuntimeError):
    """The user's reward file cannot be imported, or lacks the function."""


@dataclass(frozen=True)
class Outcome:
    ok: bool
    value: Any = None
    failure: str = ""
    """"error", "crash" or "timeout" when not ok."""
    message: str = ""


class _Worker:
    """One worker process and the bytes read from it so far."""

    def __init__(self, path: str, name: str, memory_mb: int) -> None:
        command = [sys.executable, "-P", "-u", str(WORKER_FILE), "--file", path, "--function", name]
        if memory_mb > 0:
            command += ["--max-memory-mb", str(memory_mb)]
        # process_group=0: the worker leads a group of its own, which `kill` ends as a whole.
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            close_fds=True,
            process_group=0,
        )
        self.buffer = bytearray()
        self.kind: str | None = None
        self.claimed = False
        """A caller is waiting for this still-starting worker."""

    def send(self, message: Any) -> bool:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(_HEADER.pack(len(data)) + data)
            self.proc.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def receive(self, deadline: float) -> tuple[str, Any]:
        """("ok", message), ("timeout", None) or ("crash", None)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            if len(self.buffer) >= _HEADER.size:
                size = _HEADER.unpack(self.buffer[: _HEADER.size])[0]
                end = _HEADER.size + size
                if len(self.buffer) >= end:
                    body = bytes(self.buffer[_HEADER.size : end])
                    del self.buffer[:end]
                    try:
                        return "ok", pickle.loads(body)
                    except Exception:
                        return "crash", None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout", None
            try:
                ready, _, _ = select.select([fd], [], [], min(remaining, 3600.0))
                if not ready:
                    return "timeout", None
                chunk = os.read(fd, 1 << 20)
            except (OSError, ValueError):
                return "crash", None
            if not chunk:
                return "crash", None
            self.buffer.extend(chunk)

    def kill(self) -> None:
        """End the worker and every process of its group (the user's function's children).

        The group is signalled before the worker is reaped: until then its id cannot be reused.
        """
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError, ValueError):
                if stream is not None:
                    stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            self.proc.wait(timeout=5)


class SandboxPool:
    """Up to `size` worker processes running the function `name` of the file `path`."""

    def __init__(self, path: str, name: str, size: int = DEFAULT_WORKERS, memory_mb: int = 0) -> None:
        self.path, self.name = path, name
        self.size = max(1, size)
        self.memory_mb = memory_mb
        self.kind: str | None = None
        self.timeouts = 0
        self.crashes = 0
        self._cond = threading.Condition()
        self._start_lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._starting: list[_Worker] = []
        self._busy = 0
        self._closed = False
        self._pid = os.getpid()
        _POOLS.add(self)

    def start(self, timeout_s: float = START_TIMEOUT_S) -> str:
        """Start the workers and wait for one to load the file; returns "batch" or "sample".

        Every thread may call it; the first waits for the import, the others for the first.
        """
        if self.kind is not None:
            return self.kind
        with self._start_lock:
            if self.kind is not None:
                return self.kind
            with self._cond:
                while len(self._idle) + len(self._starting) + self._busy < self.size:
                    self._starting.append(_Worker(self.path, self.name, self.memory_mb))
                first = next((w for w in self._starting if not w.claimed), None)
                if first is None:
                    raise RewardLoadError(f"reward file {self.path!r}: no worker to start")
                first.claimed = True
            state = self._await_ready(first, time.monotonic() + timeout_s)
            if state == "pending":
                raise RewardLoadError(f"reward file {self.path!r}: not loaded within {timeout_s:.0f} s")
            if state == "failed" or self.kind is None:
                raise RewardLoadError(f"reward file {self.path!r}: the worker exited while importing it")
            return self.kind

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any], deadline: float) -> Outcome:
        worker = self._checkout(deadline)
        if worker is None:
            self.timeouts += 1
            return Outcome(False, failure="timeout", message="no worker was free before the deadline")
        if not worker.send({"args": list(args), "kwargs": kwargs}):
            self._retire(worker)
            self.crashes += 1
            return Outcome(False, failure="crash", message="the worker process is gone")
        status, reply = worker.receive(deadline)
        if status != "ok" or not isinstance(reply, dict):
            self._retire(worker)
            if status == "timeout":
                self.timeouts += 1
                return Outcome(False, failure="timeout", message="no answer before the deadline")
            self.crashes += 1
            code = worker.proc.poll()
            return Outcome(False, failure="crash", message=f"the worker process exited (code {code})")
        self._checkin(worker)
        if reply.get("ok"):
            return Outcome(True, value=reply.get("value"))
        return Outcome(False, failure="error", message=str(reply.get("error", "")))

    def close(self) -> None:
        with self._cond:
            self._closed = True
            workers = [*self._idle, *self._starting]
            self._idle, self._starting = [], []
            self._cond.notify_all()
        for worker in workers:
            worker.kill()

    # --- internals ----------------------------------------------------------------------------

    def _await_ready(self, worker: _Worker, deadline: float) -> str:
        """Read a starting worker's first frame: "ready" (now idle), "pending" or "failed".

        A worker still importing the file at the deadline is left to finish (unclaimed): killing
        it would make a slow import fail forever. RewardLoadError when the file itself is at fault.
        """
        status, hello = worker.receive(deadline)
        with self._cond:
            if status == "timeout":
                worker.claimed = False
                self._cond.notify_all()
                return "pending"
            if worker in self._starting:
                self._starting.remove(worker)
            ready = status == "ok" and isinstance(hello, dict) and hello.get("ready") is True
            if ready and not self._closed:
                worker.kind = str(hello.get("kind"))
                self.kind = self.kind or worker.kind
                self._idle.append(worker)
                self._cond.notify_all()
                return "ready"
        worker.kill()
        if status == "ok" and isinstance(hello, dict) and hello.get("ready") is False:
            raise RewardLoadError(str(hello.get("error") or f"reward file {self.path!r} could not be loaded"))
        return "failed"

    def _checkout(self, deadline: float) -> _Worker | None:
        while True:
            with self._cond:
                self._forked_check()
                waiting = None
                while waiting is None:
                    if self._closed:
                        return None
                    if self._idle:
                        self._busy += 1
                        return self._idle.pop()
                    waiting = next((w for w in self._starting if not w.claimed), None)
                    if waiting is not None:
                        waiting.claimed = True
                        break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    self._cond.wait(min(remaining, 3600.0))
            # A worker still importing the file: wait for it outside the lock, within this deadline.
            try:
                state = self._await_ready(waiting, deadline)
            except RewardLoadError as error:
                log.error("reward file %s no longer loads: %s", self.path, error)
                state = "failed"
            if state == "failed":
                self._replace_later()
            if state != "ready" and time.monotonic() >= deadline:
                return None

    def _checkin(self, worker: _Worker) -> None:
        with self._cond:
            self._busy -= 1
            if self._closed:
                worker.kill()
                return
            self._idle.append(worker)
            self._cond.notify()

    def _retire(self, worker: _Worker) -> None:
        """Kill a worker that timed out or died and start its replacement, off the caller's time."""
        with self._cond:
            self._busy -= 1
        _reaper().put((self, worker))

    def _kill_and_replace(self, worker: _Worker) -> None:
        worker.kill()
        self._replace_later()

    def _replace_later(self) -> None:
        with self._cond:
            if self._closed or len(self._idle) + len(self._starting) + self._busy >= self.size:
                return
            self._starting.append(_Worker(self.path, self.name, self.memory_mb))
            self._cond.notify_all()

    def _forked_check(self) -> None:
        """After a fork the workers belong to the parent: start from nothing (lock held)."""
        if os.getpid() != self._pid:
            self._pid, self._idle, self._starting, self._busy = os.getpid(), [], [], 0


_POOLS: weakref.WeakSet[SandboxPool] = weakref.WeakSet()
_retired: queue.SimpleQueue[tuple[SandboxPool, _Worker]] | None = None
_reaper_lock = threading.Lock()


def _reaper() -> queue.SimpleQueue[tuple[SandboxPool, _Worker]]:
    """One thread per process kills retired workers and starts their replacements."""
    global _retired
    with _reaper_lock:
        if _retired is None:
            _retired = queue.SimpleQueue()
            threading.Thread(
                target=_reap_forever, args=(_retired,), name="reward-sandbox-reaper", daemon=True
            ).start()
        return _retired


def _reap_forever(retired: queue.SimpleQueue[tuple[SandboxPool, _Worker]]) -> None:
    while True:
        pool, worker = retired.get()
        try:
            pool._kill_and_replace(worker)
        except Exception:  # the next call starts a worker itself if this one could not
            log.exception("could not replace a reward worker")


@atexit.register
def _close_all() -> None:
    for pool in list(_POOLS):
        pool.close()
