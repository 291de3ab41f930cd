"""Checkpoint folders on the shared volume: the newest complete one, one a spec names, what to delete.

All attempts of a job write `checkpoint-<step>` folders (Hugging Face Trainer's layout) into one
folder, so a new attempt resumes from the newest complete one and pruning counts every attempt's
folders. A folder is complete once `trainer_state.json` is in it: the Trainer writes that file
after the weights and the optimiser state, so a crash mid-save leaves a folder without it.
Which checkpoint an attempt starts from is the driver's decision (grpo_trainer/inputs.py).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from ...failures import ConfigError
from ..base import Checkpoint

_CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d+)$")
COMPLETE_MARKER = "trainer_state.json"


def _folders(root: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """(step, folder) of every checkpoint folder under `root`, complete or not, oldest step first."""
    base = Path(root)
    if not base.is_dir():
        return []
    found = []
    for entry in base.iterdir():
        match = _CHECKPOINT_NAME.match(entry.name)
        if match and entry.is_dir():
            found.append((int(match.group(1)), entry))
    return sorted(found, key=lambda f: f[0])


def _complete(folder: Path) -> bool:
    return (folder / COMPLETE_MARKER).is_file()


def _checkpoint(step: int, folder: Path) -> Checkpoint | None:
    """A complete folder as a Checkpoint, dated by its marker (the Trainer writes it last)."""
    try:
        saved_at = (folder / COMPLETE_MARKER).stat().st_mtime
    except OSError:
        return None
    return Checkpoint(step, str(folder), saved_at)


def latest_checkpoint(root: str | os.PathLike[str]) -> Checkpoint | None:
    """The newest complete checkpoint, or None when training must start from scratch."""
    for step, folder in reversed(_folders(root)):
        if _complete(folder):
            return _checkpoint(step, folder)
    return None


def checkpoint_at(path: str) -> Checkpoint:
    """The checkpoint folder a spec names; ConfigError when it is not a complete one."""
    folder = Path(path)
    match = _CHECKPOINT_NAME.match(folder.name)
    found = _checkpoint(int(match.group(1)), folder) if match and _complete(folder) else None
    if found is None:
        raise ConfigError(
            f"checkpoint.resume={path}: is not a complete checkpoint-<step> folder of the trl engine "
            f"(one with {COMPLETE_MARKER})"
        )
    return found


def remove_incomplete(root: str | os.PathLike[str]) -> list[Path]:
    """Delete folders a crashed save left behind, so they never shadow a good checkpoint."""
    removed = []
    for _, folder in _folders(root):
        if not _complete(folder):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def prune_checkpoints(root: str | os.PathLike[str], keep: int) -> list[Path]:
    """Keep the `keep` newest complete checkpoints (of any attempt); delete older ones.

    Incomplete folders are left alone here: one may be the save in progress.
    """
    if keep < 1:
        raise ValueError("keep must be at least 1")
    complete = [folder for _, folder in _folders(root) if _complete(folder)]
    doomed = complete[:-keep]
    for folder in doomed:
        shutil.rmtree(folder, ignore_errors=True)
    return doomed
