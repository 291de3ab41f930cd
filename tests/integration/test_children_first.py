"""A status says a RayJob was created only once it exists, on the real API server (issue 58).

Before, a job whose RayJob could not be built (`resources.cpuPerNode: "1e400"` raised
OverflowError in the builder) already read `created Ray job demo-1` with a Normal `Created` Event
and `rayJobName` set, and every later reconcile failed the same way: no RayJob ever existed. Now
the children are built before anything is written; one that cannot be built fails the job
`InvalidSpec` naming the field. No admissible spec is known to break a builder any more (the
schema bounds every quantity), so the build fails here the way an operator's settings can make
it: an accelerator profile whose memory per device is no whole number of bytes at the job's
devices per node, for a job that leaves `memoryPerNode` to that default.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from support.cluster import Cluster
from support.jobs import apply_job, condition, example, phase_is
from support.operator_process import OperatorProcess

pytestmark = pytest.mark.cluster


@pytest.fixture
def unbuildable_operator(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    """The operator, watching this test's namespace alone (leader election off, so no other
    test's operator holds its Lease), with an nvidia profile of 0.3 bytes per device."""
    cluster.install_crds()
    settings = tmp_path / "settings.yaml"
    settings.write_text(yaml.safe_dump({"profiles": {"nvidia": {"memoryPerDevice": "0.3"}}}))
    process = OperatorProcess(
        cluster.kubeconfig,
        tmp_path / "operator.log",
        extra_env={
            "GRPO_OPERATOR_CONFIG": str(settings),
            "GRPO_NAMESPACES": namespace,
            "GRPO_LEADER_ELECTION": "false",
        },
    )
    process.start()
    yield process
    process.stop()


def test_a_job_whose_rayjob_cannot_be_built_fails_invalid_spec_and_claims_nothing(
    cluster: Cluster, namespace: str, unbuildable_operator: OperatorProcess
) -> None:
    body = example("safegrpo-nvidia")  # 4 devices per node, memoryPerNode left to the profile
    assert "memoryPerNode" not in body["spec"]["resources"]
    job = apply_job(cluster, namespace, body)
    failed = cluster.wait_for("grpojob", job, namespace, phase_is("Failed"), timeout=90, what="Failed")
    found = condition(failed, "Failed") or {}
    assert found.get("reason") == "InvalidSpec", failed["status"]
    assert found["message"].startswith("spec.resources.memoryPerNode: must be set"), found["message"]
    assert "0.3 × 4 is not a whole number of bytes" in found["message"]
    assert "rayJobName" not in failed["status"]
    assert cluster.get("rayjob", f"{job}-1", namespace) is None
    events = [e for e in cluster.events(namespace) if e["involvedObject"].get("name") == job]
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", "InvalidSpec")], events
    assert "created Ray job" not in unbuildable_operator.tail(400)
