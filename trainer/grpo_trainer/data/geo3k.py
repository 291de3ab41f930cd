"""The geo3k preset: hiyouga/geometry3k -> verl's RL parquet, row for row as verl's own preprocessing.

Input (the hub dataset's parquet files): `images` (a list of {bytes, path}), `problem` (starting
with `<image>`, which verl replaces by the picture) and `answer`, in train/validation/test splits.
Output, like verl's examples/data_preprocess/geo3k.py: `data_source` = hiyouga/geometry3k (the key
verl's reward routing and validation metrics use), a one-turn chat `prompt` (problem + the
think/boxed instruction), the `images` unchanged, `ability`, `reward_model` with the ground truth
and `extra_info`. As in verl's recipe the test split is the validation set.

Rows stream through in record batches, so memory stays flat however large the split.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..failures import DataError

DATA_SOURCE = "hiyouga/geometry3k"
INSTRUCTION = (
    "You FIRST think about the reasoning process as an internal monologue and then provide the final answer. "
    "The reasoning process MUST BE enclosed within <think> </think> tags. "
    "The final answer MUST BE put in \\boxed{}."
)
CONVERTER_VERSION = "geo3k-v1"
SPLITS = ("train", "test")
"""Splits written; `test` doubles as validation, as in verl's recipe."""
REQUIRED_COLUMNS = ("images", "problem", "answer")
_BATCH_ROWS = 256

IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("images", pa.list_(IMAGE)),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        (
            "extra_info",
            pa.struct(
                [
                    ("split", pa.string()),
                    ("index", pa.int64()),
                    ("answer", pa.string()),
                    ("question", pa.string()),
                ]
            ),
        ),
    ]
)


def find_split_files(folder: Path) -> dict[str, list[Path]]:
    """The parquet files of each split in a downloaded dataset folder (hub layout or flat)."""
    found: dict[str, list[Path]] = {}
    for split in ("train", "validation", "test"):
        files = sorted(
            {
                *folder.rglob(f"{split}-*.parquet"),
                *folder.rglob(f"{split}.parquet"),
                *folder.glob(f"**/{split}/*.parquet"),
            }
        )
        if files:
            found[split] = files
    missing = [s for s in SPLITS if s not in found]
    if missing:
        raise DataError(
            f"geo3k source {folder} has no {' or '.join(missing)} split; expected parquet files named like "
            f"data/train-00000-of-00001.parquet (the hiyouga/geometry3k layout)"
        )
    return found


def convert_row(row: dict[str, Any], split: str, index: int) -> dict[str, Any]:
    """One hub row -> one verl row."""
    problem = row["problem"]
    answer = row["answer"]
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": f"{problem} {INSTRUCTION}"}],
        "images": [_image(image) for image in row["images"] or []],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": answer},
        "extra_info": {"split": split, "index": index, "answer": answer, "question": problem},
    }


def _image(image: Any) -> dict[str, Any]:
    if isinstance(image, dict):
        return {"bytes": image.get("bytes"), "path": image.get("path")}
    if isinstance(image, bytes | bytearray):
        return {"bytes": bytes(image), "path": None}
    raise DataError(f"geo3k: an image is a {type(image).__name__}, expected {{bytes, path}}")


def count_rows(files: list[Path]) -> int:
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def convert_split(files: list[Path], split: str, out: Path, progress: Any = None) -> int:
    """Convert one split's files into `out`; returns the number of rows written."""
    index = 0
    with pq.ParquetWriter(out, SCHEMA, compression="zstd") as writer:
        for batch in _batches(files):
            rows = [convert_row(row, split, index + i) for i, row in enumerate(batch)]
            writer.write_table(pa.Table.from_pylist(rows, schema=SCHEMA))
            index += len(rows)
            if progress is not None:
                progress.update(len(rows))
    return index


def _batches(files: list[Path]) -> Iterator[list[dict[str, Any]]]:
    for file in files:
        parquet = pq.ParquetFile(file)
        missing = [c for c in REQUIRED_COLUMNS if c not in parquet.schema_arrow.names]
        if missing:
            raise DataError(
                f"geo3k file {file} lacks column(s) {', '.join(missing)}; found {', '.join(parquet.schema_arrow.names)}"
            )
        for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, columns=list(REQUIRED_COLUMNS)):
            yield batch.to_pylist()
