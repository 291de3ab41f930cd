"""A GRPOJob followed the way a user follows it: `kubectl apply -f`, `get`, `wait`, `delete`.

What Ray "does" comes from the fake Ray job API (tests/support/rayjobapi.py), told per Ray job
id what status to report, so every phase lasts until the test moves it on.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from support.cluster import Cluster
from support.jobs import CHILD_KINDS as JOB_CHILD_KINDS
from support.jobs import EXAMPLES, condition, create_inputs, example

# `kubectl get grpojobs -o wide`: the CRD's printer columns, the wide-only ones last.
COLUMNS = [
    "NAME",
    "PHASE",
    "STEP",
    "REWARD",
    "VAL",
    "ATTEMPT",
    "AGE",
    "%",
    "ETA",
    "HEALTHY",
    "ACCELERATOR",
    "RAYJOB",
]
# What the operator creates for a running attempt.
CHILD_KINDS = set(JOB_CHILD_KINDS)


def apply_example(cluster: Cluster, namespace: str, name: str) -> str:
    """`kubectl apply -f examples/<name>.yaml` after creating the claims and Secrets it reads; its job's name."""
    body = example(name)
    create_inputs(cluster, namespace, body)
    cluster.kubectl("apply", "--namespace", namespace, "-f", str(EXAMPLES[name]))
    return str(body["metadata"]["name"])


def wait_condition(
    cluster: Cluster, namespace: str, job: str, ctype: str, status: str = "True", timeout: int = 120
) -> dict[str, Any]:
    """`kubectl wait --for=condition=<type>=<status>`; the job as it is then."""
    result = cluster.kubectl(
        "wait",
        f"--for=condition={ctype}={status}",
        f"grpojob/{job}",
        "--namespace",
        namespace,
        f"--timeout={timeout}s",
        check=False,
        timeout=timeout + 15,
    )
    obj = cluster.get("grpojob", job, namespace)
    assert result.returncode == 0, (
        f"kubectl wait --for=condition={ctype}={status} grpojob/{job}: {result.stderr.strip()}\n"
        f"status: {json.dumps((obj or {}).get('status'), indent=1)}"
    )
    assert obj is not None
    return obj


def condition_status(obj: dict[str, Any], ctype: str) -> str:
    """The status ("True"/"False") of one of the object's conditions, which must exist."""
    found = condition(obj, ctype)
    assert found is not None, f"no {ctype} condition in {obj.get('status')}"
    return str(found["status"])


def grpojob_rows(cluster: Cluster, namespace: str) -> dict[str, dict[str, str]]:
    """`kubectl get grpojobs -o wide` as {name: {column: cell}}, after checking its columns."""
    lines = cluster.kubectl("get", "grpojobs", "--namespace", namespace, "-o", "wide").stdout.splitlines()
    header = lines[0].split()
    assert header == COLUMNS, f"kubectl get grpojobs -o wide shows {header}"
    # Columns are left-aligned under their titles; an empty cell is blank.
    starts = [m.start() for m in re.finditer(r"\S+", lines[0])]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    rows = [
        {title: line[a:b].strip() for title, (a, b) in zip(header, bounds, strict=True)} for line in lines[1:]
    ]
    return {row["NAME"]: row for row in rows}


def row_of(cluster: Cluster, namespace: str, job: str) -> dict[str, str]:
    rows = grpojob_rows(cluster, namespace)
    assert job in rows, f"kubectl get grpojobs does not list {job}: {sorted(rows)}"
    return rows[job]


def ray_job_id(cluster: Cluster, namespace: str, rayjob: str, timeout: float = 90) -> str:
    """The Ray job id KubeRay submits the attempt's entrypoint under."""
    obj = cluster.wait_for(
        "rayjobs.ray.io",
        rayjob,
        namespace,
        lambda o: bool((o.get("status") or {}).get("jobId")),
        timeout=timeout,
        what="a Ray job id",
    )
    return str(obj["status"]["jobId"])


def writers(cluster: Cluster, resource: str, name: str, namespace: str) -> set[str]:
    """Field managers that created or server-side applied this object (the operator creates a child
    first, so that it never takes over one it did not make, and applies to it afterwards)."""
    obj = json.loads(
        cluster.kubectl(
            "get", resource, name, "--namespace", namespace, "-o", "json", "--show-managed-fields"
        ).stdout
    )
    return {
        m["manager"]
        for m in obj["metadata"].get("managedFields", [])
        if m.get("operation") in ("Apply", "Update")
    }


def event_reasons(cluster: Cluster, namespace: str, job: str) -> dict[str, str]:
    """Reason -> type of the events posted on the GRPOJob."""
    return {
        e["reason"]: e["type"]
        for e in cluster.events(namespace)
        if e["involvedObject"].get("kind") == "GRPOJob" and e["involvedObject"].get("name") == job
    }


def eventually(check: Callable[[], bool], *, timeout: float, what: Callable[[], str]) -> None:
    """Poll ``check`` until it holds; fail with ``what()`` (the state then) after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached in {timeout} s: {what()}")
        time.sleep(1)
