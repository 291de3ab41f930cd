"""The KubeRay RayJob (and its RayCluster) for one attempt of a GRPOJob."""

from __future__ import annotations

import json
from typing import Any

from ..api import contract, quantity
from ..api.contract import CHECKPOINT_MOUNT, REWARD_MOUNT_DIR, SPEC_FILE, SPEC_KEY, SPEC_MOUNT_DIR, Env
from ..api.problem import Problem, ProblemError
from ..api.sources import parse_source
from ..api.stop_bound import StopBound, stop_bound
from ..api.v1alpha1 import GRPOJob
from ..config import AcceleratorProfile, Settings
from .meta import (
    ATTEMPT_LABEL,
    labels,
    object_meta,
    rayjob_name,
    spec_configmap_name,
    trainer_account_name,
)
from .paths import job_paths, metrics_file
from .pool import pool_tolerations
from .pvc import checkpoint_access_mode, checkpoint_claim

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
WORKER_GROUP = "workers"


def _cpu_per_node(job: GRPOJob, settings: Settings) -> str:
    res = job.spec.resources
    return res.cpu_per_node or str(res.devices_per_node * settings.cpu_per_device + settings.cpu_headroom)


def _memory_per_node(job: GRPOJob, profile: AcceleratorProfile) -> str:
    res = job.spec.resources
    if res.memory_per_node:
        return res.memory_per_node
    try:
        return quantity.multiply(profile.memory_per_device, res.devices_per_node)
    except quantity.QuantityError as error:
        raise ProblemError(
            Problem(
                "spec.resources.memoryPerNode",
                "must be set: its default, the accelerator profile's memoryPerDevice × devicesPerNode, "
                f"cannot be used ({error})",
            )
        ) from error


def _source_claims(job: GRPOJob) -> list[str]:
    """pvc:// claims named by the model and dataset sources, each once, in a stable order."""
    spec = job.spec
    uris = [spec.model.source, *(spec.dataset.train or []), *(spec.dataset.validation or [])]
    if spec.dataset.source:
        uris.append(spec.dataset.source)
    claims: list[str] = []
    for uri in uris:
        ref = parse_source(uri)
        if ref.scheme == "pvc" and ref.authority not in claims:
            claims.append(ref.authority)
    return claims


