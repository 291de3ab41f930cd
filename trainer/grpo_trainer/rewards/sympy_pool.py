"""Ask sympy questions with a hard deadline, from any thread, without ever waiting past it.

The work happens in `sympy_worker` processes: one zygote per trainer process (imports sympy once)
forks a worker per connection. Each question carries its remaining budget; the worker interrupts
itself when the budget runs out (a soft timeout: the worker stays usable), and should it fail to
answer by the deadline the pool has the zygote kill it (a hard timeout) and forks a fresh one on
the next question, which costs milliseconds rather than a new sympy import.

One pool per process (`default_pool`): reward functions are free functions that verl calls
directly, so the pool cannot be passed in; it is created on first use, never at import.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

WORKER_FILE = Path(__file__).with_name("sympy_worker.py")
DEFAULT_WORKERS = 4
DEFAULT_MEMORY_MB = 2048
SOFT_MARGIN_S = 0.05  # the worker gives up this much before the parent would kill it
RETRY_AFTER_S = 30.0  # after sympy failed to start, how long symbolic answers go without it

log = logging.getLogger(__name__)


def _read_line(fd: int, buffer: bytearray, deadline: float) -> bytes | None:
    """One line from `fd` (bytes before the newline), or None at the deadline or end of file."""
    while b"\n" not in buffer:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        try:
            ready, _, _ = select.select([fd], [], [], min(remaining, 3600.0))
            if not ready:
                return None
            chunk = os.read(fd, 65536)
        except (OSError, ValueError, OverflowError):
            return None
        if not chunk:
            return None
        buffer.extend(chunk)
    index = buffer.index(b"\n")
    line = bytes(buffer[:index])
    del buffer[: index + 1]
    return line


def socket_address(name: str) -> str:
    """What `socket.connect` / `bind` take: a leading "@" names an abstract socket (a NUL byte)."""
    return "\0" + name[1:] if name.startswith("@") else name


def _new_socket_address() -> tuple[str | None, str]:
    """(folder to remove afterwards, socket address) for the zygote.

    A socket file in a private temporary folder; where no folder can be created (a read-only root
    filesystem without a writable TMPDIR), Linux's abstract socket namespace, which needs none.
    """
    try:
        directory = tempfile.mkdtemp(prefix="grpo-sympy-")
    except OSError:
        if not sys.platform.startswith("linux"):
            raise
        return None, f"@grpo-sympy-{os.getpid()}-{os.urandom(8).hex()}"  # "@": abstract, as ss(8) shows it
    return directory, os.path.join(directory, "zygote.sock")


class _Zygote:
    """The process that imports sympy once and forks workers; killed with the pool."""

    def __init__(self, memory_mb: int) -> None:
        self.directory, self.socket_path = _new_socket_address()
        self.proc = subprocess.Popen(
            # -P: do not put this package's folder first on the zygote's sys.path
            [
                sys.executable,
                "-P",
                "-u",
                str(WORKER_FILE),
                "--socket",
                self.socket_path,
                "--max-memory-mb",
                str(memory_mb),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        self._ready = False
        self._failed = False
        self._ready_lock = threading.Lock()
        self._control_lock = threading.Lock()
        self._buffer = bytearray()

    @property
    def ever_ready(self) -> bool:
        return self._ready

    def alive(self) -> bool:
        return not self._failed and self.proc.poll() is None

    def wait_ready(self, deadline: float) -> bool:
        if self._ready:
            return True
        if not self._ready_lock.acquire(timeout=max(0.0, min(deadline - time.monotonic(), 3600.0))):
            return False
        try:
            if not self._ready and not self._failed and self.proc.stdout is not None:
                line = _read_line(self.proc.stdout.fileno(), self._buffer, deadline)
                self._ready = line == b"ready"
                # Anything but a timeout (end of file, a wrong line) means it will never be ready.
                self._failed = not self._ready and time.monotonic() < deadline
            return self._ready
        finally:
            self._ready_lock.release()

    def connect(self, deadline: float) -> _Worker | None:
        """A freshly forked worker, or None if the zygote is not ready or gone."""
        if not self.wait_ready(deadline):
            return None
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.settimeout(max(0.001, deadline - time.monotonic()))
            connection.connect(socket_address(self.socket_path))
            connection.setblocking(True)
            buffer = bytearray()
            pid_line = _read_line(connection.fileno(), buffer, deadline)
            if pid_line is None or not pid_line.isdigit():
                connection.close()
                return None
            return _Worker(connection, int(pid_line), self, buffer)
        except OSError:
            connection.close()
            return None

    def kill_child(self, pid: int) -> None:
        with self._control_lock, contextlib.suppress(OSError, ValueError):
            assert self.proc.stdin is not None
            self.proc.stdin.write(f"kill {pid}\n".encode())
            self.proc.stdin.flush()

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()  # the zygote kills its workers and exits
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


class _Worker:
    """One forked worker, reached over its own socket connection."""

    def __init__(self, connection: socket.socket, pid: int, zygote: _Zygote, buffer: bytearray) -> None:
        self.connection = connection
        self.pid = pid
        self.zygote = zygote
        self._buffer = buffer

    def ask(self, request: dict[str, Any], deadline: float) -> dict[str, Any] | None:
        """Send one request and wait for its answer until `deadline`; None if none came in time."""
        try:
            self.connection.sendall(json.dumps(request).encode() + b"\n")
        except OSError:
            return None
        line = _read_line(self.connection.fileno(), self._buffer, deadline)
        if line is None:
            return None
        try:
            answer = json.loads(line)
        except ValueError:
            return None
        return answer if isinstance(answer, dict) else None

    def kill(self) -> None:
        self.zygote.kill_child(self.pid)
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.connection.close()


class SympyPool:
    """Up to `size` workers shared by all threads of this process.

    `equal(a, b, deadline)` returns True / False when sympy answered in time and None when it did
    not (timeout, crash, no worker free before the deadline, or sympy cannot be started).
    """

    def __init__(self, size: int = DEFAULT_WORKERS, memory_mb: int = DEFAULT_MEMORY_MB) -> None:
        self.size = max(1, size)
        self.memory_mb = memory_mb
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._alive = 0
        self._zygote: _Zygote | None = None
        self._pid = os.getpid()
        self._closed = False
        self._retry_at = 0.0
        self.soft_timeouts = 0
        self.hard_timeouts = 0

    def start(self) -> None:
        """Start the zygote now without waiting for it, so sympy is imported before it is needed."""
        with self._cond:
            self._zygote_locked()

    def warm_up(self, timeout_s: float = 30.0) -> bool:
        """Start the zygote and wait until a worker has answered once; True if one did."""
        one = ["num", "1"]
        return self.equal(one, one, time.monotonic() + timeout_s) is True

    def equal(self, a: Any, b: Any, deadline: float) -> bool | None:
        return self._ask({"a": a, "b": b}, deadline)

    def mathruler_equal(
        self, response: str, truth: str, deadline: float, use_boxed: bool = True
    ) -> bool | None:
        """verl's geo3k accuracy (mathruler's `grade_answer` on the last box), or None past the deadline."""
        return self._ask(
            {"op": "mathruler", "response": response, "truth": truth, "use_boxed": use_boxed}, deadline
        )

    def _ask(self, request: dict[str, Any], deadline: float) -> bool | None:
        if time.monotonic() >= deadline:
            return None
        worker = self._checkout(deadline)
        if worker is None:
            return None
        budget = deadline - time.monotonic() - SOFT_MARGIN_S
        answer = worker.ask({**request, "budget_s": max(budget, 0.001)}, deadline)
        self._checkin(worker, healthy=answer is not None)
        if answer is None:
            self.hard_timeouts += 1
            return None
        if answer.get("error") == "timeout":
            self.soft_timeouts += 1
        verdict = answer.get("equal")
        return verdict if isinstance(verdict, bool) else None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._alive -= len(idle)
            zygote, self._zygote = self._zygote, None
            self._cond.notify_all()
        for worker in idle:
            worker.close()
        if zygote is not None:
            zygote.close()

    def _zygote_locked(self) -> _Zygote | None:
        """The live zygote, started (again) if needed; call with the lock held."""
        if os.getpid() != self._pid:  # forked: the zygote and workers belong to the parent
            self._pid, self._idle, self._alive, self._zygote = os.getpid(), [], 0, None
        if self._closed:
            return None
        if self._zygote is not None and not self._zygote.alive():
            dead, self._zygote, self._idle, self._alive = self._zygote, None, [], 0
            dead.close()
            if not dead.ever_ready:  # it cannot start here (no sympy?): do not retry on every answer
                self._retry_at = time.monotonic() + RETRY_AFTER_S
                log.warning(
                    "sympy worker exited with code %s before it was ready; symbolic answers count as "
                    "not equal for %.0f s",
                    dead.proc.returncode,
                    RETRY_AFTER_S,
                )
        if self._zygote is None and time.monotonic() >= self._retry_at:
            try:
                self._zygote = _Zygote(self.memory_mb)
            except OSError as error:
                self._retry_at = time.monotonic() + RETRY_AFTER_S
                log.warning("cannot start sympy (%s); symbolic answers count as not equal", error)
        return self._zygote

    def _checkout(self, deadline: float) -> _Worker | None:
        with self._cond:
            while True:
                zygote = self._zygote_locked()
                if zygote is None:
                    return None
                if self._idle:
                    return self._idle.pop()
                if self._alive < self.size:
                    self._alive += 1
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(min(remaining, 3600.0))
        worker = zygote.connect(deadline)  # outside the lock: it may wait for the zygote to be ready
        if worker is None:
            with self._cond:
                self._alive -= 1
                self._cond.notify()
        return worker

    def _checkin(self, worker: _Worker, healthy: bool) -> None:
        if not healthy:
            worker.kill()
        with self._cond:
            if healthy and not self._closed and worker.zygote is self._zygote:
                self._idle.append(worker)
            else:
                if healthy:
                    worker.close()
                if worker.zygote is self._zygote:
                    self._alive -= 1
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
