"""A short-lived Pod that reads a job's files from its checkpoint volume, for when no trainer pod is left.

The attempt's log, the metrics files and the checkpoints live on the job's claim, which outlives
the Ray cluster. A person without a shell on any node reads them through a Pod that mounts the
claim read-only, prints what was asked (`cat`, `tail -F`, `ls`), and is deleted after: its output
is read with the pods/log API, the same as `kubectl logs`. The Pod is owned by the GRPOJob (the
garbage collector removes it with the job if the plugin is killed) and ends by itself after
`deadline` seconds.

Once the GRPOJob is deleted its claim stays (checkpoint.retention: Retain, the default); the
reader then mounts the claim by name (`--claim`), owned by nothing.

Scheduling, least privilege: the reader tolerates the taints of the job's own node pool (what the
operator's pods of the job tolerate, `pool.pool_tolerations`) and no others: not another pool's
(a GPU job's reader never lands on an NPU node, a CPU job's on no accelerator node), and not
`node.kubernetes.io/unschedulable`, which cordoned and draining nodes carry, so it needs a
schedulable node. A toleration of every taint (no key) is not copied from the job. Those taints
are read from the claim, where the operator records them as its settings made them
(`pvc.POOL_TOLERATIONS_ANNOTATION`), so they hold for a claim whose job is gone too; a claim
without that record (one the job brought, one made by an older operator) falls back to the job's
own spec and the default profiles, and a claim alone then tolerates nothing. Where on those nodes: while the job's Ray cluster may live
(status.rayClusterName), its head's node, where a ReadWriteOnce volume is attached; otherwise a
node of no accelerator pool (a CPU node), where a short-lived busybox belongs. The pools are the
operator's default accelerator profiles (the plugin cannot read the operator's settings): a pool
tainted otherwise is reached through the job's own spec.resources.tolerations.

Security: the Pod passes the `restricted` Pod Security level (which the chart's README asks
training namespaces to enforce): a numeric non-root user, RuntimeDefault seccomp, no privilege
escalation, every capability dropped, a read-only root filesystem. Its user is the trainer
images' (1000), which owns the files it reads; it sets no fsGroup, which would have the kubelet
change the ownership of a whole checkpoint volume.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from grpo_operator.api.contract import CHECKPOINT_MOUNT, ROTATED_SUFFIX
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.children.meta import COMPONENT_LABEL, JOB_LABEL, labels, owner_reference
from grpo_operator.children.pool import pool_tolerations
from grpo_operator.children.pvc import POOL_TOLERATIONS_ANNOTATION, checkpoint_claim
from grpo_operator.config import Settings

DEFAULT_IMAGE = "busybox:1.36"
COMPONENT = "volume-reader"
CONTAINER = "read"
READER_USER = 1000
"""The trainer images' user and group (the chart's profiles' runAsUser): the owner of the files."""
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
"""The taint a cordoned (or draining) node carries; the reader never tolerates it."""


@dataclass(frozen=True)
class ReadTarget:
    """Whose volume a reader Pod mounts: a live job's, or a claim whose job is gone."""

    namespace: str
    claim: str
    name: str
    """The job's name: the Pod's name prefix and its grpo.dev/job label."""
    job: GRPOJob | None = None
    """The live job (the Pod's owner, its pull secrets); None for a claim alone."""
    recorded: tuple[dict[str, Any], ...] | None = None
    """The pool's tolerations the operator recorded on the claim; None where it recorded none."""

    @classmethod
    def of_job(cls, job: GRPOJob) -> ReadTarget:
        return cls(job.namespace, checkpoint_claim(job), job.name, job)

    def labels(self) -> dict[str, str]:
        if self.job is not None:
            return labels(self.job, COMPONENT)
        return {JOB_LABEL: self.name, COMPONENT_LABEL: COMPONENT, "app.kubernetes.io/component": COMPONENT}

    def with_claim(self, annotations: dict[str, str] | None) -> ReadTarget:
        """This target with what the operator recorded on its claim (the claim's annotations)."""
        recorded = (annotations or {}).get(POOL_TOLERATIONS_ANNOTATION)
        if not recorded:
            return self
        try:
            parsed = json.loads(recorded)
        except ValueError:
            return self
        if not isinstance(parsed, list) or not all(isinstance(t, dict) for t in parsed):
            return self
        return ReadTarget(self.namespace, self.claim, self.name, self.job, tuple(parsed))

    def tolerations(self) -> list[dict[str, Any]]:
        """The job's pool's taints (see the module's docstring)."""
        if self.recorded is not None:
            pool = list(self.recorded)
        elif self.job is not None:
            pool = pool_tolerations(self.job, Settings().profile(self.job.spec.resources.accelerator))
        else:
            return []
        return [
            toleration
            for toleration in pool
            if toleration.get("key") and toleration["key"] != UNSCHEDULABLE_TAINT
        ]

    def cluster_may_live(self) -> bool:
        """The operator names the Ray cluster in status while it may live, and holds the volume."""
        return self.job is not None and bool(self.job.status.ray_cluster_name)

    def pull_secrets(self) -> list[dict[str, str]]:
        pods = getattr(self.job.spec, "pods", None) if self.job else None
        return [{"name": s} for s in (pods.image_pull_secrets if pods else None) or []]


