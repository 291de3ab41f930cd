"""The reporter loop: tail the attempt's files, fold them into `TrainingState`, patch the status.

It runs beside the engine (a thread of `grpo-train run`, or `grpo-train report` on its own). Files
are polled every second; the status is patched when something changed, at most every
`min_interval` seconds. A failed patch (API server away, a 403 while RBAC settles) is retried with
exponential backoff; the state keeps only the newest values, so a late patch carries everything.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from grpo_operator.api.contract import YieldRecord, yield_record_file
from grpo_operator.api.timestamps import rfc3339

from .engines.base import Checkpoint
from .kube import StatusWriter
from .progress import TrainingState, parse_line, status_patch

log = logging.getLogger(__name__)
_READ_LIMIT = 4 << 20


class Tail:
    """New complete lines of a file that may not exist yet, may grow, or may be truncated."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._inode: int | None = None
        self._partial = b""

    def lines(self) -> list[str]:
        try:
            stat = os.stat(self.path)
        except OSError:
            return []
        if stat.st_ino != self._inode or stat.st_size < self._offset:
            # A new file (or verl's file logger reopening it with truncation): start over.
            self._inode, self._offset, self._partial = stat.st_ino, 0, b""
        if stat.st_size == self._offset:
            return []
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read(_READ_LIMIT)
        except OSError:
            return []
        self._offset += len(chunk)
        *complete, self._partial = (self._partial + chunk).split(b"\n")
        return [line.decode("utf-8", errors="replace") for line in complete if line.strip()]


class Reporter:
    """Keeps one job's status in step with its training files."""

    def __init__(
        self,
        writer: StatusWriter,
        state: TrainingState,
        metrics_file: Path,
        events_file: Path,
        *,
        latest_checkpoint: Callable[[], Checkpoint | None] | None = None,
        previous_metrics: list[Path] | None = None,
        min_interval: float = 5.0,
        poll_interval: float = 1.0,
        max_backoff: float = 60.0,
        on_checkpoint: Callable[[int], object] | None = None,
        not_before: float | None = None,
        pod_path: Callable[[str], str] = str,
    ) -> None:
        self.writer = writer
        self.state = state
        # The engine's own view of its newest checkpoint: the fallback where it writes no events
        # (verl 0.7 has no checkpoint hook).
        self.latest_checkpoint = latest_checkpoint
        self.min_interval = min_interval
        self.poll_interval = poll_interval
        self.max_backoff = max_backoff
        self.on_checkpoint = on_checkpoint
        # Status names checkpoints as the pods see them, also when the trainer runs outside one.
        self.pod_path = pod_path
        # A checkpoint older than this attempt's start was reported before.
        self.not_before = time.time() if not_before is None else not_before
        self._metrics = Tail(metrics_file)
        self._events = Tail(events_file)
        # A planned stop's yield record (contract.yield_record_file): read once it is written.
        self._yield_file = Path(yield_record_file(str(metrics_file)))
        self._yield_seen: float | None = None
        self._latest_seen: tuple[float, int] | None = None
        self._dirty = True
        self._next_send = 0.0
        self._backoff = 0.0
        self._last_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.patches_sent = 0
        for path in previous_metrics or []:
            self._replay(path)

    def _replay(self, path: Path) -> None:
        """Fold an earlier attempt's lines in, so the history plot spans the whole job."""
        tail = Tail(path)
        while lines := tail.lines():  # a long run's file is read in several chunks
            for line in lines:
                parsed = parse_line(line)
                if parsed:
                    self.state.add_line(*parsed)

    def poll(self) -> bool:
        """Read whatever is new; True when the state changed."""
        changed = False
        for line in self._metrics.lines():
            parsed = parse_line(line)
            if parsed:
                self.state.add_line(*parsed, live=True, at=time.time())
                changed = True
        for line in self._events.lines():
            changed |= self._checkpoint_event(line)
        changed |= self._latest()
        changed |= self._yielded()
        self._dirty |= changed
        return changed

    def _checkpoint_event(self, line: str) -> bool:
        try:
            event = json.loads(line)
            step, path, saved_at = int(event["step"]), str(event["path"]), str(event["savedAt"])
            seconds = event.get("saveSeconds")
            save_seconds = float(seconds) if isinstance(seconds, int | float) else None
        except (ValueError, KeyError, TypeError):
            return False
        return self._new_checkpoint(step, path, saved_at, save_seconds)

    def _yielded(self) -> bool:
        """The attempt's yield record, when it appears or changes."""
        try:
            mtime = self._yield_file.stat().st_mtime
        except OSError:
            return False
        if mtime == self._yield_seen or mtime < self.not_before:
            return False
        try:
            record = YieldRecord.parse(self._yield_file.read_text(encoding="utf-8"))
        except OSError:
            return False
        if record is None:
            return False
        self._yield_seen = mtime
        self.state.add_yield(record)
        return True

    def _latest(self) -> bool:
        if self.latest_checkpoint is None:
            return False
        try:
            latest = self.latest_checkpoint()
        except OSError:
            return False
        if latest is None:
            return False
        seen = (latest.saved_at, latest.step)
        if self._latest_seen == seen or latest.saved_at < self.not_before:
            return False
        self._latest_seen = seen
        return self._new_checkpoint(
            latest.step, latest.path, rfc3339(datetime.fromtimestamp(latest.saved_at, UTC))
        )

    def _new_checkpoint(self, step: int, path: str, saved_at: str, save_seconds: float | None = None) -> bool:
        current = self.state.checkpoint
        if current is not None and current["step"] >= step:
            return False
        self.state.add_checkpoint(step, self.pod_path(path), saved_at, save_seconds)
        if self.on_checkpoint is not None:
            try:
                self.on_checkpoint(step)
            except Exception:
                log.exception("checkpoint hook failed after step %s", step)
        return True

    def publish(self, now: float | None = None) -> bool:
        """Send the state if it changed and the rate limit and backoff allow; True when sent."""
        now = time.monotonic() if now is None else now
        if not self._dirty or now < self._next_send:
            return False
        body = status_patch(self.state)
        try:
            self.writer.patch_status(body)
        except Exception as exc:  # lightkube ApiError, httpx transport errors, anything: keep training
            self._backoff = min(max(self._backoff * 2, self.poll_interval), self.max_backoff)
            self._next_send = now + self._backoff
            message = f"{type(exc).__name__}: {exc}"
            if message != self._last_error:
                log.warning("status patch failed (retrying in %.0fs): %s", self._backoff, message)
                self._last_error = message
            return False
        self._dirty = False
        self._backoff = 0.0
        self._last_error = None
        self._next_send = now + self.min_interval
        self.patches_sent += 1
        return True

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
                self.publish()
            except Exception:
                log.exception("status reporter error; continuing")
            self._stop.wait(self.poll_interval)

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="grpo-status-reporter", daemon=True)
        self._thread.start()

    def stop(self, flush_timeout: float = 30.0) -> bool:
        """Stop the loop and send the final state, retrying up to `flush_timeout`; True when sent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.poll_interval + 5)
        self.poll()
        deadline = time.monotonic() + flush_timeout
        self._next_send = 0.0
        while True:
            if not self._dirty or self.publish():
                return True
            wait = min(self._next_send, deadline) - time.monotonic()
            if time.monotonic() >= deadline:
                return False
            time.sleep(max(wait, 0.05))
