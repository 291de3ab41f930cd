"""Call a user's reward function in worker processes, never waiting past a deadline.

`SandboxPool(path, name)` keeps up to `size` `sandbox_worker` processes that have imported the
user's file. `call(args, kwargs, deadline)` sends one call to an idle worker and returns an
`Outcome`: the value, or why there is none — "error" (the function raised, `SystemExit`
included), "result" (it returned something a reward cannot: see below), "crash" (the process
died: `os._exit`, a segfault, out of memory, or a reply that was not the worker's), "timeout" (no
whole answer by the deadline: the worker is killed and a fresh one started at once, so the next
call does not pay for the import). Every thread of the process may call at the same time.

Replies are data. The worker sends JSON — None, booleans, numbers, strings, and lists and dicts of
them, at most `sandbox_worker.MAX_REPLY_BYTES` — which this process decodes without running
anything; each request and reply carries a nonce made from a key the user's code never sees
(`sandbox_worker.nonce`), so a stray or forged write on any descriptor it can reach is neither
run as a request nor read as a score, and shifts no later reply: the keeper drops a request
without the next nonce, this process skips a frame without its request's, and an idle worker
with something on its channel drops it, or is replaced where it is not whole frames. The
deadline covers the whole reply: its transfer and its decoding.

Each worker is a keeper process in a session of its own, which runs no user code and is the
subreaper of the runner that does: whatever the function starts — even a process that calls
`setsid` or forks twice — stays below the keeper, and every way a worker ends (retired, closed,
the trainer gone) kills all of it. A signal to the function's parent's group reaches only the
worker. What this does not contain is listed in docs/trainer.md ("Custom rewards").

A file that cannot be imported, or has no such function, raises `RewardLoadError` from `start`,
with the file's own error: that is a configuration problem and should stop the run.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import pickle
import queue
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_trainer.rewards.sandbox_worker import (
    HEADER,
    MAX_FRAME_BYTES,
    MAX_REPLY_BYTES,
    NONCE_BYTES,
    kill_descendants,
    nonce,
)

WORKER_FILE = Path(__file__).with_name("sandbox_worker.py")
DEFAULT_WORKERS = 4
START_TIMEOUT_S = 300.0
END_GRACE_S = 1.0
"""How long a worker asked to end (SIGTERM) has to kill what it started before it is killed."""

_NOT_ITS_OWN = "a reply on the worker's channel was not the worker's (a forged or stray write)"

__all__ = ["MAX_REPLY_BYTES", "Outcome", "RewardLoadError", "SandboxPool"]

log = logging.getLogger(__name__)


class RewardLoadError(RuntimeError):
    """The user's reward file cannot be imported, or lacks the function."""


@dataclass(frozen=True)
class Outcome:
    ok: bool
    value: Any = None
    failure: str = ""
    """"error", "result", "crash" or "timeout" when not ok."""
    message: str = ""


