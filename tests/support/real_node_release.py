"""The operator installed by its chart onto the real node, and a namespace its jobs train in:
what the real-pod tests (tests/e2e/test_real_pods.py) and `python -m benchmarks.stops --install`
run against, set up one way."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from grpo_trainer.testing.colour_job import stage

from support.cluster import Cluster
from support.namespaces import create_namespace, stage_colour_claims
from support.real_node import NODE_SELECTOR, TOLERATIONS, image_tag
from support.release import Helm, Release

OPERATOR_IMAGE = "ghcr.io/grpo-operator/operator"
TRAINER_IMAGE = "ghcr.io/grpo-operator/trainer-cpu"
HEAD = {"headCpu": "250m", "headMemory": "2Gi"}
REAL_NODE_VOLUMES = {"storageClassName": "real-node"}
"""A job's `checkpoint` for a volume local to the real node (hack/provisioner: its folder is on
this host only, so its PersistentVolume requires that node), as the demo's jobs have by default:
the plugin's reader pod then reads it there. Jobs of the KWOK pools keep the default class."""
"""The real node has the host's cores (2 here): the Ray head (the driver only) and one worker must
fit beside each other, so the head asks for a quarter core (and the worker, in the jobs, for one)."""


def training_namespace(cluster: Cluster, stem: str, scratch: Path) -> str:
    """A namespace enforcing Pod Security `restricted`, its Ray pods' job API reached by KubeRay
    through the fake job API's pod backend, the colour job's model and data staged onto claims."""
    name = create_namespace(cluster, stem)
    cluster.kubectl(
        "label",
        "namespace",
        name,
        "pod-security.kubernetes.io/enforce=restricted",
        "grpo.dev/ray-backend=pod",
    )
    stage_colour_claims(cluster, name, stage(scratch, train_rows=64, validation_rows=8))
    return name


def install_operator(
    cluster: Cluster, helm: Helm, namespaces: list[str], settings: dict[str, Any] | None = None
) -> Release:
    """The chart into a namespace of its own (Pod Security `restricted`: the chart's pods must pass
    it), watching `namespaces`, its operator and the cpu pool's Ray pods on the real node."""
    namespace = create_namespace(cluster, "real-operator")
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    installed = Release(helm, f"e2e-{secrets.token_hex(3)}", namespace)
    installed.install(
        {
            "image": {"tag": image_tag(), "pullPolicy": "Never"},
            "nodeSelector": NODE_SELECTOR,
            "tolerations": TOLERATIONS,
            "rbac": {"clusterWide": False, "namespaces": namespaces},
            "settings": {
                "resyncSeconds": 5,
                **HEAD,
                **(settings or {}),
            },
            # The cpu pool's trainer pods on the real node, from the CPU trainer image.
            # Ray's dashboard gives each of its module processes 30 s to start, which a loaded
            # 2-core machine overruns (the host's Ray head has the same setting, hack/README.md).
            "profiles": {
                "cpu": {
                    "nodeSelector": NODE_SELECTOR,
                    "tolerations": TOLERATIONS,
                    "image": f"{TRAINER_IMAGE}:{image_tag()}",
                    "env": {"RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT": "180"},
                }
            },
            "cleanup": {"timeoutSeconds": 90},
        }
    )
    return installed