def _volumes(job: GRPOJob, settings: Settings) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Volumes and mounts shared by every pod: verl may run any piece on any node."""
    shm = job.spec.resources.shared_memory or settings.default_shared_memory
    volumes: list[dict[str, Any]] = [
        {
            "name": "spec",
            "configMap": {
                "name": spec_configmap_name(job.name),
                "items": [{"key": SPEC_KEY, "path": SPEC_KEY}],
            },
        },
        {"name": "checkpoints", "persistentVolumeClaim": {"claimName": checkpoint_claim(job)}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "spec", "mountPath": SPEC_MOUNT_DIR, "readOnly": True},
        {"name": "checkpoints", "mountPath": CHECKPOINT_MOUNT},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    for index, claim in enumerate(_source_claims(job)):
        name = f"source-{index}"
        volumes.append({"name": name, "persistentVolumeClaim": {"claimName": claim, "readOnly": True}})
        mounts.append(
            {"name": name, "mountPath": parse_source(f"pvc://{claim}/").mount_path, "readOnly": True}
        )
    custom = job.spec.reward.custom
    if custom:
        volumes.append(
            {
                "name": "reward",
                "configMap": {"name": custom.config_map, "items": [{"key": custom.key, "path": custom.key}]},
            }
        )
        mounts.append({"name": "reward", "mountPath": REWARD_MOUNT_DIR, "readOnly": True})
    return volumes, mounts


def _threads(job: GRPOJob, settings: Settings) -> int:
    """Math-library threads per process: each device's share of a worker pod's CPUs."""
    try:
        cpus, _ = quantity.parse(_cpu_per_node(job, settings))
    except quantity.QuantityError as error:
        raise ProblemError(Problem("spec.resources.cpuPerNode", str(error))) from error
    return contract.threads_per_device(float(cpus), job.spec.resources.devices_per_node)


def _env(
    job: GRPOJob, settings: Settings, profile: AcceleratorProfile, attempt: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Environment and envFrom for every trainer pod."""
    spec = job.spec
    paths = job_paths(job)
    env: list[dict[str, Any]] = [
        {"name": Env.JOB_NAME, "value": job.name},
        {"name": Env.NAMESPACE, "value": job.namespace},
        {"name": Env.ATTEMPT, "value": str(attempt)},
        {"name": Env.SPEC_FILE, "value": SPEC_FILE},
        {"name": Env.METRICS_FILE, "value": metrics_file(job, attempt)},
    ]
    # Hub downloads land on the shared volume, so a retried attempt does not fetch again.
    env += [{"name": var, "value": f"{paths.cache_dir}/{sub}"} for var, sub in contract.CACHE_HOMES.items()]
    env += [{"name": k, "value": v} for k, v in sorted(profile.env.items())]
    # verl's workers are Ray actors that ask for no CPUs, and Ray gives such an actor one thread.
    # The same value on the head as on the workers: the engine on the head hands it to every Ray
    # worker. A value of the profile's or the job's own wins (one entry per name: apply refuses
    # two). The TRL engine's trainer is no Ray actor: torch's own default stays.
    own = Env.THREADS in profile.env or Env.THREADS in {var.name for var in spec.env}
    if spec.engine.name == "verl" and not own:
        env.append({"name": Env.THREADS, "value": str(_threads(job, settings))})
    if spec.logging.wandb:
        wandb = spec.logging.wandb
        env.append(
            {
                "name": "WANDB_API_KEY",
                "valueFrom": {"secretKeyRef": {"name": wandb.secret_name, "key": wandb.secret_key}},
            }
        )
    # As core/v1 spells them: a value, or a reference to a Secret's or ConfigMap's key (the secret
    # itself never enters the spec, the ConfigMap or this RayJob).
    env += [var.to_wire() for var in spec.env]
    secrets = [s for s in (spec.model.credentials_secret, spec.dataset.credentials_secret) if s]
    env_from = [{"secretRef": {"name": s}} for s in dict.fromkeys(secrets)]
    return env, env_from


def _node_selector(job: GRPOJob, profile: AcceleratorProfile) -> dict[str, str]:
    selector = dict(profile.node_selector)
    if job.spec.resources.product and profile.product_label:
        selector[profile.product_label] = job.spec.resources.product
    selector.update(job.spec.resources.node_selector)
    return selector


