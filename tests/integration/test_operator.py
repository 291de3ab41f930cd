"""The operator end to end against the real API server, KubeRay and KWOK nodes.

Each test applies GRPOJobs as a user would, drives the Ray job through the fake job API and
watches what the operator does. Nothing here is mocked.
"""

from __future__ import annotations

import time

import pytest
from grpo_operator.api.contract import UNKNOWN, Failure
from support.cluster import Cluster
from support.jobs import (
    CHILD_KINDS,
    apply_job,
    condition,
    example,
    job_pods,
    owned_children,
    phase_is,
)
from support.operator_process import OperatorProcess
from support.rayjobapi import RayJobAPI, fails_after, succeeds_after

pytestmark = pytest.mark.cluster

POOLS = {
    "nvidia": ("nvidia.com/gpu", "nvidia.com/gpu.product"),
    "ascend": ("huawei.com/Ascend910", "accelerator"),
}


@pytest.mark.parametrize(
    ("name", "accelerator", "workers"),
    [
        ("safegrpo-nvidia", "nvidia", 1),
        ("geo3k-ascend-910b", "ascend", 1),
        ("lora-single-gpu", "nvidia", 1),
        ("geo3k-two-node-nvidia", "nvidia", 2),
    ],
)
def test_example_runs_on_its_pool(
    cluster: Cluster, namespace: str, operator: OperatorProcess, name: str, accelerator: str, workers: int
) -> None:
    job = apply_job(cluster, namespace, example(name))
    obj = cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="phase Running")
    assert obj["status"]["attempt"] == 1
    assert obj["status"]["rayJobName"] == f"{job}-1"
    assert condition(obj, "Running")["status"] == "True"
    device, pool_label = POOLS[accelerator]
    workers_seen = [
        p
        for p in job_pods(cluster, namespace, job)
        if p["metadata"]["labels"]["grpo.dev/component"] == "worker"
    ]
    assert len(workers_seen) == workers
    for pod in workers_seen:
        node = cluster.get("node", pod["spec"]["nodeName"])
        assert pool_label in node["metadata"]["labels"], (
            f"{pod['metadata']['name']} is on {node['metadata']['name']}"
        )
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        assert int(limits[device]) == example(name)["spec"]["resources"]["devicesPerNode"]
        assert pod["status"]["phase"] == "Running"


def test_success(cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI) -> None:
    job_api.configure_namespace(namespace, succeeds_after(3))
    job = apply_job(cluster, namespace, example("geo3k-ascend-910b"))
    obj = cluster.wait_for("grpojob", job, namespace, phase_is("Succeeded"), timeout=120, what="Succeeded")
    assert condition(obj, "Succeeded")["status"] == "True"
    assert obj["status"]["completionTime"]
    [submission] = job_api.submissions(namespace)
    assert submission["entrypoint"] == "grpo-train run --spec /grpo/spec/job.json"
    cluster.kubectl("wait", "--for=condition=Succeeded", f"grpojob/{job}", "-n", namespace, "--timeout=5s")
    reasons = [e["reason"] for e in cluster.events(namespace) if e["involvedObject"].get("name") == job]
    assert "Created" in reasons
    assert "TrainingSucceeded" in reasons


def test_retryable_failure_restarts_then_fails_after_backoff_limit(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI
) -> None:
    # Each attempt is held PENDING for a few seconds first, so attempt 2's Restarting phase lasts
    # long enough to be seen before it runs and fails in its turn.
    job_api.configure_namespace(
        namespace,
        [("PENDING", 0), ("RUNNING", 4), ("FAILED", 7, "Job entrypoint command failed with exit code 75.")],
    )
    job = apply_job(cluster, namespace, example("geo3k-ascend-910b", **{"runPolicy.backoffLimit": 1}))
    restarting = cluster.wait_for(
        "grpojob",
        job,
        namespace,
        lambda o: (o.get("status") or {}).get("attempt") == 2 and phase_is("Restarting")(o),
        timeout=120,
        what="attempt 2, Restarting",
    )
    assert condition(restarting, "Restarting")["status"] == "True"
    assert restarting["status"]["failedAttempts"][0]["retryable"] is True
    failed = cluster.wait_for("grpojob", job, namespace, phase_is("Failed"), timeout=120, what="Failed")
    assert condition(failed, "Failed")["reason"] == "BackoffLimitExceeded"
    assert failed["status"]["attempt"] == 2
    assert sorted(owned_children(cluster, namespace, job)["rayjobs.ray.io"]) == [f"{job}-1", f"{job}-2"]


