"""Where this job's files live on the pods: one decision, shared with the trainer via JobPaths."""

from __future__ import annotations

from ..api.v1alpha1 import GRPOJob, JobPaths
from ..api.v1alpha1.resolved import CHECKPOINT_MOUNT, REWARD_MOUNT_DIR


def job_paths(job: GRPOJob) -> JobPaths:
    """Absolute paths under the checkpoint volume, the same on every pod.

    Everything the driver, the reward workers and the reporter share (data, checkpoints,
    metrics) sits on that one volume, because verl may place them on any node.
    """
    root = f"{CHECKPOINT_MOUNT}/{job.name}"
    custom = job.spec.reward.custom
    return JobPaths(
        job_dir=root,
        checkpoint_dir=f"{root}/checkpoints",
        metrics_dir=f"{root}/metrics",
        data_dir=f"{root}/data",
        cache_dir=f"{root}/cache",
        export_dir=job.spec.export.path or f"{root}/export",
        reward_file=f"{REWARD_MOUNT_DIR}/{custom.key}" if custom else None,
    )


def metrics_file(job: GRPOJob, attempt: int) -> str:
    """One file per attempt: verl's file logger truncates its file on every start."""
    return f"{job_paths(job).metrics_dir}/attempt-{attempt}.jsonl"
