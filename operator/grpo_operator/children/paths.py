"""Where this job's files live on the pods: one decision, shared with the trainer via JobPaths."""

from __future__ import annotations

from ..api import contract
from ..api.v1alpha1 import GRPOJob, JobPaths


def job_paths(job: GRPOJob) -> JobPaths:
    """Absolute paths under the checkpoint volume, the same on every pod.

    Everything the driver, the reward workers and the reporter share (data, checkpoints,
    metrics) sits on that one volume, because verl may place them on any node. The folder carries
    the job's uid: a re-created job of the same name never resumes from, or exports, the old one's.
    """
    custom = job.spec.reward.custom
    return JobPaths.in_folder(
        contract.job_dir(job.name, job.uid),
        reward_file=f"{contract.REWARD_MOUNT_DIR}/{custom.key}" if custom else None,
        export_dir=job.spec.export.path,
    )


def metrics_file(job: GRPOJob, attempt: int) -> str:
    return contract.metrics_file(job_paths(job).metrics_dir, attempt)
