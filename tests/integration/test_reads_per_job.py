"""What the safety net reads per job while a burst waits for its Ray clusters, on the real API
server: it must not grow with how long the burst waits.

A small burst is held Pending (the fake Ray job API answers PENDING for as long as the test
runs, so every RayJob sits with its cluster up and its Ray job not started) for several resync
periods of a short resync. The operator's own request counters (`grpo_api_requests_total`, by
verb and resource) are read when every job is Pending with its RayJob, and again after the
hold: the GETs per job per period in between are the resync's price for a quiet job. Reading
the job and its RayJob again on every visit, and the six other children every period, costs
several per period; the watches already deliver the first two, and the children need a read
only every few periods.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig
from support.burst import burst_jobs, create_all, metric_samples
from support.cluster import Cluster
from support.operator_process import OperatorProcess
from support.rayjobapi import RayJobAPI
from support.resources import GRPOJobResource, RayJobResource

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
JOBS = 5
RESYNC_SECONDS = 2.0
HOLD_PERIODS = 12
HELD_PENDING = (("PENDING", 0),)
"""Ray's view of every job of the burst: submitted, not started, for as long as the test runs."""
GETS_PER_JOB_PER_PERIOD = 2.0
"""The bound: a read of the six other children every few periods fits, a read of the job, its
RayJob and its children on every visit (the code before, about 8 per period) does not."""


def test_reads_per_job_stay_flat_while_a_burst_waits_for_its_clusters(
    cluster: Cluster, namespace: str, job_api: RayJobAPI, tmp_path: Path
) -> None:
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    job_api.configure_namespace(namespace, HELD_PENDING)
    client = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="grpo-tests")
    operator = OperatorProcess(cluster.kubeconfig, tmp_path / "operator.log", resync_seconds=RESYNC_SECONDS)
    operator.start()
    try:
        manifests = burst_jobs(namespace, JOBS, stem="held")
        names = [m["metadata"]["name"] for m in manifests]
        create_all(client, manifests, workers=JOBS)
        _wait_until_held(client, namespace, names, operator)
        # One period more: what the burst's own start still had in flight is over.
        time.sleep(RESYNC_SECONDS)
        before, started = _gets(operator), time.monotonic()
        time.sleep(HOLD_PERIODS * RESYNC_SECONDS)
        after, periods = _gets(operator), (time.monotonic() - started) / RESYNC_SECONDS
        phases = {
            j.metadata.name: (j.status or {}).get("phase")
            for j in client.list(GRPOJobResource, namespace=namespace)
        }
        assert set(phases.values()) == {"Pending"}, f"the burst was not held Pending: {phases}"
        per_resource = {
            resource: round((after.get(resource, 0) - before.get(resource, 0)) / JOBS / periods, 2)
            for resource in sorted(after)
            if after.get(resource, 0) > before.get(resource, 0)
        }
        per_period = sum(per_resource.values())
        print(f"GETs per job per period over {periods:.1f} periods: {per_period:.2f} {per_resource}")
        assert per_period <= GETS_PER_JOB_PER_PERIOD, (
            f"{per_period:.2f} GETs per job per period while the burst waited {periods:.1f} resync periods "
            f"(at most {GETS_PER_JOB_PER_PERIOD}): {per_resource}"
        )
        # And every job was still visited: the safety net did not simply stop.
        visits = metric_samples(operator.metrics(), "grpo_handler_duration_seconds_count")
        resync = sum(v for labels, v in visits.items() if dict(labels).get("handler") == "resync")
        assert resync >= JOBS, f"only {resync:.0f} resync visits to {JOBS} quiet jobs: {visits}"
    finally:
        operator.stop()


def _gets(operator: OperatorProcess) -> dict[str, float]:
    """The operator's GETs so far by resource, its Lease's left out (one per renewal, not per job)."""
    out: dict[str, float] = {}
    for labels, value in metric_samples(operator.metrics(), "grpo_api_requests_total").items():
        label = dict(labels)
        if label.get("verb") == "get" and label.get("resource") != "leases":
            out[label["resource"]] = out.get(label["resource"], 0) + value
    return out


def _wait_until_held(client: Client, namespace: str, names: list[str], operator: OperatorProcess) -> None:
    """Until every job is Pending with its RayJob and Ray reports that job PENDING."""
    deadline = time.monotonic() + 180
    while True:
        jobs = {j.metadata.name: j.status for j in client.list(GRPOJobResource, namespace=namespace)}
        rayjobs = {r.metadata.name: r.status for r in client.list(RayJobResource, namespace=namespace)}
        waiting = [n for n in names if not _held(jobs.get(n), rayjobs.get(f"{n}-1"))]
        if not waiting:
            return
        assert time.monotonic() < deadline, f"not held Pending in 180 s: {waiting}\n{operator.tail(20)}"
        time.sleep(1)


def _held(job: dict[str, Any] | None, rayjob: dict[str, Any] | None) -> bool:
    """A job's status and its RayJob's: Pending, with Ray reporting the job PENDING."""
    return (job or {}).get("phase") == "Pending" and (rayjob or {}).get("jobStatus") == "PENDING"
