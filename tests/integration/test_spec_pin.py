"""A job's resolved spec is pinned to the spec as written, on the real API server, KubeRay and KWOK:
a retry after an operator upgrade that changed a default keeps the value the job started with,
and a spec edit renders it again at the next attempt (children/configmap.py).

The upgrade is simulated as an upgrade leaves the cluster: the operator stops, its spec ConfigMap
stays as the release before rendered it (here: with another default algorithm.clipRatio, for the
same spec as written), and this release's operator starts.
"""

from __future__ import annotations

import json

import pytest
from grpo_operator.api import contract
from grpo_operator.children.configmap import RENDERED_FROM_ANNOTATION
from support.cluster import Cluster
from support.jobs import apply_job, condition, example
from support.operator_process import OperatorProcess
from support.rayjobapi import RayJobAPI

pytestmark = pytest.mark.cluster

OLDER_DEFAULT = 0.28
"""algorithm.clipRatio as the release before defaulted it (this one's default is 0.2)."""


def _clip_ratio(cluster: Cluster, namespace: str, job: str) -> float:
    configmap = cluster.get("configmap", f"{job}-spec", namespace)
    return json.loads(configmap["data"][contract.SPEC_KEY])["spec"]["algorithm"]["clipRatio"]


def _rendered_from(cluster: Cluster, namespace: str, job: str) -> str:
    return cluster.get("configmap", f"{job}-spec", namespace)["metadata"]["annotations"][
        RENDERED_FROM_ANNOTATION
    ]


def _at_attempt(attempt: int):
    return lambda o: (o.get("status") or {}).get("attempt") == attempt


def test_a_retry_after_an_upgrade_keeps_the_defaults_and_an_edit_renders_them_again(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI
) -> None:
    # Every attempt fails retryably a few seconds in, so each makes the next.
    job_api.configure_namespace(
        namespace, [("RUNNING", 0), ("FAILED", 8, "Job entrypoint command failed with exit code 75.")]
    )
    body = example("lora-single-gpu", **{"runPolicy.backoffLimit": 3})
    assert "clipRatio" not in body["spec"]["algorithm"]  # the user leaves it to the default
    job = apply_job(cluster, namespace, body)
    created = cluster.wait_for(
        "grpojob",
        job,
        namespace,
        lambda o: (condition(o, "Created") or {}).get("status") == "True",
        timeout=120,
        what="Created",
    )
    assert created["status"]["attempt"] == 1
    assert _clip_ratio(cluster, namespace, job) == 0.2
    pin = _rendered_from(cluster, namespace, job)

    # The upgrade: the operator goes, its ConfigMap stays as the release before rendered it.
    operator.kill()
    configmap = cluster.get("configmap", f"{job}-spec", namespace)
    resolved = json.loads(configmap["data"][contract.SPEC_KEY])
    resolved["spec"]["algorithm"]["clipRatio"] = OLDER_DEFAULT
    patch = {"data": {contract.SPEC_KEY: json.dumps(resolved, indent=2)}}
    cluster.kubectl(
        "patch", "configmap", f"{job}-spec", "-n", namespace, "--type=merge", "-p", json.dumps(patch)
    )
    operator.start()

    # Attempt 1 fails; attempt 2, made by this release from the same spec, resumes as it started.
    cluster.wait_for("grpojob", job, namespace, _at_attempt(2), timeout=120, what="attempt 2")
    cluster.wait_for("rayjobs.ray.io", f"{job}-2", namespace, lambda _: True, timeout=60, what="existence")
    assert _clip_ratio(cluster, namespace, job) == OLDER_DEFAULT
    assert _rendered_from(cluster, namespace, job) == pin

    # A spec edit is a new spec: the next attempt is rendered with this release's defaults.
    cluster.kubectl(
        "patch",
        "grpojob",
        job,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"runPolicy": {"ttlSecondsAfterFinished": 600}}}),
    )
    cluster.wait_for("grpojob", job, namespace, _at_attempt(3), timeout=120, what="attempt 3")
    cluster.wait_for("rayjobs.ray.io", f"{job}-3", namespace, lambda _: True, timeout=60, what="existence")
    assert _clip_ratio(cluster, namespace, job) == 0.2
    assert _rendered_from(cluster, namespace, job) != pin
