"""Training data for every engine: a preset converted once per content, or the user's parquet as it is.

The files are in verl's parquet layout (prompt, images, reward model ground truth), which the TRL
engine reads too (engines/trl/data.py).

`prepare` is what `grpo-train prepare-data` and `grpo-train run` call; `planned` says where the
files will be without touching them, for `grpo-train plan`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_operator.api.sources import parse_source
from grpo_operator.api.timestamps import rfc3339
from grpo_operator.api.v1alpha1 import ResolvedJob

from .. import sources
from ..failures import DataError
from . import geo3k
from .cache import content_key, materialize, read_manifest
from .user import check_columns, expand

PRESET_SOURCES = {"geo3k": "hf://hiyouga/geometry3k"}


@dataclass(frozen=True)
class PreparedData:
    train_files: list[str]
    val_files: list[str]
    train_rows: int | None
    """Rows in the training files, for the step count (None when not read yet)."""
    built: bool = False
    """This call converted the preset (False: it was already cached, or user files)."""
    warnings: list[str] = field(default_factory=list)


def planned(job: ResolvedJob) -> PreparedData:
    """Where the data will be, without reading it (the preset's content hash is not known yet)."""
    dataset = job.spec.dataset
    if dataset.preset:
        folder = f"{job.paths.data_dir}/{dataset.preset}-<content-hash>"
        return PreparedData([f"{folder}/train.parquet"], [f"{folder}/test.parquet"], None)
    train = [_local(uri, job) for uri in dataset.train or []]
    val = [_local(uri, job) for uri in dataset.validation or []]
    return PreparedData(train, val, None)


def known_train_rows(job: ResolvedJob) -> int | None:
    """Training rows of data that is already prepared or local, without preparing anything."""
    dataset = job.spec.dataset
    if dataset.preset:
        folders = Path(job.paths.data_dir).glob(f"{dataset.preset}-*")
        manifests = [m for m in (read_manifest(f) for f in sorted(folders, key=_mtime)) if m]
        return int(manifests[-1]["rows"]["train"]) if manifests else None
    try:
        files = expand([Path(p) for p in planned(job).train_files])
        return check_columns(files, dataset.prompt_key, dataset.image_key)[0]
    except DataError:
        return None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _local(uri: str, job: ResolvedJob) -> str:
    ref = parse_source(uri)
    return job.local_path(ref.local_path) if ref.local_path else f"<{uri} in the job cache>"


def prepare(job: ResolvedJob, progress: bool = True) -> PreparedData:
    """Make the job's data ready for verl on the shared volume and return its files."""
    dataset = job.spec.dataset
    cache_dir = job.paths.cache_dir
    if dataset.preset == "geo3k":
        source = dataset.source or PRESET_SOURCES["geo3k"]
        folder = sources.resolve(source, "dataset", cache_dir, workdir=job.workdir)
        return _prepare_geo3k(folder, source, Path(job.paths.data_dir), progress)
    train = expand(
        [sources.resolve(uri, "dataset", cache_dir, workdir=job.workdir) for uri in dataset.train or []]
    )
    val = expand(
        [sources.resolve(uri, "dataset", cache_dir, workdir=job.workdir) for uri in dataset.validation or []]
    )
    rows, warnings = check_columns(train, dataset.prompt_key, dataset.image_key)
    _, val_warnings = check_columns(val, dataset.prompt_key, dataset.image_key)
    return PreparedData(
        [str(f) for f in train], [str(f) for f in val], rows, warnings=warnings + val_warnings
    )


def _prepare_geo3k(folder: Path, source: str, data_dir: Path, progress: bool) -> PreparedData:
    splits = geo3k.find_split_files(folder)
    inputs = [f for split in geo3k.SPLITS for f in splits[split]]
    key = content_key(inputs, f"{geo3k.CONVERTER_VERSION}\0{geo3k.INSTRUCTION}")
    final = data_dir / f"geo3k-{key[:16]}"

    def build(tmp: Path) -> dict[str, Any]:
        rows = {}
        for split in geo3k.SPLITS:
            with _progress(geo3k.count_rows(splits[split]), f"geo3k {split}", progress) as bar:
                rows[split] = geo3k.convert_split(splits[split], split, tmp / f"{split}.parquet", bar)
        return {
            "preset": "geo3k",
            "source": source,
            "contentKey": key,
            "converter": geo3k.CONVERTER_VERSION,
            "rows": rows,
            "createdAt": rfc3339(),
        }

    manifest, built = materialize(final, build)
    return PreparedData(
        [str(final / "train.parquet")],
        [str(final / "test.parquet")],
        int(manifest["rows"]["train"]),
        built=built,
    )


def _progress(total: int, desc: str, enabled: bool) -> Any:
    """A tqdm bar that stays quiet in logs: one update every few seconds at most."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="rows", mininterval=5.0, disable=not enabled, file=sys.stderr)
