"""Test inputs for the trainer: jobs from examples/, a geo3k-shaped dataset, a hub cache layout."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from grpo_operator.api.documents import job_document
from grpo_operator.api.v1alpha1 import JobPaths, ResolvedJob
from grpo_trainer.spec import resolve_manifest
from PIL import Image, ImageDraw

from support.examples import example_document, with_changes

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"
VERL_CONFIG_CACHE = REPO_ROOT / ".cache" / "verl-configs"
GEO3K_REPO = "hiyouga/geometry3k"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def example_manifests() -> dict[str, dict[str, Any]]:
    """Every GRPOJob under examples/, by file stem."""
    return {path.stem: job_document(path.read_text(), path.name) for path in sorted(EXAMPLES.glob("*.yaml"))}


def example_job(stem: str, root: Path | None = None, **spec_changes: Any) -> ResolvedJob:
    """An example as the operator resolves it; with `root`, its paths moved under a test folder."""
    manifest = example_document(stem)
    if spec_changes:
        manifest = {**manifest, "spec": with_changes(manifest["spec"], spec_changes)}
    job = resolve_manifest(manifest)
    if root is None:
        return job
    paths = JobPaths.in_folder(str(root / job.name), reward_file=job.paths.reward_file)
    return job.model_copy(update={"paths": paths})


def png(seed: int, size: tuple[int, int] = (48, 32)) -> bytes:
    """A small real PNG: a triangle whose corners depend on `seed`, so images differ per row."""
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    w, h = size
    draw.polygon([(seed % w, h - 1), (w - 1, (seed * 7) % h), (0, (seed * 3) % h)], outline="black")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def write_geo3k_split(path: Path, split: str, rows: int, offset: int = 0) -> list[dict[str, Any]]:
    """One split in the hub dataset's layout: images (list of {bytes, path}), problem, answer."""
    records = [
        {
            "images": [{"bytes": png(offset + i), "path": f"{split}_{i}.png"}],
            "problem": f"<image>Find x in triangle {split} {i}. Round to the nearest tenth.",
            "answer": str(offset + i + 0.5),
        }
        for i in range(rows)
    ]
    schema = pa.schema(
        [
            ("images", pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))),
            ("problem", pa.string()),
            ("answer", pa.string()),
        ]
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(records, schema=schema), path)
    return records


def write_geo3k_dataset(folder: Path, rows: dict[str, int] | None = None) -> dict[str, list[dict[str, Any]]]:
    """The hiyouga/geometry3k repository layout: data/<split>-00000-of-00001.parquet."""
    rows = rows or {"train": 7, "validation": 2, "test": 3}
    return {
        split: write_geo3k_split(
            folder / "data" / f"{split}-00000-of-00001.parquet", split, n, offset=100 * k
        )
        for k, (split, n) in enumerate(rows.items())
    }


def hf_cached_dataset(cache_dir: Path, repo_id: str = GEO3K_REPO, **kwargs: Any) -> dict[str, Any]:
    """A dataset placed in the Hugging Face hub cache layout, as a download would leave it."""
    repo = cache_dir / "huggingface" / "hub" / f"datasets--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(COMMIT)
    return write_geo3k_dataset(repo / "snapshots" / COMMIT, **kwargs)


class FakeAPI:
    """Records patches; fails the first `failures` calls like an API server that is away."""

    def __init__(self, failures: int = 0):
        self.failures = failures
        self.patches: list[dict] = []
        self.calls = 0

    def patch_status(self, body: dict) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("apiserver unavailable")
        self.patches.append(body)
