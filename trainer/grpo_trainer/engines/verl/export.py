"""The final checkpoint -> a Hugging Face model folder (and, for LoRA runs, the adapter on its own).

verl's model merger (`python -m verl.model_merger merge --backend fsdp`) gathers the per-rank FSDP
shards of `global_step_N/actor` into safetensors on CPU, and splits LoRA weights into a
`lora_adapter/` folder. The merge is written to a temporary folder and renamed into place, and
`export.json` (written last) records which step was exported, so a retried export after a crash
either finds a finished export of the same step or starts clean.

Layout under the export folder (spec.export.path, default <job>/export):
    model/          the Hugging Face model (for LoRA runs: the base weights; apply lora-adapter/)
    lora-adapter/   adapter_config.json + adapter_model.safetensors (LoRA runs)
    export.json     {"step", "model", "loraAdapter", "exportedAt"}
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from grpo_operator.api.v1alpha1 import ResolvedJob

from .checkpoints import step_folder, tracked_step
from .exitcodes import RETRYABLE, ConfigError, TrainerError

RECORD = "export.json"
MODEL_DIR = "model"
ADAPTER_DIR = "lora-adapter"


class ExportError(TrainerError):
    """The merge failed (out of host memory, a full volume): worth another attempt, which skips training."""

    code = RETRYABLE
    reason = "ExportFailed"


@dataclass(frozen=True)
class ExportResult:
    step: int
    model: str | None
    lora_adapter: str | None
    skipped: bool = False


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
    done = _read_record(out)
    if done is not None and done.get("step") == step:
        return ExportResult(step, done.get("model"), done.get("loraAdapter"), skipped=True)
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".merge-", dir=out))
    try:
        _run_merger(merge_command(actor, staging), run)
        model = _place(staging, out / MODEL_DIR) if wanted.hugging_face else None
        adapter_src = (out / MODEL_DIR if model else staging) / "lora_adapter"
        adapter = None
        if lora and wanted.lora_adapter and adapter_src.is_dir():
            adapter = _place(adapter_src, out / ADAPTER_DIR, copy=model is not None)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    record = {
        "step": step,
        "model": model,
        "loraAdapter": adapter,
        "exportedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    partial = out / (RECORD + ".partial")
    partial.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(partial, out / RECORD)
    return ExportResult(step, model, adapter)


def _run_merger(command: list[str], run: Callable[[list[str]], Any] | None) -> None:
    if run is not None:
        run(command)
        return
    result = subprocess.run(command, check=False)
    if result.returncode != 0:
        raise ExportError(f"verl's model merger exited with code {result.returncode}: {' '.join(command)}")


def _place(source: Path, final: Path, copy: bool = False) -> str:
    """Put a finished folder at `final`, replacing an older export there."""
    if final.exists():
        shutil.rmtree(final)
    if copy:
        shutil.copytree(source, final)
    else:
        source.rename(final)
    return str(final)


def _read_record(out: Path) -> dict[str, Any] | None:
    try:
        return json.loads((out / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
