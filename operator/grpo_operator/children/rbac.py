"""The trainer's identity: it may read and patch the status of its own job, and nothing else."""

from __future__ import annotations

from typing import Any

from ..api.v1alpha1 import GROUP, PLURAL, GRPOJob
from .meta import object_meta, trainer_account_name


def build_trainer_rbac(job: GRPOJob) -> list[dict[str, Any]]:
    """ServiceAccount, Role and RoleBinding, in the order they must exist."""
    name = trainer_account_name(job.name)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": object_meta(job, name, "trainer")},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": object_meta(job, name, "trainer"),
            "rules": [
                {
                    # Progress reports: the trainer patches status.progress/metrics/checkpoint.
                    "apiGroups": [GROUP],
                    "resources": [f"{PLURAL}/status"],
                    "resourceNames": [job.name],
                    "verbs": ["get", "patch"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": object_meta(job, name, "trainer"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": job.namespace}],
        },
    ]
