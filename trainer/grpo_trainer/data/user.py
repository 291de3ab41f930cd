"""Users' own parquet files, used where they are: expanded, and checked before verl sees them.

verl reads a dataset only after Ray, the model and the rollout engine are up; a missing column
would fail the job minutes in with a KeyError deep in a worker. The schema is in the parquet
footer, so checking it here costs milliseconds and names the file and column.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..failures import DataError

VERL_COLUMNS = ("data_source", "reward_model")
"""Besides the prompt column: the reward routing key and the ground truth's holder."""


def expand(paths: list[Path]) -> list[Path]:
    """Parquet files, in order; a folder stands for the parquet files under it (sorted)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.rglob("*.parquet"))
            if not found:
                raise DataError(f"dataset folder {path} holds no .parquet files")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise DataError(f"dataset file {path} does not exist")
    return files


def check_columns(files: list[Path], prompt_key: str, image_key: str) -> tuple[int, list[str]]:
    """Rows across `files` and warnings; DataError names each file's missing columns."""
    rows = 0
    warnings: list[str] = []
    required = (prompt_key, *VERL_COLUMNS)
    for file in files:
        try:
            parquet = pq.ParquetFile(file)
        except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for unreadable files
            raise DataError(f"{file} is not a readable parquet file: {exc}") from exc
        names = parquet.schema_arrow.names
        missing = [c for c in required if c not in names]
        if missing:
            raise DataError(
                f"{file} lacks column(s) {', '.join(missing)} that verl needs (found: {', '.join(names)}); "
                f"see dataset.promptKey and verl's RL data layout"
            )
        if image_key not in names:
            warnings.append(f"{file} has no {image_key!r} column: its prompts are text only")
        holder = parquet.schema_arrow.field("reward_model").type
        if not pa.types.is_struct(holder) or "ground_truth" not in [f.name for f in holder]:
            raise DataError(f"{file}: column reward_model must be a struct with a ground_truth field")
        rows += parquet.metadata.num_rows
    return rows, warnings
