"""A job's files on its checkpoint volume, read from where the user is.

`LocalVolume` reads a folder whose `grpo/` is the pods' /grpo tree (`--workdir`, as for
`grpo-train run --workdir`: a volume mounted on this machine, a copy, the local test cluster's
storage). `PodVolume` reads through a short-lived Pod on the cluster (reader.py). Both take the
paths the pods use (`contract.attempt_log_file` and friends).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from grpo_operator.api.contract import ROTATED_SUFFIX, metrics_file, under_workdir

from .cluster import Cluster, PluginError
from .reader import ReadTarget, cat_script, follow_script, list_script


class Volume(Protocol):
    def read(self, path: str) -> Iterator[str]: ...

    def follow(self, path: str, stop: Callable[[], bool]) -> Iterator[str]: ...

    def listing(self, folder: str) -> list[tuple[float, str]]: ...

    def metrics_lines(self, metrics_dir: str, attempts: int) -> Iterator[str]: ...


class LocalVolume:
    def __init__(self, workdir: str, poll_seconds: float = 0.5) -> None:
        self.workdir = workdir
        self.poll_seconds = poll_seconds

    def _local(self, path: str) -> Path:
        return Path(under_workdir(path, self.workdir))

    def read(self, path: str) -> Iterator[str]:
        local = self._local(path)
        if not local.is_file():
            raise PluginError(f"no such file: {local}", code=3)
        rotated = Path(str(local) + ROTATED_SUFFIX)
        for part in (rotated, local):
            if part.is_file():
                with part.open(encoding="utf-8", errors="replace") as handle:
                    yield from (line.rstrip("\n") for line in handle)

    def follow(self, path: str, stop: Callable[[], bool]) -> Iterator[str]:
        """Every line so far, then new ones as they are written, until `stop()`; survives a roll-over."""
        local = self._local(path)
        while not local.is_file():
            if stop():
                return
            time.sleep(self.poll_seconds)
        handle = local.open("rb")
        inode, partial = os.fstat(handle.fileno()).st_ino, b""
        try:
            while True:
                chunk = handle.read()
                if chunk:
                    *lines, partial = (partial + chunk).split(b"\n")
                    yield from (line.decode("utf-8", errors="replace") for line in lines)
                    continue
                if stop():
                    if partial:
                        yield partial.decode("utf-8", errors="replace")
                    return
                try:
                    rolled = os.stat(local).st_ino != inode
                except FileNotFoundError:
                    rolled = False
                if rolled:  # the trainer moved it to .1 and started a new file
                    handle.close()
                    handle = local.open("rb")
                    inode = os.fstat(handle.fileno()).st_ino
                    continue
                time.sleep(self.poll_seconds)
        finally:
            handle.close()

    def listing(self, folder: str) -> list[tuple[float, str]]:
        local = self._local(folder)
        if not local.is_dir():
            raise PluginError(f"no such folder: {local}", code=3)
        return sorted((entry.stat().st_mtime, entry.name) for entry in local.iterdir())

    def metrics_lines(self, metrics_dir: str, attempts: int) -> Iterator[str]:
        for attempt in range(1, attempts + 1):
            local = self._local(metrics_file(metrics_dir, attempt))
            if local.is_file():
                yield from local.read_text(encoding="utf-8", errors="replace").splitlines()


def without_a_cut_character(lines: Iterator[str]) -> Iterator[str]:
    """`lines` with the replacement characters at the very end of the last one removed.

    A running trainer's log is copied to the volume in chunks of bytes, so a read while it is
    written can end inside a multi-byte character (a progress bar's block): decoded, that tail is a
    U+FFFD that the file never holds, and a later read has the whole character in its place.
    """
    last: str | None = None
    for line in lines:
        if last is not None:
            yield last
        last = line
    if last is not None:
        yield last.rstrip("\ufffd")


class PodVolume:
    """The volume through a reader Pod on the cluster (one Pod per read)."""

    def __init__(self, cluster: Cluster, target: ReadTarget, image: str) -> None:
        self.cluster, self.target, self.image = cluster, target, image

    def _run(self, script: str, follow: bool = False) -> Iterator[str]:
        return self.cluster.read_through_pod(self.target, script, image=self.image, follow=follow)

    def read(self, path: str) -> Iterator[str]:
        return without_a_cut_character(self._run(cat_script(path)))

    def follow(self, path: str, stop: Callable[[], bool]) -> Iterator[str]:
        # tail -F runs until the Pod is deleted (Ctrl-C) or its deadline.
        return self._run(follow_script(path), follow=True)

    def listing(self, folder: str) -> list[tuple[float, str]]:
        entries = []
        for line in self._run(list_script(folder)):
            stamp, _, name = line.partition(" ")
            if stamp.isdigit() and name:
                entries.append((float(stamp), name))
        return sorted(entries)

    def metrics_lines(self, metrics_dir: str, attempts: int) -> Iterator[str]:
        files = " ".join(metrics_file(metrics_dir, n) for n in range(1, attempts + 1))
        return self._run(f"for f in {files}; do [ -f $f ] && cat $f; done; true")
