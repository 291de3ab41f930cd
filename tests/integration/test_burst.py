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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ApiError
from support.burst import add_nodes, burst_jobs, burst_nodes, create_all, metric_samples, remove_nodes
from support.cluster import Cluster
from support.operator_process import OperatorProcess
from support.resources import GRPOJobResource, RayJobResource

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(2100)]

JOBS = int(os.environ.get("GRPO_BURST_JOBS", "200"))
RESYNC_SECONDS = 3600
RAYJOBS_WITHIN = float(os.environ.get("GRPO_BURST_RAYJOBS_WITHIN", "300"))
"""Seconds for every job of the burst to have its RayJob: the operator's part, far below the resync."""
RUNNING_WITHIN = float(os.environ.get("GRPO_BURST_RUNNING_WITHIN", "1500"))
"""Seconds for the whole burst to be Running: KubeRay's part too, which on a loaded 2-core machine
brings up a few hundred Ray clusters an hour at worst (docs/benchmarks/operator.md)."""


def test_every_job_of_a_burst_runs_without_the_resync(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    client = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="grpo-tests")
    nodes = burst_nodes(JOBS)
    add_nodes(client, nodes)
    operator = OperatorProcess(cluster.kubeconfig, tmp_path / "operator.log", resync_seconds=RESYNC_SECONDS)
    operator.start()
    operator.wait_leading()
    try:
        manifests = burst_jobs(namespace, JOBS)
        names = [m["metadata"]["name"] for m in manifests]
        started = time.monotonic()
        create_all(client, manifests, workers=16)
        rayjobs = _wait(client, RayJobResource, namespace, started, RAYJOBS_WITHIN, lambda _: True)
        without = [n for n in names if f"{n}-1" not in rayjobs]
        assert not without, (
            f"{time.monotonic() - started:.0f} s after the burst (resync every {RESYNC_SECONDS} s), "
            f"{len(without)} of {JOBS} jobs had no RayJob (e.g. {without[:5]})\n{operator.tail(20)}"
        )
        phases = _wait(client, GRPOJobResource, namespace, started, RUNNING_WITHIN, _running)
        waiting = sorted(
            (n for n in names if phases.get(n) != "Running"), key=lambda n: int(n.split("-")[-1])
        )
        assert not waiting, (
            f"{time.monotonic() - started:.0f} s after the burst, {len(waiting)} of {JOBS} jobs were not "
            f"Running (e.g. {[(n, phases.get(n)) for n in waiting[:5]]})\n{operator.tail(20)}"
        )
        created = metric_samples(operator.metrics(), "grpo_rayjobs_created_total")
        by_trigger = {dict(labels)["trigger"]: int(value) for labels, value in created.items()}
        if sum(by_trigger.values()) != JOBS:  # which jobs made more than one, and what they say
            extra = sorted(r.metadata.name for r in client.list(RayJobResource, namespace=namespace))
            extra = [r for r in extra if not r.endswith("-1")]
            attempts = {
                j.metadata.name: ((j.status or {}).get("attempt"), (j.status or {}).get("failedAttempts"))
                for j in client.list(GRPOJobResource, namespace=namespace)
                if int((j.status or {}).get("attempt") or 1) > 1
            }
            raise AssertionError(
                f"RayJobs created {by_trigger} for {JOBS} jobs; RayJobs of later attempts {extra}; "
                f"jobs past attempt 1 {attempts}\n{operator.tail(40)}"
            )
        assert set(by_trigger) <= {"job", "rayjob", "retry"}, f"RayJobs created by {by_trigger}"
        took = time.monotonic() - started
        print(f"{JOBS} jobs Running {took:.0f} s after the first create; RayJobs created by {by_trigger}")
    finally:
        operator.stop()
        remove_nodes(client, nodes)


def _running(job: Any) -> bool:
    return ((job.status or {}).get("phase") or "-") == "Running"


def _wait(
    client: Client, resource: Any, namespace: str, started: float, within: float, done: Callable[[Any], bool]
) -> dict[str, str]:
    """Poll the namespace's objects until `done` holds for `JOBS` of them or `within` seconds have
    passed since `started`; their names with their phase."""
    seen: dict[str, str] = {}
    while time.monotonic() - started < within:
        try:
            items = list(client.list(resource, namespace=namespace))
        except (httpx2.HTTPError, ApiError):  # an API server out of CPU answers late: ask again
            time.sleep(3)
            continue
        seen = {item.metadata.name: ((item.status or {}).get("phase") or "-") for item in items if done(item)}
        if len(seen) >= JOBS:
            break
        time.sleep(3)
    return seen
