"""A few long-lived sympy worker processes with a hard deadline on every question.

Why processes: verl (0.9) runs `compute_score` in an executor thread, where `signal.alarm` is not
available, and a thread stuck in `sympy.simplify` cannot be stopped. A worker that misses its
deadline is killed and replaced at once, so the next question finds a fresh one already importing
sympy. Workers are plain `python sympy_worker.py` children talking JSON lines over pipes: no
pickling, no fork of a threaded parent, no dependence on how the reward module was imported.

One pool per process (`default_pool`): reward functions are free functions that verl calls
directly, so the pool cannot be passed in; it is created on first use, never at import.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

WORKER_FILE = Path(__file__).with_name("sympy_worker.py")
DEFAULT_WORKERS = 2
DEFAULT_MEMORY_MB = 2048

log = logging.getLogger(__name__)


class _Worker:
    """One child process and the bytes it has written that we have not consumed yet."""

    def __init__(self, memory_mb: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-u", str(WORKER_FILE), "--max-memory-mb", str(memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        self._buffer = b""

    def ask(self, request: dict[str, Any], deadline: float) -> dict[str, Any] | None:
        """Send one request and wait for its answer until `deadline`; None if none came in time."""
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                ready, _, _ = select.select([fd], [], [], min(remaining, 3600.0))
            except (OSError, ValueError, OverflowError):
                return None
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            answer = json.loads(line)
        except ValueError:
            return None
        return answer if isinstance(answer, dict) else None

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


class SympyPool:
    """Up to `size` workers shared by all threads of this process.

    `equal(a, b, deadline)` returns True / False when sympy answered in time and None when it did
    not (timeout, crash, no worker free before the deadline, or workers cannot be started).
    """

    def __init__(self, size: int = DEFAULT_WORKERS, memory_mb: int = DEFAULT_MEMORY_MB) -> None:
        self.size = max(1, size)
        self.memory_mb = memory_mb
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._alive = 0
        self._pid = os.getpid()
        self._closed = False
        self.timeouts = 0

    def start(self) -> None:
        """Start all workers now without waiting for them, so sympy is imported before it is needed."""
        with self._cond:
            self._forget_if_forked()
            while not self._closed and self._alive < self.size:
                worker = self._spawn()
                if worker is None:
                    return
                self._idle.append(worker)
            self._cond.notify_all()

    def warm_up(self, timeout_s: float = 30.0) -> bool:
        """Start the workers and wait until each has answered once; True if all did."""
        self.start()
        deadline = time.monotonic() + timeout_s
        workers = []
        for _ in range(self.size):
            worker = self._checkout(deadline)
            if worker is None:
                break
            workers.append(worker)
        ready = len(workers) == self.size
        ping = {"a": ["num", "1"], "b": ["num", "1"]}
        for worker in workers:
            healthy = worker.ask(ping, deadline) is not None
            self._checkin(worker, healthy=healthy)
            ready = ready and healthy
        return ready

    def equal(self, a: Any, b: Any, deadline: float) -> bool | None:
        if time.monotonic() >= deadline:
            return None
        worker = self._checkout(deadline)
        if worker is None:
            return None
        answer = worker.ask({"a": a, "b": b}, deadline)
        self._checkin(worker, healthy=answer is not None)
        if answer is None:
            self.timeouts += 1
            return None
        verdict = answer.get("equal")
        return verdict if isinstance(verdict, bool) else None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._alive -= len(idle)
            self._cond.notify_all()
        for worker in idle:
            worker.kill()

    def _spawn(self) -> _Worker | None:
        try:
            worker = _Worker(self.memory_mb)
        except OSError as error:
            log.warning("cannot start a sympy worker (%s); symbolic answers count as not equal", error)
            return None
        self._alive += 1
        return worker

    def _forget_if_forked(self) -> None:
        """After a fork the children belong to the parent: start our own instead of sharing pipes."""
        if os.getpid() != self._pid:
            self._pid = os.getpid()
            self._idle = []
            self._alive = 0

    def _checkout(self, deadline: float) -> _Worker | None:
        with self._cond:
            self._forget_if_forked()
            while not self._closed:
                if self._idle:
                    return self._idle.pop()
                if self._alive < self.size:
                    return self._spawn()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(min(remaining, 3600.0))
            return None

    def _checkin(self, worker: _Worker, healthy: bool) -> None:
        if not healthy:
            # Killing and starting take milliseconds the caller's deadline has no room for.
            threading.Thread(target=self._replace, args=(worker,), daemon=True).start()
            return
        with self._cond:
            if self._closed:
                self._alive -= 1
                worker.kill()
            else:
                self._idle.append(worker)
            self._cond.notify()

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        with self._cond:
            self._alive -= 1
            replacement = None if self._closed else self._spawn()
            if replacement is not None:
                self._idle.append(replacement)
            self._cond.notify()


_default: SympyPool | None = None
_default_lock = threading.Lock()


def default_pool(size: int = DEFAULT_WORKERS) -> SympyPool:
    """The process-wide pool; `size` only matters for the call that creates it."""
    global _default
    with _default_lock:
        if _default is None:
            _default = SympyPool(size=size)
            atexit.register(_default.close)
        return _default
