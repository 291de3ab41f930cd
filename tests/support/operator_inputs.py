"""Test helpers for the operator's pure code: examples and specs as parsed jobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grpo_operator.api.documents import job_document
from grpo_operator.api.v1alpha1 import GRPOJob

from support.examples import with_changes

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
METADATA = {"namespace": "team-a", "uid": "00000000-0000-0000-0000-000000000001", "generation": 1}


def example_body(path: Path) -> dict[str, Any]:
    body = job_document(path.read_text(), path.name)
    body["metadata"] = {**body["metadata"], **METADATA, "creationTimestamp": "2026-11-29T10:00:00Z"}
    return body


def job_from(body: dict[str, Any], **spec_changes: Any) -> GRPOJob:
    """A job from a body, with spec changes (examples.with_changes): job_from(b, **{"resources.nodes": 2})."""
    return GRPOJob.model_validate({**body, "spec": with_changes(body["spec"], spec_changes)})


def minimal_body(**spec: Any) -> dict[str, Any]:
    base = {
        "model": {"source": "hf://Qwen/Qwen3-VL-4B-Instruct"},
        "dataset": {"preset": "geo3k"},
        "reward": {"builtin": "geo3k"},
        "resources": {"accelerator": "nvidia", "devicesPerNode": 8},
        "algorithm": {"trainBatchSize": 64, "miniBatchSize": 16, "groupSize": 4},
    }
    base.update(spec)
    return {
        "apiVersion": "grpo.dev/v1alpha1",
        "kind": "GRPOJob",
        "metadata": {"name": "demo", **METADATA, "creationTimestamp": "2026-11-29T10:00:00Z"},
        "spec": base,
    }
