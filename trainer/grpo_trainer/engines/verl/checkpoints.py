"""verl checkpoints across attempts: where to resume, that resuming can work, and what to delete.

verl writes `<checkpoint_dir>/global_step_N/actor/...` and then `latest_checkpointed_iteration.txt`
(holding N), so the tracker names the newest complete checkpoint. Three things verl leaves to us:

- Its `max_actor_ckpt_to_keep` only prunes what the current process saved; checkpoints of earlier
  attempts pile up on the volume. `prune` applies the job's `keep` to all of them.
- FSDP shards embed the world size; resuming with another device count fails deep inside torch.
  `check_world` refuses first, with the two numbers and what to do.
- A fresh start (`checkpoint.resume: none`) must not find an earlier run's checkpoints:
  `archive_previous_run` moves them aside.

Which checkpoint an attempt starts from is the driver's decision (grpo_trainer/inputs.py);
`verl_resume` says it in verl's terms.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from grpo_operator.api.timestamps import folder_stamp
from grpo_operator.api.v1alpha1 import ResolvedJob

from ...failures import ConfigError
from ..base import Checkpoint
from ..base import Resume as BaseResume
from .overrides import Resume

TRACKER = "latest_checkpointed_iteration.txt"
WORLD_FILE = "grpo-world.json"
_STEP_DIR = re.compile(r"global_step_(\d+)")
_SHARD = re.compile(r"model_world_size_(\d+)_rank_\d+\.pt")


def tracked_step(checkpoint_dir: str | Path) -> int | None:
    """The step verl's tracker names, if that checkpoint folder exists."""
    folder = Path(checkpoint_dir)
    try:
        step = int((folder / TRACKER).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    return step if (folder / f"global_step_{step}").is_dir() else None


def latest(checkpoint_dir: str | Path) -> Checkpoint | None:
    """The checkpoint verl's tracker names, dated by the tracker (verl writes it last)."""
    step = tracked_step(checkpoint_dir)
    if step is None:
        return None
    tracker = Path(checkpoint_dir) / TRACKER
    try:
        saved_at = tracker.stat().st_mtime
    except OSError:
        return None
    return Checkpoint(step, str(step_folder(checkpoint_dir, step)), saved_at)


def saved_steps(checkpoint_dir: str | Path) -> list[int]:
    """Every global_step_N folder, oldest first."""
    folder = Path(checkpoint_dir)
    if not folder.is_dir():
        return []
    found = (_STEP_DIR.fullmatch(p.name) for p in folder.iterdir() if p.is_dir())
    return sorted(int(m.group(1)) for m in found if m)


def step_folder(checkpoint_dir: str | Path, step: int) -> Path:
    return Path(checkpoint_dir) / f"global_step_{step}"


def world_size_of(step_dir: Path) -> int | None:
    """The device count a checkpoint was written with: verl's fsdp_config.json, else shard names."""
    actor = step_dir / "actor"
    try:
        return int(json.loads((actor / "fsdp_config.json").read_text(encoding="utf-8"))["world_size"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    for shard in actor.glob("model_world_size_*_rank_*.pt") if actor.is_dir() else ():
        match = _SHARD.fullmatch(shard.name)
        if match:
            return int(match.group(1))
    recorded = step_dir.parent / WORLD_FILE
    try:
        return int(json.loads(recorded.read_text(encoding="utf-8"))["worldSize"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def record_world(job: ResolvedJob) -> None:
    """Note the device layout next to the checkpoints this job writes (read when shards say nothing)."""
    folder = Path(job.paths.checkpoint_dir)
    folder.mkdir(parents=True, exist_ok=True)
    res = job.spec.resources
    layout = {
        "worldSize": job.spec.world_size,
        "nodes": res.nodes,
        "devicesPerNode": res.devices_per_node,
        "accelerator": res.accelerator,
    }
    (folder / WORLD_FILE).write_text(json.dumps(layout) + "\n", encoding="utf-8")


def at(path: str) -> Checkpoint:
    """The global_step_N folder a spec names; ConfigError when it is not one."""
    folder = Path(path)
    match = _STEP_DIR.fullmatch(folder.name)
    if match is None or not folder.is_dir():
        raise ConfigError(
            f"checkpoint.resume={path}: expected an existing checkpoint folder of the verl engine "
            "(global_step_N, written by verl)"
        )
    return Checkpoint(int(match.group(1)), str(folder), folder.stat().st_mtime)


def verl_resume(resume: BaseResume) -> Resume:
    """The driver's resume decision in verl's terms (trainer.resume_mode and resume_from_path)."""
    if resume.fresh:
        return Resume("disable")
    if resume.checkpoint is None:
        return Resume("auto")
    if resume.named:
        return Resume("resume_path", path=resume.checkpoint.path, from_step=resume.checkpoint.step)
    return Resume("auto", from_step=resume.checkpoint.step)


def check_world(job: ResolvedJob, step_dir: Path) -> None:
    """ConfigError when the checkpoint was written by another device count than this job's."""
    saved = world_size_of(step_dir)
    now = job.spec.world_size
    if saved is not None and saved != now:
        res = job.spec.resources
        raise ConfigError(
            f"cannot resume from {step_dir}: it was written by {saved} devices and this job has {now} "
            f"({res.nodes} node(s) x {res.devices_per_node}); verl's FSDP checkpoints are sharded per "
            f"device, so resume with the same device count, or set checkpoint.resume: none to start over"
        )


def archive_previous_run(checkpoint_dir: Path) -> Path | None:
    """Move an earlier run's checkpoints aside (never delete them) before training from scratch.

    Left in place, their higher step numbers would outrank the new run's in pruning and in the
    tracker until overwritten.
    """
    old = [checkpoint_dir / f"global_step_{s}" for s in saved_steps(checkpoint_dir)]
    tracker = checkpoint_dir / TRACKER
    if not old and not tracker.exists():
        return None
    stamp = folder_stamp()
    archive = checkpoint_dir.parent / f"{checkpoint_dir.name}-archived-{stamp}"
    archive.mkdir(parents=True, exist_ok=True)
    for item in [*old, tracker]:
        if item.exists():
            item.rename(archive / item.name)
    return archive


def prune(checkpoint_dir: str | Path, keep: int) -> list[int]:
    """Delete checkpoints beyond the newest `keep`, never the one the tracker names; returns the steps deleted.

    The newest folder may be a save in progress (not tracked yet): it counts among the kept ones,
    so a save is never deleted under verl's feet.
    """
    folder = Path(checkpoint_dir)
    steps = saved_steps(folder)
    kept = set(steps[-keep:]) if keep > 0 else set()
    tracked = tracked_step(folder)
    if tracked is not None:
        kept.add(tracked)
    deleted = []
    for step in steps:
        if step not in kept:
            # verl may be pruning the same folder: a file vanishing mid-way is not an error.
            shutil.rmtree(step_folder(folder, step), ignore_errors=True)
            deleted.append(step)
    return deleted
