"""Kueue for real: a real Kueue controller (tests/support/kueue.py says how it runs here) queues,
admits and prioritises the RayJobs the operator creates for a GRPOJob with `resources.queueName`
and `resources.workloadPriorityClass`.

The ClusterQueue holds exactly one job of the example's size, so a second job waits, and the test
can see where a retried attempt lands: each attempt is a new RayJob and so a new Workload, which
keeps the job's priority but not its place, and queues behind a job that was already waiting.
The queue is StrictFIFO: under BestEffortFIFO the waiting job is offered the freed quota only in
Kueue's next requeue batch, a second after attempt 1's Workload finishes, and a retry the operator
makes within that second is admitted ahead of it (support/kueue.py, cluster_queue).
The failed attempt's Workload is finished by Kueue (its RayJob stays, failed), so it holds no
quota. The first test checks the same contract without Kueue.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
from support.cluster import Cluster
from support.jobs import apply_job, condition, example, phase_is
from support.kueue import (
    API,
    PLURALS,
    KueueProcess,
    admitted,
    cluster_queue,
    finished,
    kueue_dir,
    release,
    workloads_of,
)
from support.namespaces import create_namespace, delete_namespace
from support.operator_process import OperatorProcess
from support.rayjobapi import RUNNING_FOREVER, RayJobAPI, succeeds_after

# One geo3k-ascend-910b job: a 4-CPU head and one worker of 52 CPUs and 8 NPUs, 528 GiB in all.
ONE_JOB = {"cpu": "60", "memory": "600Gi", "huawei.com/Ascend910": "8"}
PRIORITY = 1000


@pytest.fixture(scope="module")
def kueue(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KueueProcess]:
    built = kueue_dir()
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(built / "crds"))
    for crd in ("workloads", "clusterqueues", "localqueues", "resourceflavors", "workloadpriorityclasses"):
        # Polled, not `kubectl wait`: the Workload CRD is large and its status comes late.
        cluster.wait_for(
            "customresourcedefinition",
            f"{crd}.kueue.x-k8s.io",
            None,
            lambda o: any(
                c["type"] == "Established" and c["status"] == "True"
                for c in (o.get("status") or {}).get("conditions") or []
            ),
            timeout=120,
            what="Established",
        )
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}})
    process = KueueProcess(cluster.kubeconfig, tmp_path_factory.mktemp("kueue"), built / "bin" / "kueue")
    process.start()
    yield process
    process.stop()


def _workload(
    cluster: Cluster, namespace: str, rayjob: str, what: str, check: Any, timeout: float = 90
) -> dict:
    """The RayJob's Workload once ``check`` holds for it."""
    deadline = time.monotonic() + timeout
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        found = workloads_of(cluster, namespace, rayjob)
        if len(found) == 1 and check(found[0]):
            return found[0]
        time.sleep(0.5)
    raise AssertionError(f"no Workload of {namespace}/{rayjob} {what} in {timeout:.0f} s: {found}")


def _pending(workload: dict[str, Any]) -> bool:
    """Kueue looked at it and had no quota for it."""
    return any(
        c["type"] == "QuotaReserved" and c["status"] == "False" and c.get("reason") == "Pending"
        for c in (workload.get("status") or {}).get("conditions", [])
    )


def _has_priority(workload: dict[str, Any], wpc: str) -> bool:
    ref = workload["spec"].get("priorityClassRef") or {}
    return (ref.get("kind"), ref.get("name"), workload["spec"].get("priority")) == (
        "WorkloadPriorityClass",
        wpc,
        PRIORITY,
    )


def test_every_attempt_is_handed_to_kueue_suspended_with_its_queue_and_priority(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI
) -> None:
    """The API contract with Kueue, without Kueue: each attempt's RayJob is created suspended and
    labelled with the queue and the WorkloadPriorityClass, the job waits (Pending, then Restarting
    for a retry), and the operator leaves `suspend` to whoever admits it. The test unsuspends each RayJob as Kueue does
    on admission, and fails attempt 1 to see attempt 2 handed over the same way. It comes first in
    this module: once the `kueue` fixture runs, Kueue would manage these RayJobs too. Where Kueue's
    API is served (its CRDs outlive an earlier run), the operator checks that the job's
    WorkloadPriorityClass exists, so the test makes it; without Kueue it is not judged."""
    job_api.configure_namespace(namespace, RUNNING_FOREVER)
    served = cluster.kubectl("get", "crd", PLURALS["WorkloadPriorityClass"], check=False).returncode == 0
    if served:
        cluster.apply(
            {
                "apiVersion": API,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": "research-high"},
                "value": 1,
            }
        )
    queued = {"resources.queueName": "training", "resources.workloadPriorityClass": "research-high"}
    job = apply_job(
        cluster, namespace, example("geo3k-ascend-910b", **queued, **{"runPolicy.backoffLimit": 1})
    )
    for attempt in (1, 2):
        rayjob = cluster.wait_for(
            "rayjob", f"{job}-{attempt}", namespace, lambda _: True, timeout=90, what="created"
        )
        labels = rayjob["metadata"]["labels"]
        assert (labels["kueue.x-k8s.io/queue-name"], labels["kueue.x-k8s.io/priority-class"]) == (
            "training",
            "research-high",
        )
        assert rayjob["spec"]["suspend"] is True
        time.sleep(3)  # a few reconciles: the job waits, and nobody but "Kueue" unsuspends it
        waiting = cluster.get("grpojob", job, namespace)
        # Attempt 1 waits as Pending; a retry waiting for admission shows the job Restarting.
        expected = "Pending" if attempt == 1 else "Restarting"
        assert (waiting["status"]["phase"], waiting["status"]["attempt"]) == (expected, attempt)
        assert cluster.get("rayjob", f"{job}-{attempt}", namespace)["spec"]["suspend"] is True
        # Admission, as Kueue does it: suspend off.
        cluster.kubectl(
            "patch",
            "rayjob",
            f"{job}-{attempt}",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"spec":{"suspend":false}}',
        )
        cluster.wait_for(
            "grpojob",
            job,
            namespace,
            lambda o, n=attempt: phase_is("Running")(o) and o["status"]["attempt"] == n,
            timeout=120,
            what=f"attempt {attempt} Running",
        )
        if attempt == 1:
            [submission] = job_api.jobs(namespace)
            job_api.finish(
                submission["submission_id"], "FAILED", "Job entrypoint command failed with exit code 75."
            )


