"""Claims of the default StorageClass are bound, so pods that mount them schedule and run."""

from __future__ import annotations

import pytest
from support.cluster import Cluster

pytestmark = pytest.mark.cluster


def test_a_claim_is_bound_and_its_pod_runs(cluster: Cluster, namespace: str) -> None:
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "checkpoints"},
        # No storageClassName: the default class applies, as for a user's claim.
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "100Gi"}}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer"},
        "spec": {
            "containers": [
                {"name": "main", "image": "busybox", "volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"}]}
            ],
            "volumes": [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "checkpoints"}}],
        },
    }
    cluster.apply([claim, pod], namespace)

    bound = cluster.wait_for(
        "pvc", "checkpoints", namespace, lambda c: c["status"].get("phase") == "Bound", what="Bound"
    )
    cluster.wait_for(
        "pod", "trainer", namespace, lambda p: p["status"].get("phase") == "Running", what="Running"
    )

    assert bound["spec"]["storageClassName"] == "standard"
    assert bound["status"]["capacity"]["storage"] == "100Gi"
    assert bound["status"]["accessModes"] == ["ReadWriteMany"]
