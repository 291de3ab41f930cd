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

The second test holds a namespace that fills with waiting jobs, and counts the LISTs a starting
job costs: while its cluster starts, a check of why its pods do not run lists the attempt's pods
and the namespace's Warning Events (handlers/startup_checks.py). Listed on every pass, that is a
pair per job per period, and each Events list reads the whole namespace; now the Events are listed
at most once per namespace per few seconds, shared by every job in it, and a job whose RayJob has
not moved is checked less and less often.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig
from support.burst import add_nodes, burst_jobs, burst_nodes, create_all, metric_samples, remove_nodes
from support.cluster import Cluster
from support.operator_process import OperatorProcess
from support.rayjobapi import RayJobAPI
from support.resources import GRPOJobResource, RayJobResource

pytestmark = pytest.mark.cluster

JOBS = 5
RESYNC_SECONDS = 2.0
HOLD_PERIODS = 12
HELD_PENDING = (("PENDING", 0),)
"""Ray's view of every job of the burst: submitted, not started, for as long as the test runs."""
GETS_PER_JOB_PER_PERIOD = 2.0
"""The bound: a read of the six other children every few periods fits, a read of the job, its
RayJob and its children on every visit (the code before, about 8 per period) does not."""
SIZES = (4, 16)
"""Jobs waiting in the namespace in the first hold, then in the second (the first ones still there)."""
PODS_LISTS_PER_JOB_PER_PERIOD = 0.5
"""A starting job's pods listed in half the periods at most: a check every period or so (the code
before, one on every resync visit) does not fit; checks spaced out while the RayJob stands still do."""
EVENTS_LISTS_PER_PERIOD = 1.0
"""The namespace's Warning Events listed once a period at most, however many jobs wait in it."""


def test_reads_per_job_stay_flat_while_a_burst_waits_for_its_clusters(
    cluster: Cluster, namespace: str, job_api: RayJobAPI, tmp_path: Path
) -> None:
    cluster.install_crds()
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


@pytest.mark.timeout(900)
def test_startup_checks_per_job_stay_bounded_as_a_namespace_fills_with_waiting_jobs(
    cluster: Cluster, namespace: str, job_api: RayJobAPI, tmp_path: Path
) -> None:
    cluster.install_crds()
    job_api.configure_namespace(namespace, HELD_PENDING)
    client = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="grpo-tests")
    nodes = burst_nodes(max(SIZES))
    add_nodes(client, nodes)
    operator = OperatorProcess(cluster.kubeconfig, tmp_path / "operator.log", resync_seconds=RESYNC_SECONDS)
    operator.start()
    try:
        measured: dict[int, tuple[float, float, float]] = {}
        manifests = burst_jobs(namespace, max(SIZES), stem="waiting")
        made = 0
        for size in SIZES:
            create_all(client, manifests[made:size], workers=size - made)
            made = size
            _wait_until_held(client, namespace, [m["metadata"]["name"] for m in manifests[:size]], operator)
            time.sleep(RESYNC_SECONDS)
            before, started = _requests(operator, "list"), time.monotonic()
            time.sleep(HOLD_PERIODS * RESYNC_SECONDS)
            after, periods = _requests(operator, "list"), (time.monotonic() - started) / RESYNC_SECONDS
            pods = after.get("pods", 0) - before.get("pods", 0)
            events = after.get("events", 0) - before.get("events", 0)
            measured[size] = (pods / size / periods, events / periods, events / size / periods)
            # The checks go on: every waiting job's pods were looked at in the hold, the Events too.
            assert pods >= size, f"{pods:.0f} pods LISTs for {size} waiting jobs in {periods:.1f} periods"
            assert events >= 1, f"no Warning Events LIST for {size} waiting jobs in {periods:.1f} periods"
        phases = {
            j.metadata.name: (j.status or {}).get("phase")
            for j in client.list(GRPOJobResource, namespace=namespace)
        }
        assert set(phases.values()) == {"Pending"}, f"the jobs were not held Pending: {phases}"
        report = "; ".join(
            f"{size} jobs: pods {p:.2f} per job, events {e:.2f} per namespace ({ej:.3f} per job)"
            for size, (p, e, ej) in measured.items()
        )
        print(f"LISTs per period over {HOLD_PERIODS} periods: {report}")
        for size, (per_job, per_namespace, _) in measured.items():
            assert per_job <= PODS_LISTS_PER_JOB_PER_PERIOD, (
                f"{size} waiting jobs: {per_job:.2f} pods LISTs per job per period "
                f"(at most {PODS_LISTS_PER_JOB_PER_PERIOD}): {report}"
            )
            assert per_namespace <= EVENTS_LISTS_PER_PERIOD, (
                f"{size} waiting jobs: {per_namespace:.2f} Warning Events LISTs per period in their "
                f"namespace (at most {EVENTS_LISTS_PER_PERIOD}, whatever the number of jobs): {report}"
            )
    finally:
        operator.stop()
        remove_nodes(client, nodes)


def _gets(operator: OperatorProcess) -> dict[str, float]:
    """The operator's GETs so far by resource, its Lease's left out (one per renewal, not per job)."""
    return {r: v for r, v in _requests(operator, "get").items() if r != "leases"}


def _requests(operator: OperatorProcess, verb: str) -> dict[str, float]:
    """The operator's requests of one verb so far, by resource (every answer code)."""
    out: dict[str, float] = {}
    for labels, value in metric_samples(operator.metrics(), "grpo_api_requests_total").items():
        label = dict(labels)
        if label.get("verb") == verb:
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