def test_a_queued_job_runs_at_its_priority_and_a_retry_queues_anew_behind_a_waiting_job(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI, kueue: KueueProcess
) -> None:
    token = secrets.token_hex(3)
    flavor, queue, wpc = f"flavor-{token}", f"cq-{token}", f"research-{token}"
    other = create_namespace(cluster, "kueue-other")
    cluster.kubectl("label", "namespace", namespace, other, f"grpo.dev/kueue-test={token}")
    cluster_scoped = [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": flavor}},
        {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": wpc}, "value": PRIORITY},
        cluster_queue(queue, flavor, {"grpo.dev/kueue-test": token}, ONE_JOB),
    ]
    try:
        cluster.apply(cluster_scoped)
        for ns in (namespace, other):
            local = {
                "apiVersion": API,
                "kind": "LocalQueue",
                "metadata": {"name": "training", "namespace": ns},
            }
            cluster.apply({**local, "spec": {"clusterQueue": queue}})
        queued = {"resources.queueName": "training", "resources.workloadPriorityClass": wpc}
        job_api.configure_namespace(namespace, RUNNING_FOREVER)
        job_api.configure_namespace(other, succeeds_after(8))

        # Attempt 1: a Workload at the class's priority, admitted, and the job runs.
        job = apply_job(
            cluster, namespace, example("geo3k-ascend-910b", **queued, **{"runPolicy.backoffLimit": 1})
        )
        first = _workload(cluster, namespace, f"{job}-1", "admitted", admitted)
        assert _has_priority(first, wpc), first["spec"]
        cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="Running")

        # A second job of equal priority finds no quota left and waits; its GRPOJob says so.
        waiting = apply_job(cluster, other, example("geo3k-ascend-910b", **queued))
        waiting_workload = _workload(cluster, other, f"{waiting}-1", "pending for quota", _pending)
        assert cluster.get("grpojob", waiting, other)["status"]["phase"] == "Pending"
        assert cluster.get("rayjob", f"{waiting}-1", other)["spec"]["suspend"] is True

        # Attempt 1 fails (retryable): attempt 2 is a new RayJob, so a new Workload, at the same
        # priority, created after the waiting job's, so behind it in the queue.
        [submission] = job_api.jobs(namespace)
        job_api.finish(
            submission["submission_id"], "FAILED", "Job entrypoint command failed with exit code 75."
        )
        retry = _workload(
            cluster, namespace, f"{job}-2", "at the class's priority", lambda w: _has_priority(w, wpc)
        )
        assert retry["metadata"]["creationTimestamp"] >= waiting_workload["metadata"]["creationTimestamp"]
        # What frees the quota: the failed attempt's RayJob stays (no TTL asked for), unsuspended
        # as Kueue left it (false, so left out), and KubeRay's Failed makes Kueue finish its
        # Workload. A dead attempt holds no quota.
        dead = cluster.get("rayjob", f"{job}-1", namespace)
        assert (dead["spec"].get("suspend", False), dead["status"]["jobDeploymentStatus"]) == (
            False,
            "Failed",
        )
        _workload(cluster, namespace, f"{job}-1", "finished (Failed)", lambda w: finished(w) == "Failed")
        _workload(cluster, other, f"{waiting}-1", "admitted", admitted)
        assert not admitted(workloads_of(cluster, namespace, f"{job}-2")[0]), (
            "the retry went ahead of the waiting job"
        )
        assert cluster.get("grpojob", job, namespace)["status"]["attempt"] == 2

        # The waiting job finishes; the retry is admitted and runs.
        cluster.wait_for("grpojob", waiting, other, phase_is("Succeeded"), timeout=120, what="Succeeded")
        _workload(cluster, namespace, f"{job}-2", "admitted", admitted, timeout=120)
        running = cluster.wait_for(
            "grpojob",
            job,
            namespace,
            lambda o: phase_is("Running")(o) and o["status"].get("attempt") == 2,
            timeout=120,
            what="attempt 2 Running",
        )
        assert running["status"]["failedAttempts"][0]["attempt"] == 1
    finally:
        release(cluster, [namespace, other], cluster_scoped)
        delete_namespace(cluster, other)


