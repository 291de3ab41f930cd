"""A GRPOJob resolved for the trainer: its spec, its paths and its accelerator pool's facts.

The operator writes this into the spec ConfigMap; `grpo-train plan` resolves a plain manifest
with the same function (and the default settings), so what it prints is what would run.
"""

from __future__ import annotations

from ..api.v1alpha1 import GRPOJob, ResolvedAccelerator, ResolvedJob
from ..config import AcceleratorProfile, Settings
from .paths import job_paths


def resolve_accelerator(name: str, profile: AcceleratorProfile) -> ResolvedAccelerator:
    return ResolvedAccelerator(
        name=name,
        device=profile.device_type,
        ray_resource=profile.ray_resource,
        env=dict(profile.env),
        torch_compile=profile.torch_compile,
        preload_libraries=list(profile.preload_libraries),
    )


def resolve_job(job: GRPOJob, settings: Settings) -> ResolvedJob:
    """The trainer's view of `job`; ValueError when no profile serves its accelerator."""
    name = job.spec.resources.accelerator
    profile = settings.profile(name)
    if profile is None:  # validation refuses this first; a builder never guesses
        raise ValueError(f"no accelerator profile {name!r}")
    return ResolvedJob(
        name=job.name,
        namespace=job.namespace,
        uid=job.uid,
        spec=job.spec,
        paths=job_paths(job),
        accelerator=resolve_accelerator(name, profile),
    )
