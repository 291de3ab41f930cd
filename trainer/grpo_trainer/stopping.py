"""Save, then yield: the files of a planned stop, and `grpo-train yield`, every Ray pod's preStop.

Kubernetes runs a pod's preStop hook before it sends SIGTERM, and waits the pod's termination
grace period for it: that is the notice every graceful stop gives (KubeRay deleting the cluster on
a suspension or a deadline, Kueue's preemption, a drain, the Eviction API). The hook writes the
attempt's stop request on the checkpoint volume (contract.stop_request_file; the first pod to ask
wins, later ones leave it) and waits until the attempt's process has ended (the supervisor's exit
record), so a worker pod keeps serving the driver until it has saved. The driver checks the
request at every step's end (a stat), saves that step, writes the yield record and exits YIELDED.

The hook returns at once when the attempt never started in this Ray cluster (no log of it yet) or
has ended already; once the attempt's heartbeat (contract.heartbeat_file, which the supervisor
rewrites while the attempt runs) has not changed for HEARTBEAT_STALE_SECONDS, since an attempt
whose supervisor was killed writes no exit record (without it, a retry after such a crash waited
the whole grace period for the old pods); otherwise after `--timeout` seconds at most, which the
operator sets to the pods' grace period less a margin (grpo_operator/api/stop_bound.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from grpo_operator.api.contract import (
    HEARTBEAT_SECONDS,
    HEARTBEAT_STALE_SECONDS,
    YIELDED,
    Failure,
    StopRequest,
    YieldRecord,
    exit_record_file,
    heartbeat_file,
    stop_request_file,
    yield_record_file,
)
from grpo_operator.api.timestamps import rfc3339

log = logging.getLogger(__name__)
POLL_SECONDS = 0.5


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(text + "\n", encoding="utf-8")
    partial.replace(path)


@dataclass(frozen=True)
class AttemptFiles:
    """One attempt's planned-stop files, from its metrics file (as this process sees the volume)."""

    metrics_file: Path

    @property
    def stop_request(self) -> Path:
        return Path(stop_request_file(str(self.metrics_file)))

    @property
    def yield_record(self) -> Path:
        return Path(yield_record_file(str(self.metrics_file)))

    @property
    def exit_record(self) -> Path:
        return Path(exit_record_file(str(self.metrics_file)))

    @property
    def heartbeat(self) -> Path:
        return Path(heartbeat_file(str(self.metrics_file)))

    def beat(self, count: int) -> None:
        """One heartbeat (the supervisor's): never fails the attempt it watches."""
        with contextlib.suppress(OSError):
            self.heartbeat.parent.mkdir(parents=True, exist_ok=True)
            self.heartbeat.write_text(f"{count}\n", encoding="utf-8")

    def beating(self) -> threading.Event:
        """Beat every HEARTBEAT_SECONDS from a thread of this process until the event is set."""
        done = threading.Event()

        def run() -> None:
            count = 0
            while not done.is_set():
                count += 1
                self.beat(count)
                done.wait(HEARTBEAT_SECONDS)

        threading.Thread(target=run, name="heartbeat", daemon=True).start()
        return done

    def read_heartbeat(self) -> str | None:
        try:
            return self.heartbeat.read_text(encoding="utf-8")
        except OSError:
            return None

    @property
    def log(self) -> Path:
        """The attempt's log (contract.attempt_log_file): there once its driver has started."""
        return self.metrics_file.with_suffix(".log")

    def request_stop(self, timeout: float, by: str = "", now: float | None = None) -> StopRequest:
        """Ask the attempt to save and stop; the first request stands (every pod's hook asks)."""
        now = time.time() if now is None else now
        existing = self.stop_requested()
        if existing is not None:
            return existing
        request = StopRequest(requested_at=now, deadline=now + timeout, by=by)
        self.stop_request.parent.mkdir(parents=True, exist_ok=True)
        try:
            # O_EXCL: of two pods asking at once, one request is written whole and kept.
            fd = os.open(self.stop_request, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return self.stop_requested() or request
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(request.to_json() + "\n")
        return request

    def stop_requested(self) -> StopRequest | None:
        """The attempt's stop request, if one was written (a missing file costs one failed stat)."""
        try:
            text = self.stop_request.read_text(encoding="utf-8")
        except OSError:
            return None
        return StopRequest.parse(text)

    def write_yield(self, record: YieldRecord) -> None:
        _write_atomically(self.yield_record, record.to_json())

    def read_yield(self) -> YieldRecord | None:
        try:
            return YieldRecord.parse(self.yield_record.read_text(encoding="utf-8"))
        except OSError:
            return None

    def write_exit(self, code: int) -> None:
        with contextlib.suppress(OSError):
            _write_atomically(self.exit_record, json.dumps({"exitCode": code, "endedAt": rfc3339()}))

    def clear_stale(self) -> list[Path]:
        """Before the attempt's driver starts: a stop request or exit record of an earlier run of
        the same attempt (KubeRay submits it again on a new head, Kueue admits its RayJob again)
        is not about this run."""
        removed = []
        for path in (self.stop_request, self.exit_record, self.heartbeat):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
        return removed


def wait_for_yield(
    files: AttemptFiles, timeout: float, *, by: str = "", stale_after: float = HEARTBEAT_STALE_SECONDS
) -> str:
    """The preStop hook: ask the attempt to stop and wait until it has ended; returns why it
    returned ("not started", "ended", "no heartbeat for N s", "timed out"). An attempt that never
    wrote a heartbeat (a trainer image older than it) is waited for until the timeout."""
    deadline = time.monotonic() + timeout
    if not files.log.exists():
        return "not started"
    if files.exit_record.exists():
        return "ended"
    files.request_stop(timeout, by=by)
    beat, changed = files.read_heartbeat(), time.monotonic()
    while time.monotonic() < deadline:
        if files.exit_record.exists():
            return "ended"
        now, latest = time.monotonic(), files.read_heartbeat()
        if latest != beat:
            beat, changed = latest, now
        elif beat is not None and now - changed >= stale_after:
            return f"no heartbeat for {now - changed:.0f} s: the attempt ended without its exit record"
        time.sleep(POLL_SECONDS)
    return "timed out"


def hook_main(metrics_file: str, timeout: float) -> int:
    """`grpo-train yield`: never fails the pod's stop (a hook's failure only delays it)."""
    started = time.monotonic()
    try:
        why = wait_for_yield(AttemptFiles(Path(metrics_file)), timeout, by=socket.gethostname())
    except OSError as error:
        why = f"could not reach the attempt's files: {error}"
    print(f"grpo-train yield: {why} after {time.monotonic() - started:.1f} s ({metrics_file})", flush=True)
    return 0


def yielded(record: YieldRecord) -> Failure:
    """A planned stop in the contract's words: exit YIELDED, one line the operator reads."""
    if record.saved_at is not None:
        message = f"saved step {record.step} in {record.save_seconds or 0:.1f} s and stopped as asked"
    else:
        message = (
            f"stopped as asked without saving ({record.reason}): resumes from step {record.step}, "
            f"{record.steps_lost} step(s) to train again"
        )
    return Failure(YIELDED, "Yielded", message)
