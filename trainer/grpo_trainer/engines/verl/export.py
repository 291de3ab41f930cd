"""verl's final checkpoint -> a Hugging Face model folder (and, for LoRA runs, the adapter on its own).

verl's model merger (`python -m verl.model_merger merge --backend fsdp`) gathers the per-rank FSDP
shards of `global_step_N/actor` into safetensors on CPU. For a LoRA run it writes the *base*
weights and the adapter in `lora_adapter/`; `lora_merge` then folds the adapter into the base, so
`model/` is the trained model (loadable without peft), as the TRL engine exports it, and
`lora-adapter/` holds the adapter beside it. The folder layout and its record are every engine's
(grpo_trainer/export_record.py).
"""

from __future__ import annotations

import logging
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
from .lora_merge import fix_adapter_config

ADAPTER_DIR = "lora_adapter"
"""Where verl's merger writes a LoRA run's adapter, inside its target folder."""
log = logging.getLogger(__name__)


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


def merge_lora_command(model_dir: Path, adapter_dir: Path, out_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "grpo_trainer.engines.verl.lora_merge",
        "--model",
        str(model_dir),
        "--adapter",
        str(adapter_dir),
        "--out",
        str(out_dir),
    ]


def export(job: ResolvedJob, run: Callable[[list[str]], Any] | None = None) -> ExportResult | None:
    """Export the tracked final checkpoint as the spec asks; None when the spec asks for nothing.

    `run` runs a command (verl's merger, then the LoRA merge), raising on failure; the default
    runs it as a subprocess.
    """
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
        _run(merge_command(actor, staging), run)
        adapter_dir = staging / ADAPTER_DIR
        if lora and not adapter_dir.is_dir():
            raise ExportError(f"verl's merger wrote no {ADAPTER_DIR}/ for LoRA checkpoint {actor}")
        if (settings := job.spec.engine.lora) is not None:  # `lora`, with the settings
            for change in fix_adapter_config(adapter_dir, settings.rank, settings.alpha):
                log.warning("verl's adapter_config.json lacked the job's LoRA setting: %s", change)
        model = None
        if wanted.hugging_face and lora:
            merged = staging.with_name(staging.name + "-merged")
            _run(merge_lora_command(staging, adapter_dir, merged), run)
            model = place(merged, out / EXPORT_MODEL_DIR)
        elif wanted.hugging_face:
            model = place(staging, out / EXPORT_MODEL_DIR)
        adapter = None
        if lora and wanted.lora_adapter:
            adapter = place(adapter_dir, out / EXPORT_ADAPTER_DIR)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(staging.with_name(staging.name + "-merged"), ignore_errors=True)
    write_record(out, step, model, adapter)
    return ExportResult(step, model, adapter)


def _run(command: list[str], run: Callable[[list[str]], Any] | None) -> None:
    if run is not None:
        run(command)
        return
    result = subprocess.run(command, check=False)
    if result.returncode != 0:
        raise ExportError(f"the export step exited with code {result.returncode}: {' '.join(command)}")
