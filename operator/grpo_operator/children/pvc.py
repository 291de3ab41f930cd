"""The checkpoint volume, when the job does not name one."""

from __future__ import annotations

import json
from typing import Any

from ..api.v1alpha1 import GRPOJob
from ..config import Settings
from .meta import checkpoint_claim_name, object_meta
from .pool import pool_tolerations

POOL_TOLERATIONS_ANNOTATION = "grpo.dev/pool-tolerations"
"""On the checkpoint claim: the taints its job's pods tolerate (JSON), as the operator's settings
made them. The plugin's reader pod tolerates these to reach the volume: the plugin cannot read the
operator's settings, and once the job is deleted the claim is all that is left of it."""


def checkpoint_access_mode(job: GRPOJob) -> str:
    """FSDP ranks write their own shards on their own nodes: several nodes need ReadWriteMany."""
    ckpt = job.spec.checkpoint
    if ckpt.access_mode:
        return ckpt.access_mode
    return "ReadWriteMany" if job.spec.resources.nodes > 1 else "ReadWriteOnce"


def checkpoint_claim(job: GRPOJob) -> str:
    return job.spec.checkpoint.claim_name or checkpoint_claim_name(job.name)


def build_checkpoint_pvc(job: GRPOJob, settings: Settings) -> dict[str, Any] | None:
    """None when the job brings its own claim.

    With `retention: Retain` (the default) the claim has no owner reference, so deleting the
    GRPOJob leaves the checkpoints in place; `Delete` hands it to the garbage collector.
    """
    ckpt = job.spec.checkpoint
    if ckpt.claim_name:
        return None
    spec: dict[str, Any] = {
        "accessModes": [checkpoint_access_mode(job)],
        "resources": {"requests": {"storage": ckpt.size or settings.default_checkpoint_size}},
    }
    storage_class = ckpt.storage_class_name or settings.default_storage_class
    if storage_class:
        spec["storageClassName"] = storage_class
    meta = object_meta(job, checkpoint_claim_name(job.name), "checkpoints", owned=ckpt.retention == "Delete")
    annotations = meta.setdefault("annotations", {})
    annotations["grpo.dev/retention"] = ckpt.retention
    profile = settings.profile(job.spec.resources.accelerator)
    annotations[POOL_TOLERATIONS_ANNOTATION] = json.dumps(pool_tolerations(job, profile), sort_keys=True)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}
