"""Semantic checks: what the schema cannot say, run before anything is created.

The CRD's schema and CEL rules catch types, bounds and simple cross-field rules at `kubectl
apply`. What is left needs arithmetic over several sections or the operator's settings: device
counts against batch sizes, tensor parallelism against devices, the checkpoint volume's access
mode against the node count, profiles that exist. Each problem names the field, what was
expected and what was found, because that message is what the user reads in `kubectl get`.
"""

from __future__ import annotations

import re

from .api.batch import Batch, batch_problems
from .api.problem import Problem
from .api.v1alpha1 import GRPOJob
from .api.v1alpha1.base import JOB_NAME_PATTERN, MAX_JOB_NAME
from .children.pvc import checkpoint_access_mode
from .config import Settings


def _batch_problems(job: GRPOJob) -> list[Problem]:
    """verl's own start-up rules (api/batch.py), checked before a cluster is paid for."""
    return batch_problems(Batch.from_spec(job.spec))


def _resource_problems(job: GRPOJob, settings: Settings) -> list[Problem]:
    spec = job.spec
    res = spec.resources
    problems: list[Problem] = []
    profile = settings.profile(res.accelerator)
    if profile is None:
        problems.append(
            Problem(
                "spec.resources.accelerator",
                f"no accelerator profile {res.accelerator!r} in the operator's settings "
                f"(configured: {', '.join(sorted(settings.profiles)) or 'none'})",
            )
        )
    elif res.product and not profile.product_label:
        problems.append(
            Problem(
                "spec.resources.product",
                f"the {res.accelerator} profile has no productLabel, so a product cannot be selected",
            )
        )
    if profile is not None and profile.device_resource in res.extra_resources:
        # The schema refuses the well-known device resources; a profile of the operator's settings
        # may name another, and a second entry for it would replace devicesPerNode in the pod.
        problems.append(
            Problem(
                "spec.resources.extraResources",
                f"{profile.device_resource} is the {res.accelerator} pool's device, which "
                f"resources.devicesPerNode asks for ({res.devices_per_node}): remove it from extraResources",
            )
        )
    if profile is not None and profile.device_type == "cpu" and spec.engine.name == "verl":
        problems.append(
            Problem(
                "spec.engine.name",
                f"verl's rollouts need GPUs or NPUs (vLLM); the {res.accelerator} pool has none: "
                "use engine trl for a CPU run",
            )
        )
    if spec.engine.name == "trl" and spec.engine.lora is None:
        problems.append(Problem("spec.engine.lora", "engine.name=trl trains LoRA adapters: set engine.lora"))
    if spec.engine.name == "trl" and spec.world_size != 1:
        problems.append(
            Problem(
                "spec.engine.name",
                f"the trl engine trains on one device; resources ask for {spec.world_size} "
                "(set devicesPerNode=1 and nodes=1, or use engine verl)",
            )
        )
    return problems


def _volume_problems(job: GRPOJob, claim_access_modes: list[str] | None) -> list[Problem]:
    spec = job.spec
    if spec.resources.nodes <= 1:
        return []
    if spec.checkpoint.claim_name:
        modes = claim_access_modes or []
        if "ReadWriteMany" not in modes:
            return [
                Problem(
                    "spec.checkpoint.claimName",
                    f"{spec.resources.nodes} nodes write checkpoint shards at once, so claim "
                    f"{spec.checkpoint.claim_name!r} must be ReadWriteMany (it is {', '.join(modes) or 'not found'})",
                )
            ]
        return []
    if checkpoint_access_mode(job) != "ReadWriteMany":
        return [
            Problem(
                "spec.checkpoint.accessMode",
                f"{spec.resources.nodes} nodes write checkpoint shards at once: use ReadWriteMany",
            )
        ]
    return []


def _data_problems(job: GRPOJob) -> list[Problem]:
    spec = job.spec
    if spec.dataset.train and not spec.dataset.validation and spec.evaluation.interval > 0:
        return [
            Problem(
                "spec.evaluation.interval",
                "validation every "
                f"{spec.evaluation.interval} steps needs dataset.validation (or set evaluation.interval=0)",
            )
        ]
    return []


def validate(
    job: GRPOJob,
    settings: Settings,
    *,
    claim_access_modes: list[str] | None = None,
    priority_class_exists: bool | None = None,
    workload_priority_class_exists: bool | None = None,
) -> list[Problem]:
    """All problems with the job; empty when it can run.

    `claim_access_modes` are the access modes of `spec.checkpoint.claimName` as the API server
    reports them, `priority_class_exists` whether `spec.resources.priorityClassName` names a
    PriorityClass, and `workload_priority_class_exists` whether
    `spec.resources.workloadPriorityClass` names a Kueue WorkloadPriorityClass (None: not known).
    The caller looks them up; this function stays pure.
    """
    problems: list[Problem] = []
    if not re.match(JOB_NAME_PATTERN, job.name):
        problems.append(
            Problem(
                "metadata.name",
                f"{job.name!r} must be a DNS-1035 label (lower-case letters, digits and '-', starting "
                "with a letter): KubeRay names the Ray cluster's Services after it",
            )
        )
    if len(job.name) > MAX_JOB_NAME:
        problems.append(
            Problem(
                "metadata.name",
                f"must be at most {MAX_JOB_NAME} characters (KubeRay derives Service names from it); "
                f"{job.name!r} has {len(job.name)}",
            )
        )
    problems += _resource_problems(job, settings)
    if priority_class_exists is False:
        # Every Ray pod would be refused at admission, and KubeRay would try again forever.
        problems.append(
            Problem(
                "spec.resources.priorityClassName",
                f"no PriorityClass {job.spec.resources.priority_class_name!r} in the cluster",
            )
        )
    if workload_priority_class_exists is False:
        # Kueue cannot make a Workload of a class it does not have: the job would read Queued for ever.
        problems.append(
            Problem(
                "spec.resources.workloadPriorityClass",
                f"no Kueue WorkloadPriorityClass {job.spec.resources.workload_priority_class!r} in the cluster",
            )
        )
    problems += _batch_problems(job)
    problems += _volume_problems(job, claim_access_modes)
    problems += _data_problems(job)
    return problems


def describe(problems: list[Problem]) -> str:
    """One message for the condition and the Event."""
    return "; ".join(str(p) for p in problems)
