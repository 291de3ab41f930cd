"""What a Ray head pod would see, rebuilt as a folder on this host for the real local Ray head.

KWOK pods run nothing, so a job that the real Ray head runs (real.py) has no pod filesystem and no
pod environment. This module rebuilds both from the objects the pod would have been given. For one
submission it finds the RayJob, reads its head group's pod template and makes a folder ``root``
such that ``root + <absolute path in the pod>`` is what the head container sees at that path:

- configMap and secret volumes: their keys (or ``items``) written as files, as the kubelet does;
- persistentVolumeClaim volumes: a symlink to the bound PersistentVolume's hostPath folder (the
  test cluster's provisioner backs every claim with a host folder), so what a job writes lands in
  the claim, where the next attempt and the tests find it;
- emptyDir: an empty folder that goes with ``root``; hostPath: a symlink to that host path;
- the ServiceAccount token files under /var/run/secrets/kubernetes.io/serviceaccount, as the
  ServiceAccount admission plugin would project them.

The head container's environment comes with it: ``envFrom`` and ``env`` in the kubelet's order,
``valueFrom`` resolved by reading the Secrets, ConfigMaps and the head pod, ``$(VAR)`` expanded.

The folders of one submission (``pods/<namespace>/<submission id>/``)::

    root/        GRPO_WORKDIR: the pod's filesystem, as far as the pod spec defines it
    volumes/     the contents of configMap, secret and emptyDir volumes (``root`` links into it)
    kubeconfig   the ServiceAccount's bound token, for KUBECONFIG (credentials.py)

Anything that cannot be mirrored (another volume type, a missing Secret, an unbound claim) raises
PodViewError with a message written for the RayJob's status, where a user reads it.
"""

from __future__ import annotations

import base64
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.core_v1 import Container, EnvVar, KeyToPath, PodTemplateSpec, Volume
from lightkube.resources.core_v1 import ConfigMap, PersistentVolume, PersistentVolumeClaim, Pod, Secret

from .credentials import ApiEndpoint, TokenError, request_token, write_kubeconfig, write_service_account_files

RayJob = create_namespaced_resource("ray.io", "v1", "RayJob", "rayjobs")
RayCluster = create_namespaced_resource("ray.io", "v1", "RayCluster", "rayclusters")

HEAD_SERVICE_SUFFIX = "-head-svc"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
MIRRORED_VOLUME_TYPES = ("configMap", "secret", "persistentVolumeClaim", "emptyDir", "hostPath")


class PodViewError(Exception):
    """The pod's view cannot be built; the message is meant for the RayJob's status."""


@dataclass(frozen=True)
class PodView:
    """One submission's materialised head pod."""

    namespace: str
    rayjob: str
    rayjob_uid: str
    cluster: str  # the RayCluster's name
    folder: Path  # pods/<namespace>/<submission id>
    root: Path  # GRPO_WORKDIR
    kubeconfig: Path
    env: dict[str, str]  # the head container's environment, resolved


def cluster_of(host: str) -> str | None:
    """``<cluster>-head-svc.<ns>.svc.cluster.local:8265`` -> ``<cluster>``; None for other hosts."""
    service = host.split(":", 1)[0].split(".", 1)[0]
    return service.removesuffix(HEAD_SERVICE_SUFFIX) if service.endswith(HEAD_SERVICE_SUFFIX) else None


# -- the pieces that need no cluster ------------------------------------------------------------

_REFERENCE = re.compile(r"\$\$|\$\(([^)]*)\)")


def expand(value: str, env: dict[str, str]) -> str:
    """The kubelet's ``$(VAR)`` expansion: defined names are replaced, ``$$`` is a literal ``$``,
    and a reference to an undefined name stays as written."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))

    return _REFERENCE.sub(replace, value)


def field_value(path: str, pod: dict[str, Any]) -> str:
    """A downward-API ``fieldRef`` read from the pod (the real head pod when there is one)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName") or "default",
        "status.hostIP": status.get("hostIP"),
        "status.podIP": status.get("podIP"),
    }
    if path in simple:
        return str(simple[path] or "")
    match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    raise PodViewError(f"env fieldRef {path!r} is not mirrored by the local Ray backend")


