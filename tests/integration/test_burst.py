"""A burst of GRPOJobs with the safety net out of reach: every job gets there on the event path.

The resync is set to an hour, so a job whose work the event path deferred or failed (the in-flight
limit, RayJob-first ordering, the urgency gate, a refused or lost request, a lapse of the leader
Lease under load) and did not queue again would wait that hour. Every job of the burst must get
its RayJob and reach Running well within it, and the operator's own counters must show each
RayJob made by a job's event or the operator's retry of one, never by the resync.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx2
import pytest
from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ApiError
from support.burst import add_nodes, burst_jobs, burst_nodes, create_all, metric_samples, remove_nodes
from support.cluster import Cluster
from support.operator_process import OperatorProcess
from support.resources import GRPOJobResource, RayJobResource

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(1200)]

JOBS = int(os.environ.get("GRPO_BURST_JOBS", "200"))
RESYNC_SECONDS = 3600
RUNNING_WITHIN = float(os.environ.get("GRPO_BURST_TIMEOUT", "480"))
"""Seconds for the whole burst to be Running: generous for a loaded 2-core machine, and far
below the resync period."""


def test_every_job_of_a_burst_runs_without_the_resync(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    client = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="grpo-tests")
    nodes = burst_nodes(JOBS)
    add_nodes(client, nodes)
    operator = OperatorProcess(cluster.kubeconfig, tmp_path / "operator.log", resync_seconds=RESYNC_SECONDS)
    operator.start()
    try:
        manifests = burst_jobs(namespace, JOBS)
        names = [m["metadata"]["name"] for m in manifests]
        started = time.monotonic()
        create_all(client, manifests, workers=16)
        phases: dict[str, str] = {}
        while time.monotonic() - started < RUNNING_WITHIN:
            try:
                phases = {
                    job.metadata.name: ((job.status or {}).get("phase") or "-")
                    for job in client.list(GRPOJobResource, namespace=namespace)
                }
            except (httpx2.HTTPError, ApiError):  # an API server out of CPU answers late: ask again
                time.sleep(3)
                continue
            if all(phases.get(n) == "Running" for n in names):
                break
            time.sleep(3)
        took = time.monotonic() - started
        rayjobs = {r.metadata.name for r in client.list(RayJobResource, namespace=namespace)}
        without = [n for n in names if f"{n}-1" not in rayjobs]
        waiting = sorted(
            (n for n in names if phases.get(n) != "Running"), key=lambda n: int(n.split("-")[-1])
        )
        assert not [*without, *waiting], (
            f"after {took:.0f} s (resync every {RESYNC_SECONDS} s), {len(without)} of {JOBS} jobs had no "
            f"RayJob (e.g. {without[:5]}) and {len(waiting)} were not Running "
            f"(e.g. {[(n, phases.get(n)) for n in waiting[:5]]})\n{operator.tail(20)}"
        )
        created = metric_samples(operator.metrics(), "grpo_rayjobs_created_total")
        by_trigger = {dict(labels)["trigger"]: int(value) for labels, value in created.items()}
        assert sum(by_trigger.values()) == JOBS, by_trigger
        assert set(by_trigger) <= {"job", "rayjob", "retry"}, f"RayJobs created by {by_trigger}"
        print(f"{JOBS} jobs Running {took:.0f} s after the first create; RayJobs created by {by_trigger}")
    finally:
        operator.stop()
        remove_nodes(client, nodes)
