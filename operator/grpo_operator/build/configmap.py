"""The ConfigMap holding the resolved job for the trainer."""

from __future__ import annotations

from typing import Any

from ..api.v1alpha1 import GRPOJob, ResolvedJob
from .meta import object_meta, spec_configmap_name
from .paths import job_paths

SPEC_KEY = "job.json"


def resolved_job(job: GRPOJob) -> ResolvedJob:
    return ResolvedJob(
        name=job.name, namespace=job.namespace, uid=job.uid, spec=job.spec, paths=job_paths(job)
    )


def build_spec_configmap(job: GRPOJob) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(job, spec_configmap_name(job.name), "spec"),
        "data": {SPEC_KEY: resolved_job(job).model_dump_json(by_alias=True, exclude_none=True, indent=2)},
    }
