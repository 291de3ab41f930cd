"""The ConfigMap holding the resolved job for the trainer, pinned to the spec it was rendered from.

The API server stores a spec as the user wrote it, and the models fill in every default (spec.py),
so the resolved job is where a job's defaults are written down. It is rendered once for the spec
as written and kept for every later attempt of that spec: an operator release that changes a
default (or an accelerator profile) does not change the batch size or learning rate of a job that
is already running, when a retry resumes its checkpoint. Editing the spec renders it again, with
the defaults of the operator running then; setting `runPolicy.suspend` is not such an edit, so a
job resumed after an upgrade goes on as it started. A ConfigMap deleted by hand is rendered again
(level-triggered), which takes up the running operator's defaults: deleting it is how a job is
moved onto them on purpose.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..api import contract
from ..api.v1alpha1 import GRPOJob
from ..config import Settings
from .meta import object_meta, spec_configmap_name
from .resolved import resolve_job

RENDERED_FROM_ANNOTATION = "grpo.dev/rendered-from"
"""On the spec ConfigMap: the digest of the spec as written (`written_spec_digest`) it was
rendered from."""


def written_spec_digest(job: GRPOJob) -> str:
    """A digest of the fields the user wrote (and the server stored), less `runPolicy.suspend`.

    Only what was written: a default a later release adds or changes leaves it as it was.
    """
    written = job.spec.model_dump(mode="json", by_alias=True, exclude_unset=True)
    run_policy = written.get("runPolicy")
    if isinstance(run_policy, dict):
        run_policy.pop("suspend", None)
        if not run_policy:
            del written["runPolicy"]  # `suspend: false` written alone is the spec it was before
    canonical = json.dumps(written, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def build_spec_configmap(job: GRPOJob, settings: Settings) -> dict[str, Any]:
    resolved = resolve_job(job, settings)
    metadata = object_meta(job, spec_configmap_name(job.name), "spec")
    metadata["annotations"] = {RENDERED_FROM_ANNOTATION: written_spec_digest(job)}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {contract.SPEC_KEY: resolved.model_dump_json(by_alias=True, exclude_none=True, indent=2)},
    }


def is_pinned(existing: dict[str, Any], job: GRPOJob) -> bool:
    """True when `existing`, the job's spec ConfigMap, was rendered from the job's spec as it is
    written now, and so is kept as it is (one rendered before this annotation is rendered again)."""
    annotations = (existing.get("metadata") or {}).get("annotations") or {}
    return annotations.get(RENDERED_FROM_ANNOTATION) == written_spec_digest(job)
