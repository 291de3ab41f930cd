"""A short-lived Pod that reads a job's files from its checkpoint volume, for when no trainer pod is left.

The attempt's log, the metrics files and the checkpoints live on the job's claim, which outlives
the Ray cluster. A person without a shell on any node reads them through a Pod that mounts the
claim read-only, prints what was asked (`cat`, `tail -F`, `ls`), and is deleted after: its output
is read with the pods/log API, the same as `kubectl logs`. The Pod is owned by the GRPOJob (the
garbage collector removes it with the job if the plugin is killed) and ends by itself after
`deadline` seconds.

Scheduling: a ReadWriteOnce volume attaches to one node, so while the job's head pod exists the
reader prefers its node; once the cluster is gone any node the volume can reach will do.
"""

from __future__ import annotations

import shlex
from typing import Any

from grpo_operator.api.contract import CHECKPOINT_MOUNT, ROTATED_SUFFIX
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.children.meta import COMPONENT_LABEL, JOB_LABEL, labels, owner_reference
from grpo_operator.children.pvc import checkpoint_claim

DEFAULT_IMAGE = "busybox:1.36"
COMPONENT = "volume-reader"
CONTAINER = "read"


def build_reader_pod(
    job: GRPOJob, script: str, *, image: str = DEFAULT_IMAGE, deadline: int = 600
) -> dict[str, Any]:
    """The Pod that runs `script` (sh) with the job's volume mounted where the trainer mounts it."""
    pull_secrets = [
        {"name": s} for s in (getattr(job.spec, "pods", None) and job.spec.pods.image_pull_secrets) or []
    ]
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": deadline,
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        "containers": [
            {
                "name": CONTAINER,
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", script],
                "volumeMounts": [{"name": "checkpoints", "mountPath": CHECKPOINT_MOUNT, "readOnly": True}],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            }
        ],
        "volumes": [
            {
                "name": "checkpoints",
                "persistentVolumeClaim": {"claimName": checkpoint_claim(job), "readOnly": True},
            }
        ],
        "affinity": {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {JOB_LABEL: job.name, COMPONENT_LABEL: "head"}},
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
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{job.name}-read-",
            "namespace": job.namespace,
            "labels": labels(job, COMPONENT),
            "ownerReferences": [{**owner_reference(job), "controller": False}],
        },
        "spec": spec,
    }


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
