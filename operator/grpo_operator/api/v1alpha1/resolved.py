"""The resolved job the operator mounts for the trainer (`/grpo/spec/job.json`).

It is the job's spec as stored (schema defaults applied) plus the absolute paths the operator
chose for this job's volumes, so the trainer never guesses where anything is mounted.
"""

from __future__ import annotations

from typing import Literal

from .base import ApiModel
from .spec import GRPOJobSpec

SPEC_MOUNT_DIR = "/grpo/spec"
SPEC_FILE = f"{SPEC_MOUNT_DIR}/job.json"
CHECKPOINT_MOUNT = "/grpo/checkpoints"
REWARD_MOUNT_DIR = "/grpo/reward"


class JobPaths(ApiModel):
    """Absolute paths, identical on every pod of the job's Ray cluster."""

    job_dir: str
    """This job's folder on the checkpoint volume."""
    checkpoint_dir: str
    """verl's trainer.default_local_dir (global_step_N folders)."""
    metrics_dir: str
    """One metrics file per attempt lives here (attempt-N.jsonl)."""
    data_dir: str
    """Prepared datasets, cached by content."""
    cache_dir: str
    """Downloads (hub models, s3 objects), kept across attempts."""
    export_dir: str
    """Exported model and adapter."""
    reward_file: str | None = None
    """Mounted user reward function, for reward.custom."""


class ResolvedJob(ApiModel):
    """Everything the trainer needs to run one GRPOJob."""

    api_version: Literal["grpo.dev/v1alpha1"] = "grpo.dev/v1alpha1"
    name: str
    namespace: str
    uid: str
    spec: GRPOJobSpec
    paths: JobPaths
