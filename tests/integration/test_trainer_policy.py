"""The chart's ValidatingAdmissionPolicy on the real API server: a trainer's account may write its
job's progress fields and no field of the operator's.

The policy and its binding are rendered from the chart (helm template), renamed for this test and
bound to its namespace only; the trainer's credentials are what the operator gives it
(test_reporter.trainer_kubeconfig: its Role and a TokenRequest token).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from grpo_trainer.kube import GRPOJobResource
from lightkube import ApiError, Client, KubeConfig
from lightkube.types import PatchType
from support.cluster import Cluster
from support.release import CHART, Helm, documents, helm_binary

from .test_reporter import crds, create_job, trainer_kubeconfig  # noqa: F401  (crds: fixture)

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds")]


@pytest.fixture
def policy(cluster: Cluster, namespace: str) -> Iterator[str]:
    """The chart's trainer-status policy, live for this test's namespace."""
    helm = Helm(helm_binary(cluster), cluster)
    rendered = documents(
        helm("template", "grpo", str(CHART), "--namespace", "grpo-system", "--kube-version", "1.36.3").stdout
    )
    name = f"test-{namespace}"[:63]
    chosen: list[dict[str, Any]] = []
    for doc in rendered:
        if doc["kind"] not in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
            continue
        doc["metadata"]["name"] = name
        if doc["kind"] == "ValidatingAdmissionPolicyBinding":
            doc["spec"]["policyName"] = name
            doc["spec"]["matchResources"] = {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            }
        chosen.append(doc)
    assert [d["kind"] for d in chosen] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    cluster.apply(chosen)
    yield name
    cluster.kubectl("delete", "validatingadmissionpolicybinding", name, "--ignore-not-found", check=False)
    cluster.kubectl("delete", "validatingadmissionpolicy", name, "--ignore-not-found", check=False)


def _patch(
    client: Client, namespace: str, name: str, status: dict[str, Any], *, dry_run: bool = False
) -> None:
    client.patch(
        GRPOJobResource.Status,
        name,
        {"status": status},
        namespace=namespace,
        patch_type=PatchType.MERGE,
        dry_run=dry_run,
    )


def _refusal(client: Client, namespace: str, name: str, status: dict[str, Any]) -> str:
    with pytest.raises(ApiError) as refused:
        _patch(client, namespace, name, status)
    return str(refused.value.status.message)


def test_a_trainer_may_write_only_its_progress_fields(
    cluster: Cluster, namespace: str, policy: str, tmp_path: Path
) -> None:
    job = create_job(cluster, namespace, "policy-job")
    admin = Client(KubeConfig.from_file(cluster.kubeconfig))
    _patch(admin, namespace, "policy-job", {"phase": "Running", "attempt": 2})
    trainer = Client(KubeConfig.from_file(trainer_kubeconfig(cluster, job, tmp_path)))
    # A new policy and new RBAC take a moment to reach the API server's admission and authorizer.
    deadline = time.monotonic() + 30
    while True:
        try:
            _patch(trainer, namespace, "policy-job", {"phase": "Succeeded"}, dry_run=True)
        except ApiError as error:
            if "is the operator's" in str(error.status.message):
                break
        assert time.monotonic() < deadline, "the policy did not take effect in 30 s"
        time.sleep(0.5)

    _patch(
        trainer,
        namespace,
        "policy-job",
        {"progress": {"step": 3, "totalSteps": 10}, "metrics": {"reward": 0.5}},
    )
    _patch(trainer, namespace, "policy-job", {"checkpoint": {"latestStep": 3}, "history": {"steps": "3"}})
    _patch(
        trainer,
        namespace,
        "policy-job",
        {"outputs": {"step": 3, "model": "/grpo/checkpoints/x/export/model"}},
    )

    for status in (
        {"phase": "Succeeded"},
        {"attempt": 1},
        {"conditions": []},
        {"failedAttempts": [{"attempt": 1, "reason": "Forged", "retryable": True}]},
        {"rayJobName": "policy-job-9"},
        {"completionTime": "2026-11-30T00:00:00Z"},
        {"progress": {"step": 4}, "phase": "Failed"},  # mixed with allowed fields: refused whole
    ):
        message = _refusal(trainer, namespace, "policy-job", status)
        assert "is the operator's: a trainer may change only status.progress" in message, message

    stored = cluster.get("grpojob", "policy-job", namespace)["status"]
    assert (stored["phase"], stored["attempt"]) == ("Running", 2)
    assert stored["progress"]["step"] == 3
    # The operator (any other account) is not held by the policy.
    _patch(admin, namespace, "policy-job", {"phase": "Succeeded"})
    assert cluster.get("grpojob", "policy-job", namespace)["status"]["phase"] == "Succeeded"
