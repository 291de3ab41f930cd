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


def _pods_env(job_body: dict) -> list[dict[str, str]]:
    cluster = build_rayjob(job_from(job_body), SETTINGS, 1)["spec"]["rayClusterSpec"]
    pods = [cluster["headGroupSpec"]["template"], *(g["template"] for g in cluster["workerGroupSpecs"])]
    return [{e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]} for pod in pods]


def test_every_pod_gets_each_devices_share_of_a_worker_pods_cpus_as_its_threads() -> None:
    """Ray's default for verl's workers is one thread; the head gets the workers' value too, since
    the engine there hands it to every Ray worker."""
    resources = {"accelerator": "nvidia", "devicesPerNode": 8}
    # The settings' default: 6 CPUs per device and 4 of headroom, 52 for 8 devices: 6 each.
    assert [env["OMP_NUM_THREADS"] for env in _pods_env(minimal_body(resources=resources))] == ["6", "6"]
    one = {**resources, "devicesPerNode": 1}
    assert {env["OMP_NUM_THREADS"] for env in _pods_env(minimal_body(resources=one))} == {"10"}
    asked = {**resources, "devicesPerNode": 4, "cpuPerNode": "30"}
    assert {env["OMP_NUM_THREADS"] for env in _pods_env(minimal_body(resources=asked))} == {"7"}
    milli = {**resources, "devicesPerNode": 4, "cpuPerNode": "2500m"}
    assert {env["OMP_NUM_THREADS"] for env in _pods_env(minimal_body(resources=milli))} == {"1"}


def test_a_trl_job_keeps_torchs_own_threads() -> None:
    """The TRL engine's trainer is no Ray actor, so Ray's one-thread default never reaches it."""
    body = minimal_body(
        engine={"name": "trl", "lora": {"rank": 16}},
        resources={"accelerator": "nvidia", "devicesPerNode": 1},
    )
    assert all("OMP_NUM_THREADS" not in env for env in _pods_env(body))


def test_a_jobs_own_threads_win_and_appear_once() -> None:
    body = minimal_body(env=[{"name": "OMP_NUM_THREADS", "value": "3"}])
    cluster = build_rayjob(job_from(body), SETTINGS, 1)["spec"]["rayClusterSpec"]
    for pod in [cluster["headGroupSpec"]["template"], *(g["template"] for g in cluster["workerGroupSpecs"])]:
        names = [e["name"] for e in pod["spec"]["containers"][0]["env"]]
        assert names.count("OMP_NUM_THREADS") == 1  # server-side apply refuses a list with two
    assert {env["OMP_NUM_THREADS"] for env in _pods_env(body)} == {"3"}