def test_a_workload_priority_class_that_does_not_exist_fails_the_job_naming_the_field(
    cluster: Cluster, namespace: str, operator: OperatorProcess, kueue: KueueProcess
) -> None:
    """Issue 58: the class was copied into the RayJob's label unchecked; Kueue cannot make a
    Workload of a class it does not have, and the job read Queued for ever. Now it fails before its
    first RayJob, naming the field, as a missing priorityClassName does."""
    missing = f"missing-{secrets.token_hex(3)}"
    queued = {"resources.queueName": "training", "resources.workloadPriorityClass": missing}
    job = apply_job(cluster, namespace, example("geo3k-ascend-910b", **queued))
    failed = cluster.wait_for("grpojob", job, namespace, phase_is("Failed"), timeout=90, what="Failed")
    found = condition(failed, "Failed") or {}
    assert (found.get("reason"), found.get("message")) == (
        "InvalidSpec",
        f"spec.resources.workloadPriorityClass: no Kueue WorkloadPriorityClass {missing!r} in the cluster",
    )
    assert cluster.get("rayjob", f"{job}-1", namespace) is None


def test_a_job_kueue_preempts_for_a_higher_priority_one_names_the_preemption_as_its_stop(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI, kueue: KueueProcess
) -> None:
    """A ClusterQueue that preempts lower priorities within itself, full with a low-priority job: a
    high-priority job makes Kueue suspend the first job's RayJob (KubeRay then deletes its Ray
    cluster, whose pods save through their preStop hooks). Once the trainer has reported the save
    (status.checkpoint.lastStop, written here as its reporter does), the job's Running condition
    and one Normal SavedBeforeStop Event name the cause, PreemptedByKueue, and the job waits to be
    admitted again, not failed."""
    token = secrets.token_hex(3)
    flavor, queue, low, high = f"flavor-{token}", f"cq-{token}", f"low-{token}", f"high-{token}"
    other = create_namespace(cluster, "kueue-urgent")
    cluster.kubectl("label", "namespace", namespace, other, f"grpo.dev/kueue-test={token}")
    preempting = cluster_queue(queue, flavor, {"grpo.dev/kueue-test": token}, ONE_JOB)
    preempting["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    cluster_scoped = [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": flavor}},
        {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": low}, "value": 100},
        {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": high}, "value": 10000},
        preempting,
    ]
    try:
        cluster.apply(cluster_scoped)
        for ns in (namespace, other):
            local = {
                "apiVersion": API,
                "kind": "LocalQueue",
                "metadata": {"name": "training", "namespace": ns},
            }
            cluster.apply({**local, "spec": {"clusterQueue": queue}})
        job_api.configure_namespace(namespace, RUNNING_FOREVER)
        job_api.configure_namespace(other, RUNNING_FOREVER)
        job = apply_job(
            cluster,
            namespace,
            example(
                "geo3k-ascend-910b",
                **{"resources.queueName": "training", "resources.workloadPriorityClass": low},
            ),
        )
        _workload(cluster, namespace, f"{job}-1", "admitted", admitted)
        cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="Running")

        urgent = apply_job(
            cluster,
            other,
            example(
                "geo3k-ascend-910b",
                **{"resources.queueName": "training", "resources.workloadPriorityClass": high},
            ),
        )
        # Kueue evicts the low-priority Workload and suspends its RayJob; the urgent job runs.
        cluster.wait_for(
            "rayjob",
            f"{job}-1",
            namespace,
            lambda o: o["spec"].get("suspend") is True,
            timeout=90,
            what="suspended",
        )
        cluster.wait_for("grpojob", urgent, other, phase_is("Running"), timeout=120, what="Running")
        saved = {"attempt": 1, "step": 7, "stepsLost": 0, "saveSeconds": 3.5, "reason": "SavedOnStop"}
        patch = {"status": {"checkpoint": {"latestStep": 7, "saveSeconds": 3.5, "lastStop": saved}}}
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
        told = cluster.wait_for(
            "grpojob",
            job,
            namespace,
            lambda o: "(PreemptedByKueue)" in (condition(o, "Running") or {}).get("message", ""),
            timeout=60,
            what="the preemption named in its Running condition",
        )
        running = condition(told, "Running")
        assert (running["status"], running["reason"]) == ("False", "Queued"), running
        assert told["status"]["phase"] == "Pending"
        assert told["status"]["attempt"] == 1, "a preempted attempt waits for admission again"
        events = [
            e["message"]
            for e in cluster.events(namespace)
            if e["involvedObject"].get("name") == job and e["reason"] == "SavedBeforeStop"
        ]
        assert events == ["saved step 7 before stop (PreemptedByKueue)"]
    finally:
        release(cluster, [namespace, other], cluster_scoped)
        delete_namespace(cluster, other)