def test_a_crash_that_repeats_stops_the_retries_and_describe_shows_its_cause(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI
) -> None:
    # The line the trainer ends on when it read the engine's root exception from its log.
    crash = Failure(
        UNKNOWN,
        "EngineCrashed",
        "RuntimeError: split_with_sizes expects split_sizes to sum exactly to 1278 in update_actor",
        signature="a1b2c3d4e5f6",
    )
    job_api.configure_namespace(
        namespace,
        [
            ("PENDING", 0),
            ("RUNNING", 2),
            ("FAILED", 4, f"Job entrypoint command failed with exit code 1.\n{crash.line()}"),
        ],
    )
    job = apply_job(cluster, namespace, example("geo3k-ascend-910b", **{"runPolicy.backoffLimit": 3}))
    failed = cluster.wait_for("grpojob", job, namespace, phase_is("Failed"), timeout=180, what="Failed")
    # Attempt 2 crashed as attempt 1 did: the third and fourth attempts are not spent.
    assert failed["status"]["attempt"] == 2
    assert condition(failed, "Failed")["reason"] == "RepeatedFailure"
    attempts = failed["status"]["failedAttempts"]
    assert [(a["attempt"], a["signature"]) for a in attempts] == [(1, "a1b2c3d4e5f6"), (2, "a1b2c3d4e5f6")]
    assert all("split_with_sizes" in a["message"] for a in attempts)
    assert sorted(owned_children(cluster, namespace, job)["rayjobs.ray.io"]) == [f"{job}-1", f"{job}-2"]
    described = cluster.kubectl("describe", f"grpojob/{job}", "-n", namespace).stdout
    assert "RepeatedFailure" in described
    assert "split_with_sizes expects split_sizes to sum exactly to 1278 in update_actor" in described


def test_configuration_error_is_not_retried(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI
) -> None:
    job_api.configure_namespace(namespace, fails_after(2, "Job entrypoint command failed with exit code 3."))
    job = apply_job(cluster, namespace, example("geo3k-ascend-910b", **{"runPolicy.backoffLimit": 3}))
    failed = cluster.wait_for("grpojob", job, namespace, phase_is("Failed"), timeout=120, what="Failed")
    assert failed["status"]["attempt"] == 1
    assert "configuration error" in condition(failed, "Failed")["message"]


def test_suspend_and_resume(cluster: Cluster, namespace: str, operator: OperatorProcess) -> None:
    job = apply_job(cluster, namespace, example("safegrpo-nvidia"))
    cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="Running")
    cluster.kubectl(
        "patch",
        "grpojob",
        job,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec":{"runPolicy":{"suspend":true}}}',
    )
    suspended = cluster.wait_for(
        "grpojob", job, namespace, phase_is("Suspended"), timeout=60, what="Suspended"
    )
    assert condition(suspended, "Suspended")["status"] == "True"
    cluster.wait_gone("rayjobs.ray.io", f"{job}-1", namespace, timeout=60)
    assert cluster.get("persistentvolumeclaim", f"{job}-checkpoints", namespace) is not None
    cluster.kubectl(
        "patch",
        "grpojob",
        job,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec":{"runPolicy":{"suspend":false}}}',
    )
    resumed = cluster.wait_for(
        "grpojob",
        job,
        namespace,
        lambda o: phase_is("Running")(o) and o["status"]["attempt"] == 2,
        timeout=120,
        what="Running attempt 2",
    )
    assert condition(resumed, "Suspended")["status"] == "False"


def test_deadline(cluster: Cluster, namespace: str, operator: OperatorProcess) -> None:
    job = apply_job(cluster, namespace, example("lora-single-gpu", **{"runPolicy.activeDeadlineSeconds": 8}))
    failed = cluster.wait_for("grpojob", job, namespace, phase_is("Failed"), timeout=90, what="Failed")
    assert condition(failed, "Failed")["reason"] == "DeadlineExceeded"
    cluster.wait_gone("rayjobs.ray.io", f"{job}-1", namespace, timeout=60)


def test_deletion_cascades_and_keeps_checkpoints(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    job = apply_job(cluster, namespace, example("lora-single-gpu"))
    cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="Running")
    assert set(owned_children(cluster, namespace, job)) == set(CHILD_KINDS)
    cluster.kubectl("delete", "grpojob", job, "-n", namespace, "--wait=true", timeout=90)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        left = owned_children(cluster, namespace, job)
        if set(left) == {"persistentvolumeclaims"}:
            break
        time.sleep(1)
    assert owned_children(cluster, namespace, job) == {"persistentvolumeclaims": [f"{job}-checkpoints"]}


