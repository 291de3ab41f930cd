"""The job's NetworkPolicy closes its Ray cluster to everyone but its own pods and the Ray clients."""

from __future__ import annotations

from grpo_operator.children.networkpolicy import DASHBOARD_PORT, build_network_policy
from grpo_operator.config import load_settings
from support.operator_inputs import job_from, minimal_body

SETTINGS = load_settings(environ={})


def test_only_the_jobs_pods_reach_each_other_and_clients_reach_the_job_api() -> None:
    job = job_from(minimal_body())
    policy = build_network_policy(job, SETTINGS)
    assert policy is not None
    assert policy["metadata"]["name"] == "demo-ray"
    assert policy["metadata"]["ownerReferences"][0]["uid"] == job.uid
    spec = policy["spec"]
    assert spec["podSelector"] == {"matchLabels": {"grpo.dev/job": "demo"}}
    assert spec["policyTypes"] == ["Ingress"], "egress stays open: models and data are downloaded"
    own, clients = spec["ingress"]
    assert own == {"from": [{"podSelector": {"matchLabels": {"grpo.dev/job": "demo"}}}]}
    assert clients["ports"] == [{"protocol": "TCP", "port": DASHBOARD_PORT}]
    assert clients["from"] == SETTINGS.ray_clients
    # Every peer is pinned to a namespace: a pod elsewhere carrying KubeRay's labels is not let in.
    assert all("namespaceSelector" in peer and peer["namespaceSelector"] for peer in clients["from"])


def test_with_no_ray_clients_only_the_jobs_own_pods_get_in() -> None:
    settings = SETTINGS.model_copy(update={"ray_clients": []})
    policy = build_network_policy(job_from(minimal_body()), settings)
    assert policy is not None
    assert len(policy["spec"]["ingress"]) == 1


def test_the_settings_can_turn_it_off() -> None:
    settings = SETTINGS.model_copy(update={"network_policy": False})
    assert build_network_policy(job_from(minimal_body()), settings) is None
