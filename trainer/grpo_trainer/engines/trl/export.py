"""Export of a trained policy: the LoRA adapter, and the base model with the adapter merged in.

Same layout as the verl engine's export (`grpo_trainer.export`), so `status.outputs` and users see
one shape whatever the engine:

    model/          the merged Hugging Face model (peft's merge_and_unload), loadable without peft
    lora-adapter/   adapter_config.json + adapter_model.safetensors, to apply to the base model
    export.json     {"step", "model", "loraAdapter", "exportedAt"}, written last

Each folder is written under a temporary name and renamed into place, and the processor is saved
beside the weights, so a folder that exists is complete and self-contained.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RECORD = "export.json"
MODEL_DIR = "model"
ADAPTER_DIR = "lora-adapter"


def _place(staging: Path, final: Path) -> str:
    if final.exists():
        shutil.rmtree(final)
    staging.rename(final)
    return str(final)


def export_policy(
    model: Any,
    processor: Any,
    out_dir: str | os.PathLike[str],
    *,
    step: int,
    adapter: bool = True,
    merged: bool = True,
) -> dict[str, str]:
    """Write `lora-adapter/` and/or `model/` under `out_dir`; return what was written.

    `model` is the trained `PeftModel`. The merge happens last because `merge_and_unload` folds
    the adapter into the base weights in place.
    """
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    if adapter:
        staging = Path(tempfile.mkdtemp(prefix=".adapter-", dir=root))
        model.save_pretrained(staging)
        processor.save_pretrained(staging)
        written["loraAdapter"] = _place(staging, root / ADAPTER_DIR)
    if merged:
        staging = Path(tempfile.mkdtemp(prefix=".model-", dir=root))
        plain = model.merge_and_unload()
        plain.save_pretrained(staging)
        processor.save_pretrained(staging)
        written["model"] = _place(staging, root / MODEL_DIR)
    record = {
        "step": step,
        "model": written.get("model"),
        "loraAdapter": written.get("loraAdapter"),
        "exportedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    partial = root / (RECORD + ".partial")
    partial.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(partial, root / RECORD)
    return written
