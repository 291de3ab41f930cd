"""Several operator replicas against the real API server: one acts, the others wait, and a
replica that wakes from a pause with a stale view writes nothing.

Each test runs its own two operator processes (distinct identities, a Lease of the test's own,
short lease terms) watching only the test's namespace.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import Cluster
from support.jobs import apply_job, example, owned_children, phase_is
from support.operator_process import OperatorProcess
from support.rayjobapi import RayJobAPI

pytestmark = pytest.mark.cluster
TERMS = {
    "GRPO_LEASE_DURATION_SECONDS": "4",
    "GRPO_LEASE_RENEW_DEADLINE_SECONDS": "3",
    "GRPO_LEASE_RETRY_SECONDS": "0.5",
}


@pytest.fixture
def replicas(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[dict[str, OperatorProcess]]:
    cluster.install_crds()
    processes = {
        name: OperatorProcess(
            cluster.kubeconfig,
            tmp_path / f"operator-{name}.log",
            extra_env={
                **TERMS,
                "GRPO_NAMESPACES": namespace,
                "GRPO_LEASE_NAMESPACE": namespace,
                "GRPO_LEADER_IDENTITY": f"replica-{name}",
            },
        )
        for name in ("a", "b")
    }
    yield processes
    for process in processes.values():
        if process.proc is not None and process.proc.poll() is None:
            process.proc.send_signal(18)  # SIGCONT, in case a test left one stopped
        process.stop()


def holder(cluster: Cluster, namespace: str) -> str | None:
    lease = cluster.get("lease", "grpo-operator", namespace)
    return ((lease or {}).get("spec") or {}).get("holderIdentity")


def wait_holder(cluster: Cluster, namespace: str, identity: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while holder(cluster, namespace) != identity:
        assert time.monotonic() < deadline, (
            f"the Lease is held by {holder(cluster, namespace)}, not {identity}"
        )
        time.sleep(0.2)


def test_one_replica_acts_and_a_standby_takes_over_when_it_dies(
    cluster: Cluster, namespace: str, replicas: dict[str, OperatorProcess]
) -> None:
    a, b = replicas["a"], replicas["b"]
    a.start()
    wait_holder(cluster, namespace, "replica-a")
    b.start()
    job = apply_job(cluster, namespace, example("lora-single-gpu"))
    cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="Running")
    assert holder(cluster, namespace) == "replica-a"
    assert "created Ray job" in a.tail(200)
    assert "created Ray job" not in b.tail(200), "the standby acted"
    a.kill()
    wait_holder(cluster, namespace, "replica-b")
    # The new leader serves new jobs.
    second = example("lora-single-gpu")
    second["metadata"]["name"] = "after-failover"
    apply_job(cluster, namespace, second)
    cluster.wait_for("grpojob", "after-failover", namespace, phase_is("Running"), timeout=120, what="Running")
    assert owned_children(cluster, namespace, job)["rayjobs.ray.io"] == [f"{job}-1"]


def test_a_replica_paused_past_its_lease_writes_nothing_when_it_wakes(
    cluster: Cluster, namespace: str, replicas: dict[str, OperatorProcess], job_api: RayJobAPI
) -> None:
    a, b = replicas["a"], replicas["b"]
    a.start()
    wait_holder(cluster, namespace, "replica-a")
    b.start()
    job = apply_job(cluster, namespace, example("lora-single-gpu", **{"runPolicy.backoffLimit": 2}))
    running = cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="Running")
    assert running["status"]["attempt"] == 1
    assert a.proc is not None
    a.proc.send_signal(19)  # SIGSTOP: A keeps its view of the job at attempt 1
    wait_holder(cluster, namespace, "replica-b")
    # Attempt 1 fails; the new leader starts attempt 2.
    submission = cluster.get("rayjobs.ray.io", f"{job}-1", namespace)["status"]["jobId"]
    job_api.finish(submission, "FAILED", "Job entrypoint command failed with exit code 75.")
    cluster.wait_for(
        "grpojob",
        job,
        namespace,
        lambda o: (o.get("status") or {}).get("attempt") == 2,
        timeout=60,
        what="attempt 2",
    )
    a.proc.send_signal(18)  # SIGCONT: A wakes up with stale state and pending events
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        status = cluster.get("grpojob", job, namespace)["status"]
        assert status["attempt"] == 2, f"a stale replica moved the job back: {status}"
        if a.proc.poll() is not None:
            break
        time.sleep(0.2)
    assert a.proc.poll() == 1, "the stale replica must stop, not carry on"
    assert "lost the lease" in a.tail(100)
    assert holder(cluster, namespace) == "replica-b"
    for _ in range(10):  # and nothing of A's arrives late
        assert cluster.get("grpojob", job, namespace)["status"]["attempt"] == 2
        time.sleep(0.3)
    assert owned_children(cluster, namespace, job)["rayjobs.ray.io"] == [f"{job}-1", f"{job}-2"]
