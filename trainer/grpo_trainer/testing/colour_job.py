"""Files for a colour-task GRPOJob that trains for real on CPU: the tiny model and the dataset.

`examples/colours-cpu.yaml` trains the offline tiny Qwen3-VL (blind at the start: see
`tiny_vlm.blind_projector`) to name the colour of a square, through the TRL engine, on an
`accelerator: cpu` pool. Its model and data come from claims, as a user stages weights and data:

    python -m grpo_trainer.testing.colour_job OUT_DIR

writes `OUT_DIR/models/tiny-qwen3-vl/` (weights, tokenizer, processor) and
`OUT_DIR/data/colours/{train,validation}.parquet` in the dataset format every engine reads (a chat
`prompt` whose text marks the image with `<image>`, the image bytes, `reward_model.ground_truth`).
Copy `models/` onto the claim the job names for its model and `data/` onto its data claim.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path
from typing import Any

from .colour_task import QUESTION, WORDS, make_rows
from .tiny_vlm import build_tiny_vlm

MODEL_DIR = "models/tiny-qwen3-vl"
DATA_DIR = "data/colours"
DATA_SOURCE = "colours"


def verl_rows(count: int, *, seed: int, split: str) -> list[dict[str, Any]]:
    """Colour rows in the dataset format the data step reads (the verl layout)."""
    rows = []
    for index, row in enumerate(make_rows(count, seed=seed)):
        buffer = io.BytesIO()
        row["image"].save(buffer, format="PNG")
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "prompt": [{"role": "user", "content": f"<image>{QUESTION}"}],
                "images": [{"bytes": buffer.getvalue(), "path": None}],
                "ability": "vision",
                "reward_model": {"style": "rule", "ground_truth": row["answer"]},
                "extra_info": {"split": split, "index": index},
            }
        )
    return rows


def write_parquet(path: str | os.PathLike[str], rows: list[dict[str, Any]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), target)
    return target


def stage(out_dir: str | os.PathLike[str], *, train_rows: int = 256, validation_rows: int = 32) -> Path:
    """Write the model and the dataset under `out_dir`; returns `out_dir`."""
    root = Path(out_dir)
    build_tiny_vlm(root / MODEL_DIR, words=WORDS, blind=True)
    write_parquet(root / DATA_DIR / "train.parquet", verl_rows(train_rows, seed=1, split="train"))
    write_parquet(
        root / DATA_DIR / "validation.parquet", verl_rows(validation_rows, seed=2, split="validation")
    )
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grpo_trainer.testing.colour_job", description=__doc__.splitlines()[0]
    )
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--train-rows", type=int, default=256)
    parser.add_argument("--validation-rows", type=int, default=32)
    args = parser.parse_args(argv)
    root = stage(args.out_dir, train_rows=args.train_rows, validation_rows=args.validation_rows)
    print(f"model: {root / MODEL_DIR}\ndata:  {root / DATA_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