def volume_type(volume: Volume) -> str:
    kinds = [key for key in volume.to_dict() if key != "name"]
    return kinds[0] if kinds else "unknown"


def mount_order(container: Container) -> list[Any]:
    """Parents before children, so a mount inside another lands in the outer one's target."""
    return sorted(container.volumeMounts or [], key=lambda m: m.mountPath.rstrip("/").count("/"))


def write_keys(
    folder: Path, data: dict[str, bytes], items: Iterable[KeyToPath] | None, mode: int | None
) -> None:
    """A configMap or secret volume's files: every key, or only ``items`` at their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    chosen = [(item.key, item.path, item.mode) for item in items] if items else [(k, k, None) for k in data]
    for key, relative, item_mode in chosen:
        if key not in data:
            raise KeyError(key)
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data[key])
        target.chmod(item_mode or mode or 0o644)


# -- reading the cluster ------------------------------------------------------------------------


class _Objects:
    """The namespace's objects one materialisation reads, each once, with errors for a user."""

    def __init__(self, client: Client, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self._cache: dict[tuple[str, str], dict[str, bytes] | None] = {}

    def _get(self, kind: str, name: str, read: Callable[[], dict[str, bytes]]) -> dict[str, bytes] | None:
        key = (kind, name)
        if key not in self._cache:
            try:
                self._cache[key] = read()
            except ApiError as error:
                if error.status.code != 404:
                    raise
                self._cache[key] = None
        return self._cache[key]

    def configmap(self, name: str, *, optional: bool) -> dict[str, bytes]:
        def read() -> dict[str, bytes]:
            cm = self.client.get(ConfigMap, name, namespace=self.namespace)
            data = {k: v.encode() for k, v in (cm.data or {}).items()}
            data.update({k: base64.b64decode(v) for k, v in (cm.binaryData or {}).items()})
            return data

        return self._required("ConfigMap", name, self._get("ConfigMap", name, read), optional)

    def secret(self, name: str, *, optional: bool) -> dict[str, bytes]:
        def read() -> dict[str, bytes]:
            secret = self.client.get(Secret, name, namespace=self.namespace)
            return {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}

        return self._required("Secret", name, self._get("Secret", name, read), optional)

    def _required(
        self, kind: str, name: str, data: dict[str, bytes] | None, optional: bool
    ) -> dict[str, bytes]:
        if data is None:
            if optional:
                return {}
            raise PodViewError(f"{kind} {self.namespace}/{name} not found")
        return data

    def claim_folder(self, claim: str) -> Path:
        """The host folder behind a bound claim (created if missing, like DirectoryOrCreate)."""
        try:
            pvc = self.client.get(PersistentVolumeClaim, claim, namespace=self.namespace)
        except ApiError as error:
            if error.status.code == 404:
                raise PodViewError(f"PersistentVolumeClaim {self.namespace}/{claim} not found") from error
            raise
        phase = pvc.status.phase if pvc.status else None
        if phase != "Bound" or not pvc.spec.volumeName:
            raise PodViewError(f"PersistentVolumeClaim {self.namespace}/{claim} is not bound (phase {phase})")
        volume = self.client.get(PersistentVolume, pvc.spec.volumeName)
        source = volume.spec.hostPath.path if volume.spec.hostPath else None
        source = source or (volume.spec.local.path if volume.spec.local else None)
        if not source:
            raise PodViewError(
                f"PersistentVolume {pvc.spec.volumeName} of claim {claim} has no hostPath or local path "
                "for the local Ray backend to link to"
            )
        folder = Path(source)
        folder.mkdir(parents=True, exist_ok=True)
        return folder


def find_rayjob(client: Client, namespace: str, submission_id: str, cluster: str | None) -> Any:
    """The RayJob whose status names this submission id, or else the head's RayCluster."""
    by_cluster = None
    for rayjob in client.list(RayJob, namespace=namespace):
        status = rayjob.status or {}
        if status.get("jobId") == submission_id:
            return rayjob
        if cluster and status.get("rayClusterName") == cluster:
            by_cluster = rayjob
    if by_cluster is not None:
        return by_cluster
    raise PodViewError(
        f"no RayJob in namespace {namespace} has status.jobId {submission_id!r}"
        + (f" or status.rayClusterName {cluster!r}" if cluster else "")
    )


def head_template(client: Client, rayjob: Any, namespace: str, cluster: str | None) -> PodTemplateSpec:
    """The head group's pod template: the RayJob's own, or its RayCluster's (clusterSelector)."""
    spec = (rayjob.spec or {}).get("rayClusterSpec")
    if spec is None and cluster:
        spec = client.get(RayCluster, cluster, namespace=namespace).spec
    template = ((spec or {}).get("headGroupSpec") or {}).get("template")
    if not template or not (template.get("spec") or {}).get("containers"):
        raise PodViewError(f"RayJob {namespace}/{rayjob.metadata.name} has no head group pod template")
    return PodTemplateSpec.from_dict(template)


def head_pod(client: Client, namespace: str, cluster: str | None) -> dict[str, Any] | None:
    """The head pod KubeRay created (KWOK runs it as an object only), for fieldRefs and binding."""
    if not cluster:
        return None
    pods = client.list(
        Pod, namespace=namespace, labels={"ray.io/cluster": cluster, "ray.io/node-type": "head"}
    )
    live = [pod for pod in pods if pod.metadata.deletionTimestamp is None]
    return live[0].to_dict() if live else None


# -- building the view ----------------------------------------------------------------------------


def resolve_env(container: Container, objects: _Objects, pod: dict[str, Any]) -> dict[str, str]:
    """The container's environment as the kubelet builds it: envFrom first, then env in order."""
    env: dict[str, str] = {}
    for source in container.envFrom or []:
        if source.configMapRef is not None:
            ref = source.configMapRef
            data = objects.configmap(ref.name, optional=bool(ref.optional))
        elif source.secretRef is not None:
            ref = source.secretRef
            data = objects.secret(ref.name, optional=bool(ref.optional))
        else:
            continue
        for key, value in data.items():
            env[(source.prefix or "") + key] = value.decode()
    for var in container.env or []:
        value = _env_value(var, objects, pod, env)
        if value is not None:
            env[var.name] = value
    return env


def _env_value(var: EnvVar, objects: _Objects, pod: dict[str, Any], env: dict[str, str]) -> str | None:
    source = var.valueFrom
    if source is None:
        return expand(var.value or "", env)
    if source.secretKeyRef is not None or source.configMapKeyRef is not None:
        ref = source.secretKeyRef or source.configMapKeyRef
        assert ref is not None
        kind = "Secret" if source.secretKeyRef is not None else "ConfigMap"
        read = objects.secret if kind == "Secret" else objects.configmap
        data = read(ref.name, optional=bool(ref.optional))
        if ref.key not in data:
            if ref.optional:
                return None
            raise PodViewError(
                f"env {var.name}: {kind} {objects.namespace}/{ref.name} has no key {ref.key!r}"
            )
        return data[ref.key].decode()
    if source.fieldRef is not None:
        return field_value(source.fieldRef.fieldPath, pod)
    raise PodViewError(f"env {var.name}: only value, secretKeyRef, configMapKeyRef and fieldRef are mirrored")


def _volume_source(volume: Volume, objects: _Objects, volumes: Path) -> Path:
    own = volumes / volume.name
    try:
        if volume.configMap is not None:
            cm = volume.configMap
            data = objects.configmap(cm.name, optional=bool(cm.optional))
            write_keys(own, data, cm.items, cm.defaultMode)
            return own
        if volume.secret is not None:
            secret = volume.secret
            data = objects.secret(secret.secretName, optional=bool(secret.optional))
            write_keys(own, data, secret.items, secret.defaultMode)
            return own
    except KeyError as missing:
        raise PodViewError(f"volume {volume.name}: no key {missing} in its {volume_type(volume)}") from None
    if volume.persistentVolumeClaim is not None:
        return objects.claim_folder(volume.persistentVolumeClaim.claimName)
    if volume.emptyDir is not None:
        own.mkdir(parents=True, exist_ok=True)
        return own
    if volume.hostPath is not None:
        return Path(volume.hostPath.path)
    raise PodViewError(
        f"volume {volume.name}: {volume_type(volume)} volumes are not mirrored by the local Ray backend "
        f"(only {', '.join(MIRRORED_VOLUME_TYPES)})"
    )


def _mount_all(
    container: Container, template: PodTemplateSpec, objects: _Objects, root: Path, volumes: Path
) -> None:
    declared = {volume.name: volume for volume in template.spec.volumes or []}
    sources: dict[str, Path] = {}
    for mount in mount_order(container):
        if mount.name not in declared:
            raise PodViewError(f"volumeMount {mount.mountPath}: the pod has no volume {mount.name!r}")
        if mount.subPathExpr:
            raise PodViewError(f"volumeMount {mount.mountPath}: subPathExpr is not mirrored")
        if mount.name not in sources:
            sources[mount.name] = _volume_source(declared[mount.name], objects, volumes)
        source = sources[mount.name]
        if mount.subPath:
            source = source / mount.subPath
            if not source.exists():  # the kubelet creates a missing subPath as a folder
                source.mkdir(parents=True)
        target = root / mount.mountPath.strip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            raise PodViewError(f"volumeMount {mount.mountPath}: the path is already taken in the pod")
        target.symlink_to(source)


def materialise(
    client: Client,
    api: ApiEndpoint,
    pods_dir: Path,
    namespace: str,
    submission_id: str,
    host: str,
) -> PodView:
    """Build the head pod's view for one submission; PodViewError says why it cannot."""
    cluster = cluster_of(host)
    rayjob = find_rayjob(client, namespace, submission_id, cluster)
    cluster = cluster or (rayjob.status or {}).get("rayClusterName")
    template = head_template(client, rayjob, namespace, cluster)
    container = template.spec.containers[0]  # KubeRay's Ray container is the first
    pod = head_pod(client, namespace, cluster)
    pod_fields = pod or {
        "metadata": {"namespace": namespace, **(template.metadata.to_dict() if template.metadata else {})},
        "spec": template.spec.to_dict(),
    }
    objects = _Objects(client, namespace)

    folder = pods_dir / namespace / submission_id
    if folder.exists():  # a submission retried after a failed attempt: start clean
        shutil.rmtree(folder)
    root, volumes = folder / "root", folder / "volumes"
    root.mkdir(parents=True)
    volumes.mkdir()

    env = resolve_env(container, objects, pod_fields)
    _mount_all(container, template, objects, root, volumes)

    account = template.spec.serviceAccountName or "default"
    try:
        token = request_token(client, namespace, account, pod)
    except TokenError as error:
        raise PodViewError(str(error)) from None
    kubeconfig = folder / "kubeconfig"
    write_kubeconfig(kubeconfig, api, token, namespace, account)
    mounted = [m.mountPath.rstrip("/") for m in container.volumeMounts or []]
    if template.spec.automountServiceAccountToken is not False and not any(
        SERVICE_ACCOUNT_DIR.startswith(path + "/") or path.startswith(SERVICE_ACCOUNT_DIR) for path in mounted
    ):
        write_service_account_files(root / SERVICE_ACCOUNT_DIR.strip("/"), api, token, namespace)
    return PodView(
        namespace=namespace,
        rayjob=rayjob.metadata.name,
        rayjob_uid=rayjob.metadata.uid,
        cluster=cluster or "",
        folder=folder,
        root=root,
        kubeconfig=kubeconfig,
        env=env,
    )