def _pod_security(profile: AcceleratorProfile) -> dict[str, Any]:
    """What the `restricted` Pod Security level asks of a pod: a non-root user, the runtime's
    seccomp profile. The volume's group lets that user write checkpoints; OnRootMismatch changes
    ownership once, not on every mount of a large volume."""
    security: dict[str, Any] = {
        "runAsNonRoot": True,
        "runAsUser": profile.run_as_user,
        "runAsGroup": profile.run_as_group,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    if profile.fs_group is not None:
        security["fsGroup"] = profile.fs_group
        security["fsGroupChangePolicy"] = "OnRootMismatch"
    if profile.supplemental_groups:
        security["supplementalGroups"] = list(profile.supplemental_groups)
    return security


def _container_security() -> dict[str, Any]:
    """Every Ray container's (KubeRay copies it onto the init container it adds to workers)."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _pod_template(
    job: GRPOJob,
    settings: Settings,
    profile: AcceleratorProfile,
    attempt: int,
    *,
    component: str,
    resources: dict[str, Any],
    affinity: dict[str, Any] | None,
) -> dict[str, Any]:
    volumes, mounts = _volumes(job, settings)
    env, env_from = _env(job, settings, profile, attempt)
    container: dict[str, Any] = {
        "name": f"ray-{component}",
        "image": job.spec.image or profile.image,
        "imagePullPolicy": "IfNotPresent",
        "env": env,
        "resources": resources,
        "volumeMounts": mounts,
        "securityContext": _container_security(),
    }
    if env_from:
        container["envFrom"] = env_from
    pod: dict[str, Any] = {
        "serviceAccountName": trainer_account_name(job.name),
        "securityContext": _pod_security(profile),
        "containers": [container],
        "volumes": volumes,
        "nodeSelector": _node_selector(job, profile),
        "tolerations": pool_tolerations(job, profile),
    }
    bound = save_on_stop_bound(job)
    if bound is not None:
        # Save, then yield: whatever stops the pod gracefully (KubeRay on a suspension or a
        # deadline, Kueue, a drain) runs this first, and the trainer saves the step it is on
        # while the hook waits; a worker's hook keeps its pod serving until the driver has saved.
        container["lifecycle"] = {
            "preStop": {"exec": {"command": [*contract.YIELD_COMMAND, str(bound.hook_seconds)]}}
        }
        pod["terminationGracePeriodSeconds"] = bound.grace_seconds
    if affinity:
        pod["affinity"] = affinity
    if job.spec.resources.priority_class_name:
        pod["priorityClassName"] = job.spec.resources.priority_class_name
    pods = job.spec.pods
    if pods.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": name} for name in pods.image_pull_secrets]
    if pods.scheduler_name:
        pod["schedulerName"] = pods.scheduler_name
    # The user's labels first: ours (selectors, the head's affinity) must win.
    metadata: dict[str, Any] = {
        "labels": {**pods.labels, **labels(job, component), ATTEMPT_LABEL: str(attempt)}
    }
    if pods.annotations:
        metadata["annotations"] = dict(pods.annotations)
    return {"metadata": metadata, "spec": pod}


def _co_locate_with_worker(job: GRPOJob, attempt: int) -> dict[str, Any] | None:
    """A ReadWriteOnce volume attaches to one node, so the head must share the worker's node.

    The affinity sits on the head, not the worker: the worker's device request already picks an
    accelerator node, and the head (which asks for no device) follows it there.
    """
    if checkpoint_access_mode(job) != "ReadWriteOnce":
        return None
    return {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchLabels": {
                            "grpo.dev/job": job.name,
                            "grpo.dev/component": "worker",
                            ATTEMPT_LABEL: str(attempt),
                        }
                    },
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }


def _ray_resources_param(profile: AcceleratorProfile, devices: int) -> dict[str, str]:
    """`ray start --resources` for accelerators KubeRay does not map itself (NPU)."""
    if not profile.declare_ray_resource or not profile.ray_resource:
        return {}
    quoted = json.dumps({profile.ray_resource: devices}).replace('"', '\\"')
    return {"resources": f'"{quoted}"'}


def _submitter(job: GRPOJob, profile: AcceleratorProfile, attempt: int, settings: Settings) -> dict[str, Any]:
    """K8sJobMode's submitter pod, as ours: the job's labels (so the NetworkPolicy lets it reach the
    head) and the same hardening (so a `restricted` namespace admits it). KubeRay fills in the
    container's command."""
    if settings.submission_mode != "K8sJobMode":
        return {}
    container = {
        "name": "ray-job-submitter",
        "image": job.spec.image or profile.image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
        "securityContext": _container_security(),
    }
    return {
        "submitterPodTemplate": {
            "metadata": {"labels": {**labels(job, "submitter"), ATTEMPT_LABEL: str(attempt)}},
            "spec": {
                "restartPolicy": "Never",
                "securityContext": _pod_security(profile),
                "containers": [container],
            },
        }
    }


def save_on_stop_bound(job: GRPOJob) -> StopBound | None:
    """The job's planned-stop bound (api/stop_bound.py), sized from what its status measured so
    far; None when `checkpoint.saveOnStop` is off (the pods then keep Kubernetes' 30 s grace)."""
    wanted = job.spec.checkpoint.save_on_stop
    if not wanted.enabled:
        return None
    status = job.status
    measured_save = status.checkpoint.save_seconds if status.checkpoint else None
    measured_step = status.metrics.step_seconds if status.metrics else None
    return stop_bound(job.spec.engine.name, wanted.timeout_seconds, measured_save, measured_step)


def cluster_ttl(job: GRPOJob) -> int:
    """KubeRay's one TTL for a finished RayJob's cluster, success or failure alike: the longer of
    the two the job asks for. The lifecycle deletes the RayJobs that should go sooner (a retried
    attempt's, a successful one's when the failure retention is the longer)."""
    policy = job.spec.run_policy
    return max(policy.ttl_seconds_after_finished or 0, policy.failed_cluster_retention_seconds)


def build_rayjob(job: GRPOJob, settings: Settings, attempt: int) -> dict[str, Any]:
    """The RayJob for `attempt` (1-based). Retries are ours, so KubeRay's own backoff is 0."""
    profile = settings.profile(job.spec.resources.accelerator)
    if profile is None:  # validation refuses this first; a builder never guesses
        raise ValueError(f"no accelerator profile {job.spec.resources.accelerator!r}")
    res = job.spec.resources
    device_count = str(res.devices_per_node)
    devices = {profile.device_resource: device_count} if profile.device_resource else {}
    devices.update(res.extra_resources)
    worker_resources = {
        "requests": {
            "cpu": _cpu_per_node(job, settings),
            "memory": _memory_per_node(job, profile),
            **devices,
        },
        "limits": {"memory": _memory_per_node(job, profile), **devices},
    }
    head_resources = {
        "requests": {"cpu": settings.head_cpu, "memory": settings.head_memory},
        "limits": {"memory": settings.head_memory},
    }
    meta = object_meta(job, rayjob_name(job.name, attempt), "rayjob")
    meta["labels"][ATTEMPT_LABEL] = str(attempt)
    spec: dict[str, Any] = {
        "entrypoint": f"{settings.entrypoint} {SPEC_FILE}",
        "shutdownAfterJobFinishes": True,
        "ttlSecondsAfterFinished": cluster_ttl(job),
        "backoffLimit": 0,
        "submissionMode": settings.submission_mode,
        **_submitter(job, profile, attempt, settings),
        "rayClusterSpec": {
            "rayVersion": settings.ray_version,
            "enableInTreeAutoscaling": False,
            "headGroupSpec": {
                # No tasks on the head: the driver and every worker land where the devices are.
                "rayStartParams": {"dashboard-host": "0.0.0.0", "num-cpus": "0", "num-gpus": "0"},
                "template": _pod_template(
                    job,
                    settings,
                    profile,
                    attempt,
                    component="head",
                    resources=head_resources,
                    affinity=_co_locate_with_worker(job, attempt),
                ),
            },
            "workerGroupSpecs": [
                {
                    "groupName": WORKER_GROUP,
                    "replicas": res.nodes,
                    "minReplicas": res.nodes,
                    "maxReplicas": res.nodes,
                    "rayStartParams": _ray_resources_param(profile, res.devices_per_node),
                    "template": _pod_template(
                        job,
                        settings,
                        profile,
                        attempt,
                        component="worker",
                        resources=worker_resources,
                        affinity=None,
                    ),
                }
            ],
        },
    }
    if res.queue_name:
        # Kueue's contract for a RayJob: its queue label, and created suspended; Kueue unsuspends
        # it on admission (and suspends it to preempt). The operator sets suspend only here, at
        # creation, and never applies an existing RayJob again, so it never fights Kueue for it.
        meta["labels"][QUEUE_LABEL] = res.queue_name
        if res.workload_priority_class:
            # Kueue reads the Workload's priority from this label on the RayJob, at each attempt's
            # creation: a retried attempt is a new Workload that queues anew at this priority.
            meta["labels"][PRIORITY_CLASS_LABEL] = res.workload_priority_class
        spec["suspend"] = True
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta, "spec": spec}
