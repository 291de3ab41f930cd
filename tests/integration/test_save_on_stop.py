"""Save, then yield: the operator's part, against the real API server, KubeRay and KWOK nodes.

The trainer's part (the hook, the save, exit YIELDED) runs for real on the real node
(tests/e2e/test_real_pods.py); here the fake Ray job API ends the attempt as the trainer would,
and the test writes the trainer's status fields as its reporter does:

- every Ray pod template carries the preStop hook and the grace period the job's bound gives;
- a suspension deletes the RayJob without KubeRay's stop of the Ray job (its finalizer released,
  background propagation), so the pods' hooks and grace period are what stop the trainer;
- an attempt that yielded starts the next one without spending a retry or a failedAttempts
  entry, and one Normal `SavedBeforeStop` Event names the cause, which an eviction's
  `DisruptionTarget` condition on the attempt's pods gives.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest
from grpo_operator.api import contract
from grpo_operator.api.contract import YieldRecord
from grpo_operator.api.stop_bound import stop_bound
from grpo_trainer.stopping import yielded
from support.cluster import Cluster
from support.jobs import apply_job, condition, example, job_pods, phase_is
from support.operator_process import OperatorProcess
from support.rayjobapi import RayJobAPI

pytestmark = pytest.mark.cluster

SAVED_STEP = 7
SAVE_SECONDS = 4.2


def _running(cluster: Cluster, namespace: str, job: str, attempt: int = 1) -> dict[str, Any]:
    return cluster.wait_for(
        "grpojob",
        job,
        namespace,
        lambda o: phase_is("Running")(o) and o["status"].get("attempt") == attempt,
        timeout=120,
        what=f"attempt {attempt} Running",
    )


def _pod_specs(raycluster: dict[str, Any]) -> list[dict[str, Any]]:
    spec = raycluster["spec"]
    groups = [spec["headGroupSpec"], *spec.get("workerGroupSpecs", [])]
    return [group["template"]["spec"] for group in groups]


def _report_stop(cluster: Cluster, namespace: str, job: str, attempt: int) -> None:
    """What the trainer's reporter writes once the attempt has saved on request (its yield record)."""
    patch = {
        "status": {
            "checkpoint": {
                "latestStep": SAVED_STEP,
                "saveSeconds": SAVE_SECONDS,
                "lastStop": {
                    "attempt": attempt,
                    "step": SAVED_STEP,
                    "stepsLost": 0,
                    "saveSeconds": SAVE_SECONDS,
                    "reason": "SavedOnStop",
                },
            }
        }
    }
    cluster.kubectl(
        "patch",
        "grpojob",
        job,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(patch),
    )


def _yield_line() -> str:
    """The Ray job's message when the trainer exits YIELDED: Ray's words, then its failure line."""
    record = YieldRecord(SAVED_STEP, 0, time.time() - 5, saved_at=time.time(), save_seconds=SAVE_SECONDS)
    return f"Job entrypoint command failed with exit code {contract.YIELDED}.\n{yielded(record).line()}"


def _events(cluster: Cluster, namespace: str, job: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.events(namespace)
        if e["involvedObject"].get("name") == job and e["reason"] == reason
    ]


