"""Checkpoint folders on the shared volume: which one to resume from, which ones to delete.

All attempts of a job write `checkpoint-<step>` folders (Hugging Face Trainer's layout) into one
folder, so a new attempt resumes from the newest complete one and pruning counts every attempt's
folders. A folder is complete once `trainer_state.json` is in it: the Trainer writes that file
after the weights and the optimiser state, so a crash mid-save leaves a folder without it.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

_CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d+)$")
COMPLETE_MARKER = "trainer_state.json"


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: Path

    @property
    def complete(self) -> bool:
        return (self.path / COMPLETE_MARKER).is_file()


def list_checkpoints(root: str | os.PathLike[str]) -> list[Checkpoint]:
    """Checkpoint folders under `root`, oldest step first."""
    base = Path(root)
    if not base.is_dir():
        return []
    found = []
    for entry in base.iterdir():
        match = _CHECKPOINT_NAME.match(entry.name)
        if match and entry.is_dir():
            found.append(Checkpoint(step=int(match.group(1)), path=entry))
    return sorted(found, key=lambda c: c.step)


def latest_checkpoint(root: str | os.PathLike[str]) -> Checkpoint | None:
    """The newest complete checkpoint, or None when training must start from scratch."""
    complete = [c for c in list_checkpoints(root) if c.complete]
    return complete[-1] if complete else None


def resolve_resume(root: str | os.PathLike[str], resume: str) -> Checkpoint | None:
    """What `spec.checkpoint.resume` means here: `latest`, `never`, or a checkpoint folder path."""
    if resume in ("", "never", "none"):
        return None
    if resume == "latest":
        return latest_checkpoint(root)
    path = Path(resume)
    match = _CHECKPOINT_NAME.match(path.name)
    if not match or not (path / COMPLETE_MARKER).is_file():
        raise ValueError(f"checkpoint.resume {resume!r} is not a complete checkpoint-<step> folder")
    return Checkpoint(step=int(match.group(1)), path=path)


def remove_incomplete(root: str | os.PathLike[str]) -> list[Path]:
    """Delete folders a crashed save left behind, so they never shadow a good checkpoint."""
    removed = []
    for checkpoint in list_checkpoints(root):
        if not checkpoint.complete:
            shutil.rmtree(checkpoint.path, ignore_errors=True)
            removed.append(checkpoint.path)
    return removed


def prune_checkpoints(root: str | os.PathLike[str], keep: int) -> list[Path]:
    """Keep the `keep` newest complete checkpoints (of any attempt); delete older ones.

    Incomplete folders are left alone here: one may be the save in progress.
    """
    if keep < 1:
        raise ValueError("keep must be at least 1")
    complete = [c for c in list_checkpoints(root) if c.complete]
    doomed = complete[:-keep]
    for checkpoint in doomed:
        shutil.rmtree(checkpoint.path, ignore_errors=True)
    return [c.path for c in doomed]
