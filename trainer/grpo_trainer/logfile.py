"""The attempt's log on the checkpoint volume: everything the process and its engine print, kept.

Ray keeps a job's driver log only as long as its cluster lives, and the operator lets KubeRay
delete the cluster when the job ends; the RayJob's message keeps just a tail. So `grpo-train run`
copies its own standard output and error — and, because the copy is made at the file-descriptor
level, those of every process it starts (verl's main_ppo, the TRL engine's libraries, C
extensions) — into `contract.attempt_log_file` on the job's volume, while still writing them to
the original streams for Ray and `kubectl logs`.

The file is bounded: when it would pass `max_bytes` it is moved to `<file>.1` (replacing an older
one) and a new file starts, so an attempt never holds more than twice `max_bytes` and the newest
output — where a failure is — is always there. A log that cannot be written never fails the
attempt: training goes on with a warning.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from pathlib import Path
from types import TracebackType

from grpo_operator.api.contract import LOG_MAX_BYTES, ROTATED_SUFFIX
from grpo_operator.api.timestamps import rfc3339

log = logging.getLogger(__name__)
_CHUNK = 1 << 16
_JOIN_SECONDS = 10.0


class RotatingSink:
    """Appends bytes to a file, rolling it over to `<file>.1` when it would exceed `max_bytes`."""

    def __init__(self, path: Path, max_bytes: int = LOG_MAX_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(path, "ab")  # noqa: SIM115  (held open for the attempt's life)
        self._size = self._handle.tell()
        self.ends_line = True
        """Whether the last byte written ends a line (a progress bar redraws with `\r` only)."""

    def write(self, data: bytes) -> None:
        with self._lock:
            if self._size and self._size + len(data) > self.max_bytes:
                self._handle.close()
                os.replace(self.path, str(self.path) + ROTATED_SUFFIX)
                self._handle = open(self.path, "ab")  # noqa: SIM115
                self._size = 0
            # A chunk larger than the whole budget keeps only its end.
            data = data[-self.max_bytes :]
            self._handle.write(data)
            self._handle.flush()
            self._size += len(data)
            if data:
                self.ends_line = data.endswith(b"\n")

    def close(self) -> None:
        with self._lock:
            self._handle.close()


class AttemptLog:
    """A context manager that tees file descriptors 1 and 2 into a `RotatingSink`.

    Each stream goes through its own pipe and reader thread, which writes every chunk first to the
    original descriptor (so Ray's log and its tail in the RayJob are unchanged) and then to the file.
    """

    def __init__(self, path: Path, header: str = "", max_bytes: int = LOG_MAX_BYTES) -> None:
        self.path = path
        self.header = header
        self.max_bytes = max_bytes
        self.sink: RotatingSink | None = None
        self._saved: dict[int, int] = {}
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> AttemptLog:
        try:
            self.sink = RotatingSink(self.path, self.max_bytes)
        except OSError as exc:
            log.warning("cannot keep this attempt's log in %s (%s); training without it", self.path, exc)
            return self
        stamp = rfc3339()
        self.sink.write(f"=== {stamp} {self.header}\n".encode())
        _flush_python_streams()
        for fd in (1, 2):
            read_end, write_end = os.pipe()
            self._saved[fd] = os.dup(fd)
            os.dup2(write_end, fd)
            os.close(write_end)
            thread = threading.Thread(
                target=self._pump, args=(read_end, self._saved[fd]), name=f"grpo-log-{fd}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def _pump(self, read_end: int, original: int) -> None:
        assert self.sink is not None
        sink_ok = True
        try:
            while chunk := os.read(read_end, _CHUNK):
                _write_all(original, chunk)
                if sink_ok:
                    try:
                        self.sink.write(chunk)
                    except OSError as exc:  # a full volume: the streams go on, the file stops
                        sink_ok = False
                        _write_all(original, f"grpo-train: the attempt's log stopped: {exc}\n".encode())
        finally:
            os.close(read_end)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self.sink is None:
            return
        _flush_python_streams()
        # Putting the originals back closes our write ends; a reader ends when no process holds
        # its pipe any more (an engine's orphaned child may, hence the timeout).
        for fd, saved in self._saved.items():
            os.dup2(saved, fd)
        for thread in self._threads:
            thread.join(timeout=_JOIN_SECONDS)
        for saved in self._saved.values():
            os.close(saved)
        if not self.sink.ends_line:
            # An attempt stopped mid-progress-bar (a suspend's SIGTERM): the next output appended,
            # and a reader of the file, start on a line of their own.
            with contextlib.suppress(OSError):
                self.sink.write(b"\n")
        self.sink.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except OSError:
            return  # the original stream is gone (a closed terminal): the file still gets it
        view = view[written:]


def _flush_python_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
