"""The resolved job the operator mounts for the trainer (contract.SPEC_FILE).

It is the job's spec with every model default filled in (the API server stores the spec as
written), plus the absolute paths the operator chose for this job's volumes and the facts of the
accelerator pool it runs on, so the trainer never guesses where anything is mounted or tests for
an accelerator by name.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..contract import JOB_SUBDIRS, DeviceType, pod_path, under_workdir
from .base import ApiModel
from .spec import GRPOJobSpec


class JobPaths(ApiModel):
    """Absolute paths, identical on every pod of the job's Ray cluster."""

    job_dir: str
    """This job's folder on the checkpoint volume."""
    checkpoint_dir: str
    """The engine's checkpoint folder (verl's trainer.default_local_dir, TRL's output_dir)."""
    metrics_dir: str
    """One metrics file per attempt lives here (contract.metrics_file)."""
    data_dir: str
    """Prepared datasets, cached by content."""
    cache_dir: str
    """Downloads (hub models, s3 objects), kept across attempts."""
    export_dir: str
    """Exported model and adapter."""
    reward_file: str | None = None
    """Mounted user reward function, for reward.custom."""

    @classmethod
    def in_folder(
        cls, job_dir: str, *, reward_file: str | None = None, export_dir: str | None = None
    ) -> JobPaths:
        """A job's folder and its layout (contract.JOB_SUBDIRS); `export_dir` where the spec moves it."""
        folders = {field: f"{job_dir}/{sub}" for field, sub in JOB_SUBDIRS.items()}
        if export_dir:
            folders["export_dir"] = export_dir
        return cls(job_dir=job_dir, **folders, reward_file=reward_file)

    def under(self, workdir: str | None) -> JobPaths:
        """The same paths as seen from outside the pod, with its /grpo tree under `workdir`."""
        moved = {
            name: under_workdir(value, workdir) if isinstance(value, str) else value
            for name, value in self.model_dump().items()
        }
        return JobPaths(**moved)


class ResolvedAccelerator(ApiModel):
    """What the trainer must know of the pool it runs on, from the operator's accelerator profile."""

    name: str
    """The profile (spec.resources.accelerator)."""
    device: DeviceType
    """torch's device type: the engine's `trainer.device`."""
    ray_resource: str | None = None
    """The Ray resource each device is (GPU, NPU); None for CPU pools."""
    env: dict[str, str] = Field(default_factory=dict)
    """Platform variables the engine and every Ray worker need (the pod has them too; a run
    outside a pod gets them from here)."""
    torch_compile: bool = True
    """Whether torch.compile works on this device; when not, the engine turns it off unless the
    job asks for it explicitly."""
    preload_libraries: list[str] = Field(default_factory=list)
    """Shared libraries put in front of LD_PRELOAD when present in the image (`{arch}` is the
    machine's architecture, e.g. x86_64 or aarch64)."""


class ResolvedJob(ApiModel):
    """Everything the trainer needs to run one GRPOJob."""

    api_version: Literal["grpo.dev/v1alpha1"] = "grpo.dev/v1alpha1"
    name: str
    namespace: str
    uid: str
    spec: GRPOJobSpec
    paths: JobPaths
    accelerator: ResolvedAccelerator
    workdir: str | None = Field(default=None, exclude=True)
    """Outside a pod: where the pod's /grpo tree lies (never written to the ConfigMap)."""

    def under(self, workdir: str | None) -> ResolvedJob:
        """This job as a process outside the pod sees it (contract.Env.WORKDIR)."""
        if not workdir:
            return self
        return self.model_copy(update={"paths": self.paths.under(workdir), "workdir": workdir})

    def local_path(self, path: str) -> str:
        """Where a pod path (a pvc:// source's mount, the spec file) is for this process."""
        return under_workdir(path, self.workdir)

    def pod_path(self, path: str) -> str:
        """What a path of this process is called on the pods (for the job's status)."""
        return pod_path(path, self.workdir)