class _Worker:
    """One worker (its keeper process) and the bytes read from it so far."""

    def __init__(self, path: str, name: str, memory_mb: int) -> None:
        command = [sys.executable, "-P", "-u", str(WORKER_FILE), "--file", path, "--function", name]
        if memory_mb > 0:
            command += ["--max-memory-mb", str(memory_mb)]
        # A session of its own: a signal to the function's parent's group stays in the worker.
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            close_fds=True,
            start_new_session=True,
        )
        self.buffer = bytearray()
        self.kind: str | None = None
        self.claimed = False
        """A caller is waiting for this still-starting worker."""
        self._key = os.urandom(NONCE_BYTES)
        self._sequence = 0
        self.nonce = nonce(self._key, 0)
        """What the next frame from the keeper must start with (first its ready frame's)."""
        self._write(self._key)

    def send(self, message: Any) -> bool:
        self._sequence += 1
        self.nonce = nonce(self._key, self._sequence)
        return self._write(self.nonce + pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    def _write(self, body: bytes) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(HEADER.pack(len(body)) + body)
            self.proc.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def receive(self, deadline: float) -> tuple[str, Any]:
        """("ok", message), ("timeout", None) or ("crash", why).

        The deadline holds for the whole reply: reading it and decoding it. A frame without this
        request's nonce was not written by the keeper and is skipped; one too large to be a reply
        leaves the channel unreadable: a crash.
        """
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            frame = self._next_frame()
            if frame == b"":
                return "crash", _NOT_ITS_OWN
            if frame is not None:
                if frame[:NONCE_BYTES] != self.nonce:
                    continue
                return self._decode(frame, deadline)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout", None
            try:
                ready, _, _ = select.select([fd], [], [], min(remaining, 3600.0))
                if not ready:
                    return "timeout", None
                chunk = os.read(fd, 1 << 20)
            except (OSError, ValueError):
                return "crash", self._exited()
            if not chunk:
                return "crash", self._exited()
            self.buffer.extend(chunk)

    def _next_frame(self) -> bytes | None:
        """A whole frame's body from the buffer; None until one is whole; b"" for a header no
        keeper writes (its size outside a reply's bounds)."""
        if len(self.buffer) < HEADER.size:
            return None
        size = HEADER.unpack(self.buffer[: HEADER.size])[0]
        if not NONCE_BYTES <= size <= MAX_FRAME_BYTES:
            return b""
        end = HEADER.size + size
        if len(self.buffer) < end:
            return None
        body = bytes(self.buffer[HEADER.size : end])
        del self.buffer[:end]
        return body

    def _decode(self, body: bytes, deadline: float) -> tuple[str, Any]:
        try:
            message = json.loads(body[NONCE_BYTES:])
        except (ValueError, RecursionError):
            return "crash", _NOT_ITS_OWN
        if time.monotonic() > deadline:
            return "timeout", None
        return ("ok", message) if isinstance(message, dict) else ("crash", _NOT_ITS_OWN)

    def _exited(self) -> str:
        """Why the channel closed: the keeper's exit, which follows its last write at once."""
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            self.proc.wait(timeout=0.5)
        return f"the worker process exited (code {self.proc.returncode})"

    def quiet(self) -> bool:
        """Whether an idle worker can take a call. An idle keeper writes nothing and never ends
        unasked: whole frames on its channel now were written by something else and are dropped;
        part of one, or the channel's end, means it cannot (it is replaced)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        try:
            for _ in range(8):  # a writer that never stops cannot hold the caller here
                if not select.select([fd], [], [], 0)[0]:
                    break
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return False
                self.buffer.extend(chunk)
            else:
                return False
        except (OSError, ValueError):
            return False
        while (frame := self._next_frame()) is not None:
            if frame == b"":
                return False
        return not self.buffer

    def terminate(self) -> None:
        """Ask the keeper to end: it kills every process below it and reaps them."""
        with contextlib.suppress(OSError):
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """End the worker and every process below it, even one that left its session or group.

        The keeper kills them itself when asked (`terminate`); one that does not end within
        END_GRACE_S (stopped, say) has its descendants found and killed from here. Until the
        keeper is reaped its ids cannot be reused.
        """
        self.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            self.proc.wait(timeout=END_GRACE_S)
        if self.proc.returncode is None:
            kill_descendants(self.proc.pid, reap=False)
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
        if status != "ok":
            self._retire(worker)
            if status == "timeout":
                self.timeouts += 1
                return Outcome(False, failure="timeout", message="no answer before the deadline")
            self.crashes += 1
            return Outcome(False, failure="crash", message=str(reply))
        self._checkin(worker)
        if reply.get("ok") is True:
            return Outcome(True, value=reply.get("value"))
        failure = "result" if reply.get("failure") == "result" else "error"
        return Outcome(False, failure=failure, message=str(reply.get("error", "")))

    def close(self) -> None:
        with self._cond:
            self._closed = True
            workers = [*self._idle, *self._starting]
            self._idle, self._starting = [], []
            self._cond.notify_all()
        for worker in workers:
            worker.terminate()  # all at once: each gets its grace at the same time
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
                    while self._idle:
                        worker = self._idle.pop()
                        self._busy += 1
                        if worker.quiet():
                            return worker
                        self._retire(worker, locked=True)
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

    def _retire(self, worker: _Worker, locked: bool = False) -> None:
        """Kill a worker that timed out or died and start its replacement, off the caller's time."""
        if locked:
            self._busy -= 1
        else:
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
