"""An upgrade that tightens the CRD, on the real API server and KubeRay: a running job whose stored
spec the new rules refuse (written under the release before, which had no minimum length for
`spec.image`) fails at once naming the field, its attempt's RayJob is deleted, one Event says so,
and a restarted operator leaves the finished job be. The API server keeps such an object as it is:
it checks a schema on writes, not on reads, and ratchets an unchanged invalid field through a
status write.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from grpo_operator.api.crdgen import CRD_FILENAME
from support.cluster import Cluster
from support.jobs import apply_job, condition, example, phase_is
from support.operator_process import OperatorProcess

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
CRD = REPO / "crds" / CRD_FILENAME
MESSAGE = "spec.image: must have at least 1 character, found 0"


def _crd() -> dict[str, Any]:
    """This release's CRD, as installed."""
    return yaml.safe_load(CRD.read_text())


def _image_schema(crd: dict[str, Any]) -> dict[str, Any]:
    [version] = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["image"]


def _until(what: str, check: Callable[[], bool], timeout: float = 30) -> None:
    """The API server serves a changed schema shortly after the CRD says Established: poll."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} not within {timeout} s"
        time.sleep(0.5)


def _warnings(cluster: Cluster, namespace: str, job: str) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.events(namespace)
        if e["involvedObject"].get("name") == job and e["reason"] == "InvalidSpec" and e["type"] == "Warning"
    ]


@pytest.fixture
def crd_restored(cluster: Cluster) -> Iterator[None]:
    """Whatever the test leaves, the next module finds this release's CRD."""
    yield
    cluster.install_crds()


def test_a_running_job_the_upgraded_crd_refuses_fails_naming_the_field_and_stays_failed(
    cluster: Cluster, namespace: str, operator: OperatorProcess, crd_restored: None
) -> None:
    job = apply_job(cluster, namespace, example("lora-single-gpu"))
    cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="Running")
    assert cluster.get("rayjobs.ray.io", f"{job}-1", namespace) is not None

    # The release before: the operator is down for the upgrade, and the old CRD takes an empty image.
    operator.kill()
    before = _crd()
    _image_schema(before).pop("minLength")
    cluster.install_crds(before)

    def patched() -> bool:
        args = ("patch", "grpojob", job, "-n", namespace, "--type=merge", "-p", '{"spec":{"image":""}}')
        return cluster.kubectl(*args, check=False).returncode == 0

    _until("the release-before CRD taking an empty image", patched)

    # This release's CRD: new writes of an empty image are refused, the stored job keeps its own.
    cluster.install_crds()
    refused = example("lora-single-gpu")
    refused["metadata"]["name"] = f"{job}-probe"
    refused["spec"]["image"] = ""

    def rule_in_place() -> bool:
        args = ("create", "--dry-run=server", "-n", namespace, "-f", "-")
        result = cluster.kubectl(*args, input=json.dumps(refused), check=False)
        return result.returncode != 0 and "spec.image" in result.stderr

    _until("this release's CRD refusing an empty image", rule_in_place)
    stored = cluster.get("grpojob", job, namespace)
    assert stored["spec"]["image"] == ""
    assert stored["status"]["phase"] == "Running"

    operator.start()
    failed = cluster.wait_for("grpojob", job, namespace, phase_is("Failed"), timeout=60, what="Failed")
    cond = condition(failed, "Failed")
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", "InvalidSpec", MESSAGE)
    assert failed["status"]["observedGeneration"] == failed["metadata"]["generation"]
    assert failed["status"].get("completionTime")
    cluster.wait_gone("rayjobs.ray.io", f"{job}-1", namespace, timeout=60)
    [event] = _warnings(cluster, namespace, job)
    assert event["message"] == MESSAGE

    # A restarted operator finds it finished: nothing written, no new attempt, no second Event.
    operator.stop()
    operator.start()
    operator.wait_leading()
    time.sleep(10)  # three resyncs of the test operator
    again = cluster.get("grpojob", job, namespace)
    assert again["metadata"]["resourceVersion"] == failed["metadata"]["resourceVersion"]
    assert cluster.get("rayjobs.ray.io", f"{job}-2", namespace) is None
    assert len(_warnings(cluster, namespace, job)) == 1

    cluster.kubectl("delete", "grpojob", job, "-n", namespace, "--wait=true", timeout=90)
    assert cluster.get("grpojob", job, namespace) is None
