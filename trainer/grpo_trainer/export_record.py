"""The export folder's shape, the same for every engine, so users and status see one layout:

    model/          the Hugging Face model (LoRA merged in where LoRA was trained)
    lora-adapter/   adapter_config.json + adapter_model.safetensors (LoRA runs)
    export.json     {"step", "model", "loraAdapter", "exportedAt"}, written last

Every folder is finished under a temporary name and renamed into place, and the record is
written last, so a retried export after a crash either finds a finished export of the same step
or starts clean.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from grpo_operator.api.contract import EXPORT_RECORD
from grpo_operator.api.timestamps import rfc3339


def read_record(out_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The finished export's record, or None when there is none (or it is unreadable)."""
    try:
        record = json.loads((Path(out_dir) / EXPORT_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def write_record(out_dir: str | os.PathLike[str], step: int, model: str | None, adapter: str | None) -> None:
    """Mark the export of `step` finished (atomically: a reader never sees half a record)."""
    record = {
        "step": step,
        "model": model,
        "loraAdapter": adapter,
        "exportedAt": rfc3339(),
    }
    out = Path(out_dir)
    partial = out / (EXPORT_RECORD + ".partial")
    partial.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(partial, out / EXPORT_RECORD)


def place(source: Path, final: Path, copy: bool = False) -> str:
    """Put a finished folder at `final`, replacing an older export there."""
    if final.exists():
        shutil.rmtree(final)
    if copy:
        shutil.copytree(source, final)
    else:
        source.rename(final)
    return str(final)
