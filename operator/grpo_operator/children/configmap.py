"""The ConfigMap holding the resolved job for the trainer."""

from __future__ import annotations

from typing import Any

from ..api import contract
from ..api.v1alpha1 import GRPOJob
from ..config import Settings
from .meta import object_meta, spec_configmap_name
from .resolved import resolve_job


def build_spec_configmap(job: GRPOJob, settings: Settings) -> dict[str, Any]:
    resolved = resolve_job(job, settings)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(job, spec_configmap_name(job.name), "spec"),
        "data": {contract.SPEC_KEY: resolved.model_dump_json(by_alias=True, exclude_none=True, indent=2)},
    }
