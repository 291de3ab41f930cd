"""Operator settings: one object, loaded once at start-up and passed down.

The defaults below are what a cluster gets without configuration. Cluster admins override
them through the Helm chart, which renders a YAML file mounted at `GRPO_OPERATOR_CONFIG`;
a few scalar settings can also come from `GRPO_*` environment variables for local runs.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from .api import quantity
from .api.contract import DeviceType

DEFAULT_MAX_CONCURRENT_RECONCILES = 64
"""Passes running at once by default: twice the API requests the operator has in flight
(k8s/transport.py), so the API server always has the next request of some pass waiting, while the
rest of a burst waits as triggers (the event's body, which kopf holds anyway) rather than as
passes (a model, the children's manifests and the answers). The bound trades a burst's peak memory
for its latency (docs/benchmarks/operator.md has the figures): raise it where memory is plentiful
and bursts are large."""


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class AcceleratorProfile(_Model):
    """How one accelerator family is requested, scheduled and set up."""

    device_resource: str | None = None
    """Extended resource a pod requests per device (nvidia.com/gpu, huawei.com/Ascend910); none on CPU
    pools, where a "device" is a share of the node's cores."""
    node_selector: dict[str, str] = Field(default_factory=dict)
    """Always added to the trainer pods' node selector."""
    product_label: str | None = None
    """Node label that carries the device product, used when spec.resources.product is set."""
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    ray_resource: str | None = None
    """Ray resource name the engine schedules on (GPU, NPU); none on CPU pools."""
    declare_ray_resource: bool = False
    """Pass the Ray resource to `ray start` explicitly (KubeRay derives GPU itself, not NPU)."""
    device_type: DeviceType
    """torch's device type on this pool (cuda, npu): the engine's `trainer.device`."""
    torch_compile: bool = True
    """Whether torch.compile works here; when not, the trainer turns it off unless a job asks."""
    preload_libraries: list[str] = Field(default_factory=list)
    """Libraries the trainer preloads (LD_PRELOAD) when the image has them; `{arch}` is the CPU."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment for every trainer pod on this accelerator (the trainer also sets it itself
    when it runs outside a pod)."""
    image: str
    """Default trainer image."""
    memory_per_device: Annotated[str, Field(pattern=quantity.PATTERN)] = "96Gi"
    """Memory request per device for a worker pod when the job does not say: a Kubernetes quantity
    (96Gi, 512M, 1.5Ti), multiplied exactly by the devices per node."""
    run_as_user: int = Field(default=1000, ge=1)
    """The trainer's user id in every Ray pod: never root (the trainer images' user is 1000)."""
    run_as_group: int = Field(default=1000, ge=0)
    fs_group: int | None = Field(default=1000, ge=0)
    """Group that owns the checkpoint volume's files, so the non-root trainer can write them."""
    supplemental_groups: list[int] = Field(default_factory=list)
    """Extra groups, e.g. the nodes' device group (Ascend's HwHiAiUser) when it is not run_as_group."""


def _default_profiles() -> dict[str, AcceleratorProfile]:
    return {
        "nvidia": AcceleratorProfile(
            device_resource="nvidia.com/gpu",
            product_label="nvidia.com/gpu.product",
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            ray_resource="GPU",
            device_type="cuda",
            env={"NCCL_DEBUG": "WARN", "NCCL_TIMEOUT": "1800", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"},
            image="ghcr.io/grpo-operator/trainer-cuda:0.1.0",
        ),
        "ascend": AcceleratorProfile(
            device_resource="huawei.com/Ascend910",
            node_selector={"accelerator": "huawei-Ascend910"},
            product_label="node.kubernetes.io/npu.chip.name",
            tolerations=[{"key": "huawei.com/Ascend910", "operator": "Exists", "effect": "NoSchedule"}],
            ray_resource="NPU",
            declare_ray_resource=True,
            device_type="npu",
            # The NPU backend lacks torch.compile; verl's Ascend recipes run eager.
            torch_compile=False,
            # The geo3k Ascend recipe preloads jemalloc against host-memory fragmentation.
            preload_libraries=["/usr/lib/{arch}-linux-gnu/libjemalloc.so.2"],
            env={
                "VERL_PLATFORM": "huawei",
                "HCCL_CONNECT_TIMEOUT": "1800",
                "HCCL_EXEC_TIMEOUT": "1800",
                "USE_OPTIMIZED_MODEL": "0",
                "VLLM_ASCEND_ENABLE_NZ": "0",
            },
            image="ghcr.io/grpo-operator/trainer-ascend:0.1.0",
            memory_per_device="64Gi",
        ),
        # Any node without device taints: a smoke run of data, rewards and the whole job life
        # before asking for accelerators (the TRL engine; verl's rollouts need GPUs or NPUs).
        "cpu": AcceleratorProfile(
            device_type="cpu",
            image="ghcr.io/grpo-operator/trainer-cuda:0.1.0",
            memory_per_device="16Gi",
        ),
    }


def _default_ray_clients() -> list[dict[str, Any]]:
    """KubeRay's operator as the chart's README installs it (namespace kuberay-system, its chart's labels)."""
    return [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kuberay-system"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "kuberay-operator"}},
        }
    ]


class Settings(_Model):
    """Everything the operator can be told."""

    namespaces: list[str] = Field(default_factory=list)
    """Namespaces to watch; empty means the whole cluster."""
    profiles: dict[str, AcceleratorProfile] = Field(default_factory=_default_profiles)
    field_manager: str = "grpo-operator"
    """Server-side apply field owner of every child object."""
    ray_version: str = "2.46.0"
    head_cpu: str = "4"
    head_memory: str = "16Gi"
    cpu_per_device: int = 6
    """Worker CPU per device when the job does not say; verl places 3 CPUs per device bundle."""
    cpu_headroom: int = 4
    default_shared_memory: str = "32Gi"
    default_checkpoint_size: str = "200Gi"
    default_storage_class: str | None = None
    resync_seconds: float = 60.0
    """Safety-net reconcile interval; RayJob events drive the normal path."""
    max_concurrent_reconciles: int = Field(default=DEFAULT_MAX_CONCURRENT_RECONCILES, ge=1)
    """Reconcile passes running at once (controller-runtime's MaxConcurrentReconciles); the rest
    of a burst waits as triggers, new jobs first (handlers/queue.py)."""
    metrics_port: int = 8080
    health_port: int = 8081
    log_format: Literal["json", "plain"] = "json"
    entrypoint: str = "grpo-train run --spec"
    """Trainer entrypoint; the resolved spec file is appended."""
    submission_mode: Literal["HTTPMode", "K8sJobMode", "SidecarMode"] = "HTTPMode"
    """How KubeRay submits the entrypoint. HTTPMode posts it to the head's job API directly, with no
    submitter pod to schedule on the accelerator pool's taints. SidecarMode adds a submitter
    container to the head pod, which follows the driver: `kubectl logs <head> -c ray-job-submitter`
    is the live log (KubeRay 1.5 gives that container no securityContext, so a namespace enforcing
    the `restricted` Pod Security level refuses the head pod)."""
    network_policy: bool = True
    """A NetworkPolicy per job: its Ray pods take connections only from each other and from
    `ray_clients` (on the head's dashboard port, where Ray's job API listens)."""
    ray_clients: list[dict[str, Any]] = Field(default_factory=_default_ray_clients)
    """NetworkPolicy peers that may reach the Ray head's dashboard port (8265): KubeRay, which
    submits the job and follows it there. The chart adds the operator's own pods."""
    metrics_scrapers: list[dict[str, Any]] = Field(default_factory=list)
    """NetworkPolicy peers that may reach every Ray pod's metrics port (8080, Ray's Prometheus
    exporter; `ray_metrics_port`): your Prometheus. Empty: the per-job policy keeps it closed."""
    ray_metrics_port: int = 8080
    """The port KubeRay gives Ray's metrics exporter (`--metrics-export-port`, its default)."""
    leader_election: bool = True
    """Only the replica holding the Lease below reconciles (several replicas are then safe)."""
    lease_name: str = "grpo-operator"
    lease_namespace: str | None = None
    """Where the Lease lives; default: the operator pod's namespace ("default" out of a cluster)."""
    leader_identity: str | None = None
    """This replica's name in the Lease; default: the host name (the pod's name)."""
    lease_duration_seconds: float = Field(default=15.0, gt=0)
    """How long a Lease that is not renewed keeps other replicas waiting."""
    lease_renew_deadline_seconds: float = Field(default=10.0, gt=0)
    """A leader that could not renew for this long stops acting (before anyone may take over)."""
    lease_retry_seconds: float = Field(default=2.0, gt=0)
    """How often the leader renews, and candidates look."""

    def profile(self, accelerator: str) -> AcceleratorProfile | None:
        return self.profiles.get(accelerator)

    def lease_place(self) -> tuple[str, str]:
        """The leader Lease's namespace and this replica's identity in it, defaults resolved."""
        return (self.lease_namespace or _own_namespace(), self.leader_identity or socket.gethostname())


_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _own_namespace() -> str:
    """The pod's namespace (the chart also sets leaseNamespace); "default" out of a cluster."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    if _NAMESPACE_FILE.is_file():
        return _NAMESPACE_FILE.read_text().strip()
    return "default"


_ENV_SCALARS = {
    "GRPO_NAMESPACES": "namespaces",
    "GRPO_RESYNC_SECONDS": "resync_seconds",
    "GRPO_MAX_CONCURRENT_RECONCILES": "max_concurrent_reconciles",
    "GRPO_METRICS_PORT": "metrics_port",
    "GRPO_HEALTH_PORT": "health_port",
    "GRPO_LOG_FORMAT": "log_format",
    "GRPO_LEADER_ELECTION": "leader_election",
    "GRPO_LEASE_NAME": "lease_name",
    "GRPO_LEASE_NAMESPACE": "lease_namespace",
    "GRPO_LEADER_IDENTITY": "leader_identity",
    "GRPO_LEASE_DURATION_SECONDS": "lease_duration_seconds",
    "GRPO_LEASE_RENEW_DEADLINE_SECONDS": "lease_renew_deadline_seconds",
    "GRPO_LEASE_RETRY_SECONDS": "lease_retry_seconds",
}


def load_settings(path: str | Path | None = None, environ: dict[str, str] | None = None) -> Settings:
    """Settings from the YAML file (if any) with `GRPO_*` environment overrides on top.

    Profiles given in the file are merged over the defaults per accelerator and per key, so an
    admin can change one image without restating the whole profile.
    """
    env = dict(os.environ if environ is None else environ)
    path = path or env.get("GRPO_OPERATOR_CONFIG")
    data: dict[str, Any] = {}
    if path:
        data = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    defaults = {name: p.model_dump(by_alias=True) for name, p in _default_profiles().items()}
    for name, overrides in (data.get("profiles") or {}).items():
        defaults[name] = {**defaults.get(name, {}), **overrides}
    data["profiles"] = defaults
    for var, field in _ENV_SCALARS.items():
        if var in env:
            value: Any = env[var]
            if field == "namespaces":
                value = [ns.strip() for ns in value.split(",") if ns.strip()]
            data[to_camel(field)] = value  # the file's spelling, so the two cannot collide
    return Settings.model_validate(data)
