"""A closed, unprivileged Ray cluster, against the real API server and KubeRay: Ray pods admitted
where the `restricted` Pod Security level is enforced, a NetworkPolicy per job that the API server
accepts (the local cluster has no network plugin to enforce it; children/networkpolicy.py and its
unit test pin what it allows), and secrets referenced from spec.env rather than copied into it.
"""

from __future__ import annotations

import json

import pytest
from support.cluster import Cluster
from support.jobs import apply_job, example, job_pods, phase_is
from support.operator_process import OperatorProcess

pytestmark = pytest.mark.cluster


def test_ray_pods_run_where_the_restricted_level_is_enforced(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.kubectl(
        "label",
        "namespace",
        namespace,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    )
    # The level is enforced here: a root pod is refused.
    root = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "root", "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    refused = cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(root), check=False)
    assert "violates PodSecurity" in refused.stderr
    job = apply_job(cluster, namespace, example("geo3k-two-node-nvidia"))
    cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="Running")
    pods = job_pods(cluster, namespace, job)
    assert sorted(p["metadata"]["labels"]["grpo.dev/component"] for p in pods) == ["head", "worker", "worker"]
    for pod in pods:
        assert pod["status"]["phase"] == "Running"
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        # KubeRay's own init container on workers inherits the hardening.
        for container in pod["spec"].get("initContainers", []):
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
    refusals = [e for e in cluster.events(namespace) if "violates PodSecurity" in e.get("message", "")]
    assert refusals == []


def test_each_job_has_a_network_policy_the_api_server_accepts(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    job = apply_job(cluster, namespace, example("lora-single-gpu"))
    policy = cluster.wait_for(
        "networkpolicy", f"{job}-ray", namespace, lambda _: True, timeout=60, what="existence"
    )
    obj = cluster.get("grpojob", job, namespace)
    assert policy["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]
    assert policy["spec"]["podSelector"] == {"matchLabels": {"grpo.dev/job": job}}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    # It selects exactly the job's Ray pods.
    cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="Running")
    selected = cluster.get("pods", namespace=namespace)["items"]
    assert {
        p["metadata"]["name"] for p in selected if p["metadata"]["labels"].get("grpo.dev/job") == job
    } == {p["metadata"]["name"] for p in job_pods(cluster, namespace, job)}
    assert len(job_pods(cluster, namespace, job)) == 2


def test_env_takes_secret_references_that_stay_out_of_the_spec(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.kubectl(
        "create", "secret", "generic", "hub", "--from-literal=token=s3cr3t-value", "-n", namespace
    )
    env = [{"name": "HUB_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hub", "key": "token"}}}]
    job = apply_job(cluster, namespace, example("lora-single-gpu", env=env))
    cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="Running")
    for pod in job_pods(cluster, namespace, job):
        variables = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        assert variables["HUB_TOKEN"] == env[0]
    for text in (
        json.dumps(cluster.get("grpojob", job, namespace)),
        json.dumps(cluster.get("configmap", f"{job}-spec", namespace)),
        json.dumps(cluster.get("rayjobs.ray.io", f"{job}-1", namespace)),
    ):
        assert "s3cr3t-value" not in text
