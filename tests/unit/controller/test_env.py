"""spec.env: plain values and references to a Secret's or ConfigMap's key reach every Ray pod."""

from __future__ import annotations

import json

from grpo_operator.children.configmap import build_spec_configmap
from grpo_operator.children.rayjob import build_rayjob
from grpo_operator.config import load_settings
from support.operator_inputs import job_from, minimal_body

SETTINGS = load_settings(environ={})
ENV = [
    {"name": "HF_HUB_OFFLINE", "value": "1"},
    {"name": "HUB_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hub-credentials", "key": "token"}}},
    {"name": "MIRROR", "valueFrom": {"configMapKeyRef": {"name": "mirrors", "key": "hf", "optional": True}}},
    {"name": "EMPTY"},
]


def test_references_reach_every_ray_pod_as_core_v1_env() -> None:
    job = job_from(minimal_body(env=ENV))
    cluster = build_rayjob(job, SETTINGS, 1)["spec"]["rayClusterSpec"]
    pods = [cluster["headGroupSpec"]["template"], *(g["template"] for g in cluster["workerGroupSpecs"])]
    for pod in pods:
        env = pod["spec"]["containers"][0]["env"]
        assert env[-4:] == ENV


def test_the_spec_configmap_holds_the_reference_not_a_value() -> None:
    job = job_from(minimal_body(env=ENV))
    resolved = json.loads(build_spec_configmap(job, SETTINGS)["data"]["job.json"])
    token = next(e for e in resolved["spec"]["env"] if e["name"] == "HUB_TOKEN")
    assert token == {
        "name": "HUB_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "hub-credentials", "key": "token"}},
    }
