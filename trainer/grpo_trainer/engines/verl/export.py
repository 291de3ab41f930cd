"""verl's final checkpoint -> a Hugging Face model folder (and, for LoRA runs, the adapter on its own).

verl's model merger (`python -m verl.model_merger merge --backend fsdp`) gathers the per-rank FSDP
shards of `global_step_N/actor` into safetensors on CPU, and splits LoRA weights into a
`lora_adapter/` folder. The folder layout and its record are every engine's
(grpo_trainer/export_record.py); for LoRA runs `model/` holds the base weights here, with the
adapter beside it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grpo_operator.api.contract import EXPORT_ADAPTER_DIR, EXPORT_MODEL_DIR, RETRYABLE
from grpo_operator.api.v1alpha1 import ResolvedJob

from ...export_record import place, read_record, write_record
from ...failures import ConfigError, TrainerError
from ..base import ExportResult
from .checkpoints import step_folder, tracked_step


class ExportError(TrainerError):
    """The merge failed (out of host memory, a full volume): worth another attempt, which skips training."""

    code = RETRYABLE
    reason = "ExportFailed"


def merge_command(actor_dir: Path, target_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "verl.model_merger",
        "merge",
        "--backend",
        "fsdp",
        "--local_dir",
        str(actor_dir),
        "--target_dir",
        str(target_dir),
    ]


def export(job: ResolvedJob, run: Callable[[list[str]], Any] | None = None) -> ExportResult | None:
    """Export the tracked final checkpoint as the spec asks; None when the spec asks for nothing."""
    wanted = job.spec.export
    lora = job.spec.engine.lora is not None
    if not wanted.hugging_face and not (lora and wanted.lora_adapter):
        return None
    step = tracked_step(job.paths.checkpoint_dir)
    if step is None:
        raise ConfigError(f"nothing to export: no checkpoint in {job.paths.checkpoint_dir}")
    actor = step_folder(job.paths.checkpoint_dir, step) / "actor"
    if not actor.is_dir():
        raise ConfigError(f"nothing to export: {actor} does not exist (was the actor checkpoint pruned?)")
    out = Path(job.paths.export_dir)
    done = read_record(out)
    if done is not None and done.get("step") == step:
        return ExportResult(step, done.get("model"), done.get("loraAdapter"), skipped=True)
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".merge-", dir=out))
    try:
        _run_merger(merge_command(actor, staging), run)
        model = place(staging, out / EXPORT_MODEL_DIR) if wanted.hugging_face else None
        adapter_src = (out / EXPORT_MODEL_DIR if model else staging) / "lora_adapter"
        adapter = None
        if lora and wanted.lora_adapter and adapter_src.is_dir():
            adapter = place(adapter_src, out / EXPORT_ADAPTER_DIR, copy=model is not None)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    write_record(out, step, model, adapter)
    return ExportResult(step, model, adapter)


def _run_merger(command: list[str], run: Callable[[list[str]], Any] | None) -> None:
    if run is not None:
        run(command)
        return
    result = subprocess.run(command, check=False)
    if result.returncode != 0:
        raise ExportError(f"verl's model merger exited with code {result.returncode}: {' '.join(command)}")
