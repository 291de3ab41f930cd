"""The operator under faults, against the real API server, KubeRay and KWOK: children lost with a
crash or deleted by hand, objects it did not create, children the API server refuses, a delete
that fails after a deadline, and a job deleted and re-created under the same name.

The API server is made to refuse things by ValidatingAdmissionPolicies scoped to the test's
namespace (admission.py): the same answer a real admission plugin or webhook would give.
"""

from __future__ import annotations

import json
import time

import pytest
from support.admission import refusing
from support.cluster import Cluster
from support.jobs import apply_job, condition, example, owned_children, phase_is
from support.operator_process import OperatorProcess

pytestmark = pytest.mark.cluster

OTHER_CHILDREN = ("configmaps", "serviceaccounts", "roles", "rolebindings", "networkpolicies")


def _created(obj: dict) -> bool:
    found = condition(obj, "Created")
    return found is not None and found["status"] == "True"


def test_children_lost_while_the_operator_was_down_come_back(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    job = apply_job(cluster, namespace, example("lora-single-gpu"))
    cluster.wait_for("grpojob", job, namespace, _created, timeout=120, what="Created")
    # As if the operator had crashed right after applying the RayJob: nothing else exists.
    operator.kill()
    for kind in OTHER_CHILDREN:
        cluster.kubectl("delete", kind, "-n", namespace, "-l", f"grpo.dev/job={job}", "--wait=true")
    assert set(owned_children(cluster, namespace, job)) == {"rayjobs.ray.io", "persistentvolumeclaims"}
    operator.start()
    deadline = time.monotonic() + 60
    while set(owned_children(cluster, namespace, job)) != {
        "rayjobs.ray.io",
        "persistentvolumeclaims",
        *OTHER_CHILDREN,
    }:
        assert time.monotonic() < deadline, (
            f"children still missing: {owned_children(cluster, namespace, job)}"
        )
        time.sleep(0.5)
    obj = cluster.get("grpojob", job, namespace)
    assert obj["status"]["attempt"] == 1
    assert owned_children(cluster, namespace, job)["rayjobs.ray.io"] == [f"{job}-1"]


def test_a_child_deleted_by_hand_comes_back_within_a_few_resyncs(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    job = apply_job(cluster, namespace, example("lora-single-gpu"))
    cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="Running")
    cluster.kubectl("delete", "configmap", f"{job}-spec", "-n", namespace, "--wait=true")
    cluster.kubectl("delete", "rolebinding", f"{job}-trainer", "-n", namespace, "--wait=true")
    # The test operator resyncs every 3 s, and reads a quiet job's children again every 5 periods
    # (CHILDREN_CHECK_PERIODS in handlers/reconcile.py): 15 s, and a tick of the resync.
    cluster.wait_for("configmap", f"{job}-spec", namespace, lambda _: True, timeout=45, what="existence")
    cluster.wait_for("rolebinding", f"{job}-trainer", namespace, lambda _: True, timeout=45, what="existence")


def test_an_object_the_operator_did_not_create_is_not_taken_over(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    body = example("lora-single-gpu")
    job = body["metadata"]["name"]
    mine = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{job}-spec", "namespace": namespace, "labels": {"team": "a"}},
        "data": {"notes": "someone else's"},
    }
    cluster.apply(mine)
    apply_job(cluster, namespace, body)
    failed = cluster.wait_for("grpojob", job, namespace, phase_is("Failed"), timeout=60, what="Failed")
    cond = condition(failed, "Failed")
    assert cond["reason"] == "ChildConflict"
    assert f"ConfigMap {job}-spec already exists and was not created by this GRPOJob" in cond["message"]
    # A finished job keeps the conditions of its end: Created=False would only repeat Failed.
    assert condition(failed, "Created") is None
    stored = cluster.get("configmap", f"{job}-spec", namespace)
    assert stored["data"] == {"notes": "someone else's"}
    assert "ownerReferences" not in stored["metadata"]
    # The Ray cluster it had started is taken down, and deleting the job leaves the ConfigMap.
    cluster.wait_gone("rayjobs.ray.io", f"{job}-1", namespace, timeout=60)
    warnings = [e for e in cluster.events(namespace) if e["reason"] == "ChildConflict"]
    assert warnings
    cluster.kubectl("delete", "grpojob", job, "-n", namespace, "--wait=true")
    time.sleep(3)
    assert cluster.get("configmap", f"{job}-spec", namespace) is not None


def test_a_child_the_api_server_refuses_fails_the_job_with_its_message(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    with refusing(
        cluster,
        namespace,
        group="",
        resource="configmaps",
        operations=["CREATE", "UPDATE"],
        expression="!object.metadata.name.endsWith('-spec')",
        message="spec ConfigMaps are not allowed here",
        probe=["create", "configmap", "probe-spec", "--dry-run=server"],
    ):
        job = apply_job(cluster, namespace, example("lora-single-gpu"))
        failed = cluster.wait_for("grpojob", job, namespace, phase_is("Failed"), timeout=60, what="Failed")
        cond = condition(failed, "Failed")
        assert cond["reason"] == "ChildRejected"
        assert f"the API server refused ConfigMap {job}-spec" in cond["message"]
        assert "spec ConfigMaps are not allowed here" in cond["message"]
        events = [e for e in cluster.events(namespace) if e["reason"] == "ChildRejected"]
        assert events
        assert "spec ConfigMaps are not allowed here" in events[0]["message"]
        # The RayJob went first; with the job failed, its cluster is taken down.
        cluster.wait_gone("rayjobs.ray.io", f"{job}-1", namespace, timeout=60)
        # Not retried: the job stays Failed and nothing asks again.
        time.sleep(4)
        again = cluster.get("grpojob", job, namespace)
        assert again["status"]["conditions"] == failed["status"]["conditions"]


def test_a_delete_refused_after_the_deadline_is_sent_again(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    job = apply_job(cluster, namespace, example("lora-single-gpu", **{"runPolicy.activeDeadlineSeconds": 20}))
    cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=60, what="Running")
    with refusing(
        cluster,
        namespace,
        group="ray.io",
        resource="rayjobs",
        operations=["DELETE"],
        expression="false",
        message="RayJobs may not be deleted right now",
        probe=["delete", "rayjobs.ray.io", f"{job}-1", "--dry-run=server"],
    ):
        failed = cluster.wait_for("grpojob", job, namespace, phase_is("Failed"), timeout=60, what="Failed")
        assert condition(failed, "Failed")["reason"] == "DeadlineExceeded"
        time.sleep(3)
        assert cluster.get("rayjobs.ray.io", f"{job}-1", namespace) is not None, "the delete was refused"
    # The job is finished, but its Ray cluster is not gone yet: the operator keeps at it.
    cluster.wait_gone("rayjobs.ray.io", f"{job}-1", namespace, timeout=90)
    left = [
        c
        for c in cluster.get("rayclusters.ray.io", namespace=namespace)["items"]
        if c["metadata"]["name"].startswith(job)
    ]
    assert left == []


def test_a_job_recreated_under_the_same_name_starts_afresh(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    body = example("lora-single-gpu")
    job = apply_job(cluster, namespace, body)
    # Running: its RayJob names a Ray cluster, which the new job must not take for its own.
    first = cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="Running")
    claim_uid = cluster.get("persistentvolumeclaim", f"{job}-checkpoints", namespace)["metadata"]["uid"]
    # The old job's RayJob outlives it for a while (KubeRay stops its Ray job first): a finalizer of
    # the test's holds it until the new job has seen it.
    hold = '{"metadata":{"finalizers":["grpo.dev/test-hold"]}}'
    cluster.kubectl("patch", "rayjobs.ray.io", f"{job}-1", "-n", namespace, "--type=merge", "-p", hold)
    cluster.kubectl("delete", "grpojob", job, "-n", namespace, "--wait=true")
    apply_job(cluster, namespace, body)
    waiting = cluster.wait_for(
        "grpojob",
        job,
        namespace,
        lambda o: (condition(o, "Created") or {}).get("reason") == "WaitingForPreviousJob",
        timeout=60,
        what="waiting for the old RayJob",
    )
    assert waiting["metadata"]["uid"] != first["metadata"]["uid"]
    assert "rayClusterName" not in waiting["status"], "the old job's Ray cluster is not the new one's"
    time.sleep(3)
    assert cluster.get("grpojob", job, namespace)["status"]["attempt"] == 1
    cluster.kubectl(
        "patch", "rayjobs.ray.io", f"{job}-1", "-n", namespace, "--type=json",
        "-p", '[{"op":"remove","path":"/metadata/finalizers"}]',
    )  # fmt: skip
    running = cluster.wait_for(
        "grpojob",
        job,
        namespace,
        lambda o: o["metadata"]["uid"] == waiting["metadata"]["uid"] and phase_is("Running")(o),
        timeout=120,
        what="the new job Running",
    )
    new_uid = running["metadata"]["uid"]
    assert running["status"]["attempt"] == 1, "the old job's RayJob going away is no failure of the new one"
    assert not running["status"].get("failedAttempts")
    assert condition(running, "Created")["status"] == "True"
    rayjob = cluster.get("rayjobs.ray.io", f"{job}-1", namespace)
    assert rayjob["metadata"]["ownerReferences"][0]["uid"] == new_uid
    spec = json.loads(cluster.get("configmap", f"{job}-spec", namespace)["data"]["job.json"])
    assert spec["uid"] == new_uid
    assert spec["paths"]["jobDir"] == f"/grpo/checkpoints/{job}-{new_uid.replace('-', '')[:8]}"
    # The retained volume is the same one: only the job's folder on it is new.
    assert (
        cluster.get("persistentvolumeclaim", f"{job}-checkpoints", namespace)["metadata"]["uid"] == claim_uid
    )


def test_a_priority_class_that_does_not_exist_fails_the_job_before_anything_is_made(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    job = apply_job(
        cluster, namespace, example("lora-single-gpu", **{"resources.priorityClassName": "no-such-class"})
    )
    failed = cluster.wait_for("grpojob", job, namespace, phase_is("Failed"), timeout=60, what="Failed")
    cond = condition(failed, "Failed")
    assert cond["reason"] == "InvalidSpec"
    assert (
        cond["message"] == "spec.resources.priorityClassName: no PriorityClass 'no-such-class' in the cluster"
    )
    assert owned_children(cluster, namespace, job) == {}
