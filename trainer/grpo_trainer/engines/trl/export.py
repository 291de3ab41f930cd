"""Export of a trained policy: the LoRA adapter, and the base model with the adapter merged in.

The folder layout and its record are every engine's (grpo_trainer/export_record.py). `model/` is
the merged model (peft's merge_and_unload), loadable without peft; `lora-adapter/` applies to the
base model. The processor is saved beside the weights, so each folder is self-contained.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from grpo_operator.api.contract import EXPORT_ADAPTER_DIR, EXPORT_MODEL_DIR

from ...export_record import place, write_record


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
        written["loraAdapter"] = place(staging, root / EXPORT_ADAPTER_DIR)
    if merged:
        staging = Path(tempfile.mkdtemp(prefix=".model-", dir=root))
        plain = model.merge_and_unload()
        plain.save_pretrained(staging)
        processor.save_pretrained(staging)
        written["model"] = place(staging, root / EXPORT_MODEL_DIR)
    write_record(root, step, written.get("model"), written.get("loraAdapter"))
    return written
