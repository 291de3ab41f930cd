"""A short-lived Pod that reads a job's files from its checkpoint volume, for when no trainer pod is left.

The attempt's log, the metrics files and the checkpoints live on the job's claim, which outlives
the Ray cluster. A person without a shell on any node reads them through a Pod that mounts the
claim read-only, prints what was asked (`cat`, `tail -F`, `ls`), and is deleted after: its output
is read with the pods/log API, the same as `kubectl logs`. The Pod is owned by the GRPOJob (the
garbage collector removes it with the job if the plugin is killed) and ends by itself after
`deadline` seconds.

Once the GRPOJob is deleted its claim stays (checkpoint.retention: Retain, the default); the
reader then mounts the claim by name (`--claim`), owned by nothing.

Scheduling: a ReadWriteOnce volume attaches to one node, so while the job's head pod exists the
reader prefers its node; once the cluster is gone any node the volume can reach will do.

Security: the Pod passes the `restricted` Pod Security level (which the chart's README asks
training namespaces to enforce): a numeric non-root user, RuntimeDefault seccomp, no privilege
escalation, every capability dropped, a read-only root filesystem. Its user is the trainer
images' (1000), which owns the files it reads; it sets no fsGroup, which would have the kubelet
change the ownership of a whole checkpoint volume.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from grpo_operator.api.contract import CHECKPOINT_MOUNT, ROTATED_SUFFIX
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.children.meta import COMPONENT_LABEL, JOB_LABEL, labels, owner_reference
from grpo_operator.children.pvc import checkpoint_claim

DEFAULT_IMAGE = "busybox:1.36"
COMPONENT = "volume-reader"
CONTAINER = "read"
READER_USER = 1000
"""The trainer images' user and group (the chart's profiles' runAsUser): the owner of the files."""


@dataclass(frozen=True)
class ReadTarget:
    """Whose volume a reader Pod mounts: a live job's, or a claim whose job is gone."""

    namespace: str
    claim: str
    name: str
    """The job's name: the Pod's name prefix and its grpo.dev/job label."""
    job: GRPOJob | None = None
    """The live job (the Pod's owner, its pull secrets); None for a claim alone."""

    @classmethod
    def of_job(cls, job: GRPOJob) -> ReadTarget:
        return cls(job.namespace, checkpoint_claim(job), job.name, job)

    def labels(self) -> dict[str, str]:
        if self.job is not None:
            return labels(self.job, COMPONENT)
        return {JOB_LABEL: self.name, COMPONENT_LABEL: COMPONENT, "app.kubernetes.io/component": COMPONENT}

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
        "affinity": {
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
        },
        # Wherever the volume is: accelerator pools are tainted, and the head may be on one.
        "tolerations": [{"operator": "Exists"}],
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
