"""Fold a LoRA adapter into the base weights verl's model merger wrote, as the TRL engine's export does.

    python -m grpo_trainer.engines.verl.lora_merge --model DIR --adapter DIR --out DIR

verl's merger (`python -m verl.model_merger merge`) writes the *base* weights of a LoRA run in
`model.safetensors` and the adapter in `lora_adapter/`; a user who loads the exported model
without peft would get the untrained model. This loads the base in float32, applies the adapter
with peft, merges it (`merge_and_unload`), and saves the result in the dtype the merger used
(bfloat16), with the processor and tokenizer files beside it. It runs in a process of its own, so
the memory of a 4B model in float32 is returned to the system when it ends.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


def fix_adapter_config(adapter_dir: Path, rank: int | None, alpha: int | None) -> list[str]:
    """Fill what verl's merger leaves out of adapter_config.json; returns what was changed.

    Without `lora_train_meta.json` (verl 0.7's PPO checkpoints, for one) the merger writes
    `lora_alpha: 0`: peft then scales the adapter by 0 and a merge returns the base model. The
    job's own rank and alpha are what training used.
    """
    path = adapter_dir / "adapter_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    changed = []
    if alpha and not config.get("lora_alpha"):
        config["lora_alpha"] = alpha
        changed.append(f"lora_alpha=0 -> {alpha}")
    if rank and not config.get("r"):
        config["r"] = rank
        changed.append(f"r -> {rank}")
    if changed:
        path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return changed


def _model_class(model_dir: Path) -> Any:
    import transformers

    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    for name in config.get("architectures") or ():
        cls = getattr(transformers, name, None)
        if cls is not None:
            return cls
    return transformers.AutoModelForImageTextToText


def merge(model_dir: Path, adapter_dir: Path, out_dir: Path) -> None:
    """Write the merged model to `out_dir` (which must not exist yet)."""
    import torch
    from peft import PeftModel

    cls = _model_class(model_dir)
    base = cls.from_pretrained(model_dir, dtype=torch.float32)
    saved_dtype = _saved_dtype(model_dir) or torch.bfloat16
    merged = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()
    merged = merged.to(saved_dtype)
    out_dir.mkdir(parents=True)
    merged.save_pretrained(out_dir, safe_serialization=True)
    for item in model_dir.iterdir():
        if item.is_file() and item.name not in _WEIGHT_FILES and not (out_dir / item.name).exists():
            shutil.copy2(item, out_dir / item.name)


def _saved_dtype(model_dir: Path) -> Any:
    """The dtype of the weights the merger wrote (bfloat16 for verl's FSDP merger), read from a header."""
    import torch
    from safetensors import safe_open

    dtypes = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
    for file in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as weights:
            for key in weights.keys():  # noqa: SIM118 (safe_open has no __iter__)
                return dtypes.get(weights.get_slice(key).get_dtype())
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grpo_trainer.engines.verl.lora_merge", description=__doc__
    )
    parser.add_argument("--model", type=Path, required=True, help="verl's merger output (base weights)")
    parser.add_argument("--adapter", type=Path, required=True, help="the LoRA adapter folder")
    parser.add_argument("--out", type=Path, required=True, help="where the merged model goes (new folder)")
    args = parser.parse_args(argv)
    merge(args.model, args.adapter, args.out)
    print(f"merged {args.adapter} into {args.model} -> {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