def build_reader_pod(
    target: ReadTarget | GRPOJob, script: str, *, image: str = DEFAULT_IMAGE, deadline: int = 600
) -> dict[str, Any]:
    """The Pod that runs `script` (sh) with the job's volume mounted where the trainer mounts it."""
    if isinstance(target, GRPOJob):
        target = ReadTarget.of_job(target)
    pull_secrets = target.pull_secrets()
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": deadline,
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": READER_USER,
            "runAsGroup": READER_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": CONTAINER,
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", script],
                "volumeMounts": [{"name": "checkpoints", "mountPath": CHECKPOINT_MOUNT, "readOnly": True}],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                    "readOnlyRootFilesystem": True,
                    "runAsNonRoot": True,
                },
            }
        ],
        "volumes": [
            {
                "name": "checkpoints",
                "persistentVolumeClaim": {"claimName": target.claim, "readOnly": True},
            }
        ],
        "affinity": _affinity(target),
        "tolerations": target.tolerations(),
    }
    if pull_secrets:
        spec["imagePullSecrets"] = pull_secrets
    meta: dict[str, Any] = {
        "generateName": f"{target.name}-read-",
        "namespace": target.namespace,
        "labels": target.labels(),
    }
    if target.job is not None:
        meta["ownerReferences"] = [{**owner_reference(target.job), "controller": False}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _affinity(target: ReadTarget) -> dict[str, Any]:
    """One preference at a time: the scheduler scores node and pod affinity apart, each scaled to
    its best node, so two preferences would tie instead of one deciding."""
    if target.cluster_may_live():
        return {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {
                                "matchLabels": {JOB_LABEL: target.name, COMPONENT_LABEL: "head"}
                            },
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            }
        }
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchExpressions": cpu_node_expressions()}}
            ]
        }
    }


def cpu_node_expressions() -> list[dict[str, Any]]:
    """A node of no accelerator pool: none of the labels the operator's accelerator profiles
    select their nodes by (the device product label, the profile's node selector)."""
    expressions: list[dict[str, Any]] = []
    for profile in Settings().profiles.values():
        if profile.device_resource is None:
            continue
        if profile.product_label:
            expressions.append({"key": profile.product_label, "operator": "DoesNotExist"})
        expressions += [
            {"key": key, "operator": "NotIn", "values": [value]}
            for key, value in profile.node_selector.items()
        ]
    return expressions


def cat_script(path: str) -> str:
    """The whole log: the rolled-over part first, then the current file."""
    quoted, rotated = shlex.quote(path), shlex.quote(path + ROTATED_SUFFIX)
    return (
        f"test -e {quoted} || {{ echo 'no such file on the volume: {path}' >&2; exit 3; }}; "
        f"cat {rotated} 2>/dev/null; cat {quoted}"
    )


def follow_script(path: str) -> str:
    """The log so far and what is written next (tail -F survives the roll-over)."""
    return f"tail -n +1 -F {shlex.quote(path)}"


def list_script(folder: str) -> str:
    """One line per entry: modification time (epoch seconds) and name."""
    quoted = shlex.quote(folder)
    return (
        f"test -d {quoted} || {{ echo 'no such folder on the volume: {folder}' >&2; exit 3; }}; "
        f'cd {quoted} && for f in *; do [ -e "$f" ] && echo "$(stat -c %Y "$f") $f"; done; true'
    )