def test_a_suspension_deletes_the_rayjob_without_stopping_the_ray_job_and_the_pods_carry_the_bound(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI
) -> None:
    job = apply_job(cluster, namespace, example("safegrpo-nvidia"))
    running = _running(cluster, namespace, job)
    # The pods' bound: the verl engine's defaults, as nothing has been measured yet.
    bound = stop_bound("verl", None)
    hook = [*contract.YIELD_COMMAND, str(bound.hook_seconds)]
    raycluster = cluster.get("rayclusters.ray.io", running["status"]["rayClusterName"], namespace)
    for pod in [*_pod_specs(raycluster), *(p["spec"] for p in job_pods(cluster, namespace, job))]:
        assert pod["terminationGracePeriodSeconds"] == bound.grace_seconds
        assert pod["containers"][0]["lifecycle"]["preStop"]["exec"]["command"] == hook
    rayjob = cluster.get("rayjobs.ray.io", f"{job}-1", namespace)
    assert "ray.io/rayjob-finalizer" in rayjob["metadata"]["finalizers"], "KubeRay's, before the stop"
    submission = job_api.wait_for_job(namespace)["submission_id"]

    # Every state the RayJob passes through on its way out.
    watch = subprocess.Popen(
        [
            cluster.kubectl_path,
            "--kubeconfig",
            str(cluster.kubeconfig),
            "get",
            "rayjobs.ray.io",
            f"{job}-1",
            "-n",
            namespace,
            "--watch-only",
            "--output-watch-events",
            "-o",
            "json",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1)  # the watch is established
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
        cluster.wait_gone("rayjobs.ray.io", f"{job}-1", namespace, timeout=30)
        time.sleep(1)
    finally:
        watch.terminate()
    seen, _ = watch.communicate(timeout=10)
    decoder, events, at, text = json.JSONDecoder(), [], 0, seen.strip()
    while at < len(text):  # one JSON object per watch event, pretty-printed
        event, at = decoder.raw_decode(text, at)
        events.append(event)
        while at < len(text) and text[at].isspace():
            at += 1
    seen_states = [
        (
            e["type"],
            e["object"]["metadata"].get("finalizers") or [],
            "deletionTimestamp" in e["object"]["metadata"],
        )
        for e in events
    ]
    assert [state[0] for state in seen_states][-1:] == ["DELETED"], seen_states
    # KubeRay's finalizer went before the delete (KubeRay never saw the RayJob being deleted with
    # it), and the delete waited for no children (background, not foreground, propagation).
    assert not any("ray.io/rayjob-finalizer" in names and deleting for _, names, deleting in seen_states)
    assert not any("foregroundDeletion" in names for _, names, _ in seen_states), seen_states
    # So KubeRay never stopped the Ray job: the pods' preStop hooks are what stop the trainer.
    stops = [r for r in job_api.requests(namespace) if r["method"] == "POST" and r["path"].endswith("/stop")]
    assert stops == []
    assert job_api.job(submission)["stopped_at"] is None
    # The cluster goes after it (garbage collection of the RayJob's children).
    cluster.wait_gone("rayclusters.ray.io", running["status"]["rayClusterName"], namespace, timeout=60)
    assert condition(suspended, "Suspended")["status"] == "True"
    assert _events(cluster, namespace, job, "SavedBeforeStop") == [], "nothing reported a save"


def test_an_attempt_that_yielded_is_followed_by_the_next_without_spending_a_retry(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI
) -> None:
    # backoffLimit 0: a stop counted as a failure would end the job.
    job = apply_job(cluster, namespace, example("safegrpo-nvidia", **{"runPolicy.backoffLimit": 0}))
    _running(cluster, namespace, job)
    submission = job_api.wait_for_job(namespace)["submission_id"]
    _report_stop(cluster, namespace, job, attempt=1)
    job_api.finish(submission, "FAILED", _yield_line())
    restarted = _running(cluster, namespace, job, attempt=2)
    assert "failedAttempts" not in restarted["status"] or restarted["status"]["failedAttempts"] == []
    [saved] = _events(cluster, namespace, job, "SavedBeforeStop")
    # Nothing stopped the pods that Kubernetes named (no DisruptionTarget): the pods stopped.
    assert saved["message"] == f"saved step {SAVED_STEP} before stop (PodsStopped)"
    assert saved["type"] == "Normal"
    [told] = _events(cluster, namespace, job, "Yielded")
    assert "starting attempt 2, resuming after its last step" in told["message"]
    # A few more passes post it no second time.
    time.sleep(4)
    assert len(_events(cluster, namespace, job, "SavedBeforeStop")) == 1
    assert cluster.get("grpojob", job, namespace)["status"]["phase"] == "Running"


def test_an_eviction_is_named_as_the_cause_of_the_stop(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI
) -> None:
    job = apply_job(cluster, namespace, example("safegrpo-nvidia"))
    _running(cluster, namespace, job)
    submission = job_api.wait_for_job(namespace)["submission_id"]
    [head] = [
        p
        for p in job_pods(cluster, namespace, job)
        if p["metadata"]["labels"]["grpo.dev/component"] == "head"
    ]
    name = head["metadata"]["name"]
    # The grace period a real kubelet would give it, while its preStop hook waits for the save:
    # KWOK deletes a pod at once, so a finalizer of the test's holds it there instead.
    hold = "grpo.dev/test-hold"
    cluster.kubectl(
        "patch",
        "pod",
        name,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"metadata": {"finalizers": [hold]}}),
    )
    try:
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        cluster.kubectl(
            "create",
            "--raw",
            f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
            "-f",
            "-",
            input=json.dumps(eviction),
        )
        evicted = cluster.get("pod", name, namespace)
        disruption = next(c for c in evicted["status"]["conditions"] if c["type"] == "DisruptionTarget")
        assert (disruption["status"], disruption["reason"]) == ("True", "EvictionByEvictionAPI")
        _report_stop(cluster, namespace, job, attempt=1)
        job_api.finish(submission, "FAILED", _yield_line())
        restarted = _running(cluster, namespace, job, attempt=2)
    finally:
        cluster.kubectl(
            "patch",
            "pod",
            name,
            "-n",
            namespace,
            "--type=json",
            "-p",
            '[{"op":"remove","path":"/metadata/finalizers"}]',
            check=False,
        )
    [saved] = _events(cluster, namespace, job, "SavedBeforeStop")
    assert saved["message"] == f"saved step {SAVED_STEP} before stop (Evicted)"
    assert "failedAttempts" not in restarted["status"] or restarted["status"]["failedAttempts"] == []