def test_schema_and_cel_reject_bad_input(cluster: Cluster, namespace: str) -> None:
    body = example("geo3k-ascend-910b", **{"dataset.train": ["pvc://data/train.parquet"]})
    result = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=_yaml(body), check=False)
    assert result.returncode != 0
    assert "set exactly one of dataset.preset (a built-in dataset) or dataset.train" in result.stderr
    body = example("geo3k-ascend-910b", **{"algorithm.groupSize": 1})
    result = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=_yaml(body), check=False)
    assert "spec.algorithm.groupSize" in result.stderr
    assert "should be greater than or equal to 2" in result.stderr
    body = example("lora-single-gpu", **{"resources.devicesPerNode": 2})
    result = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=_yaml(body), check=False)
    assert "engine.name=trl trains on one device" in result.stderr
    assert cluster.get("grpojobs", namespace=namespace)["items"] == []


def test_world_size_is_immutable(cluster: Cluster, namespace: str) -> None:
    body = example("geo3k-ascend-910b")
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=_yaml(body))
    changed = example("geo3k-ascend-910b", **{"resources.devicesPerNode": 4})
    result = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=_yaml(changed), check=False)
    assert result.returncode != 0
    assert (
        "resources.devicesPerNode is immutable: the world size must not change across resumes"
        in result.stderr
    )


def test_semantic_error_fails_with_no_children(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    # What only the operator can check (its accelerator profiles): verl on the CPU pool.
    job = apply_job(cluster, namespace, example("geo3k-ascend-910b", **{"resources.accelerator": "cpu"}))
    failed = cluster.wait_for("grpojob", job, namespace, phase_is("Failed"), timeout=60, what="Failed")
    cond = condition(failed, "Failed")
    assert cond["reason"] == "InvalidSpec"
    assert "spec.engine.name: verl's rollouts need GPUs or NPUs (vLLM)" in cond["message"]
    time.sleep(3)  # a few resync periods: still nothing may be created
    assert owned_children(cluster, namespace, job) == {}
    warnings = [
        e for e in cluster.events(namespace) if e["type"] == "Warning" and e["reason"] == "InvalidSpec"
    ]
    assert warnings
    assert "spec.engine.name" in warnings[0]["message"]


def test_the_api_server_refuses_what_only_the_operator_used_to_catch(
    cluster: Cluster, namespace: str
) -> None:
    body = example("geo3k-ascend-910b", **{"rollout.tensorParallelSize": 3})
    result = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=_yaml(body), check=False)
    assert result.returncode != 0
    assert (
        "spec.rollout.tensorParallelSize: Invalid value: tensorParallelSize=3 must divide "
        "resources.devicesPerNode=8" in result.stderr
    )
    body = example("geo3k-ascend-910b")
    body["metadata"]["name"] = "1demo"
    result = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=_yaml(body), check=False)
    assert "metadata.name" in result.stderr
    assert cluster.get("grpojobs", namespace=namespace)["items"] == []


def test_operator_restart_mid_reconcile_creates_no_duplicates(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    names = []
    for i in range(6):
        body = example("lora-single-gpu")
        body["metadata"]["name"] = f"restart-{i}"
        names.append(apply_job(cluster, namespace, body))
    time.sleep(0.5)
    operator.kill()
    operator.start()
    for name in names:
        cluster.wait_for(
            "grpojob", name, namespace, phase_is("Running", "Pending"), timeout=120, what="reconciled"
        )
    for name in names:
        obj = cluster.wait_for(
            "grpojob", name, namespace, lambda o: (o.get("status") or {}).get("attempt") == 1, timeout=60
        )
        assert obj["status"]["rayJobName"] == f"{name}-1"
        assert owned_children(cluster, namespace, name)["rayjobs.ray.io"] == [f"{name}-1"]


def test_metrics_are_served(operator: OperatorProcess, cluster: Cluster, namespace: str) -> None:
    # A job of its own, so the figures do not depend on what other tests left running.
    job = apply_job(cluster, namespace, example("geo3k-ascend-910b"))
    cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="phase Running")
    text = operator.metrics()
    running = [line for line in text.splitlines() if line.startswith('grpo_jobs{phase="Running"}')]
    assert running, "no grpo_jobs gauge for phase Running"
    assert float(running[0].split()[-1]) >= 1, running
    assert "grpo_handler_duration_seconds_bucket" in text


def _yaml(body: dict) -> str:
    import yaml

    return yaml.safe_dump(body)
