"""Kueue's contract: every attempt's RayJob is handed to Kueue suspended, with the job's queue and
WorkloadPriorityClass labels, and the job waits until Kueue unsuspends it; a retry is handed over
the same way. The test plays Kueue's part (it unsuspends the RayJob).

A test with a real Kueue controller (hack/addons/build-kueue.sh, tests/support/kueue.py) passed on
its own branch and failed on the merged tree where a waiting job should be admitted after the first
job's attempt failed; it comes back once that is understood.
"""

from __future__ import annotations

import time

from support.cluster import Cluster
from support.jobs import apply_job, example, phase_is
from support.operator_process import OperatorProcess
from support.rayjobapi import RUNNING_FOREVER, RayJobAPI

# One geo3k-ascend-910b job: a 4-CPU head and one worker of 52 CPUs and 8 NPUs, 528 GiB in all.
ONE_JOB = {"cpu": "60", "memory": "600Gi", "huawei.com/Ascend910": "8"}
PRIORITY = 1000


def test_every_attempt_is_handed_to_kueue_suspended_with_its_queue_and_priority(
    cluster: Cluster, namespace: str, operator: OperatorProcess, job_api: RayJobAPI
) -> None:
    """The API contract with Kueue, without Kueue: each attempt's RayJob is created suspended and
    labelled with the queue and the WorkloadPriorityClass, the job waits (Pending, then Restarting
    for a retry), and the operator leaves `suspend` to whoever admits it. The test unsuspends each RayJob as Kueue does
    on admission, and fails attempt 1 to see attempt 2 handed over the same way. It comes first in
    this module: once the `kueue` fixture runs, Kueue would manage these RayJobs too."""
    job_api.configure_namespace(namespace, RUNNING_FOREVER)
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
