"""A burst of GRPOJobs on the local cluster: the nodes it needs and the jobs, created at once.

Shared by the burst test (tests/integration/test_burst.py) and the burst benchmark
(benchmarks/operator_burst.py), so that both measure the same thing.
"""

from __future__ import annotations

import copy
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2
import yaml
from lightkube import Client, codecs
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node

REPO = Path(__file__).resolve().parents[2]
BURST_LABEL = "grpo.dev/bench"
JOBS_PER_NODE = 8
"""Single-GPU jobs per 8-GPU node."""
CREATE_ATTEMPTS = 3
"""Tries of one create whose answer timed out (a loaded 2-core machine's API server can take longer
than lightkube's timeout)."""


def burst_nodes(jobs: int) -> list[dict[str, Any]]:
    """Fake 8-GPU nodes (KWOK) with room for `jobs` single-GPU jobs, heads included."""
    template = next(d for d in yaml.safe_load_all((REPO / "hack/cluster/node-pools.yaml").read_text()) if d)
    nodes = []
    for i in range((jobs + JOBS_PER_NODE - 1) // JOBS_PER_NODE):
        node = copy.deepcopy(template)
        name = f"kwok-bench-{i}"
        node["metadata"]["name"] = name
        node["metadata"]["labels"].update({"kubernetes.io/hostname": name, BURST_LABEL: "true"})
        for key in ("allocatable", "capacity"):
            node["status"][key]["cpu"] = "128"
        nodes.append(node)
    return nodes


def add_nodes(client: Client, nodes: list[dict[str, Any]], timeout: float = 120) -> None:
    """Create the nodes and block until every one is Ready: KWOK's and the controller manager's
    writes that bring a new node up must not land inside the burst."""
    for node in nodes:
        client.apply(codecs.from_dict(node), field_manager="grpo-bench", force=True)
    names = {node["metadata"]["name"] for node in nodes}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = {
            node.metadata.name
            for node in client.list(Node, labels={BURST_LABEL: "true"})
            if any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))
        }
        if ready >= names:
            return
        time.sleep(0.5)
    raise RuntimeError(f"the burst's nodes were not Ready within {timeout:.0f} s")


def remove_nodes(client: Client, nodes: list[dict[str, Any]]) -> None:
    for node in nodes:
        client.delete(Node, node["metadata"]["name"])


def burst_jobs(namespace: str, jobs: int, stem: str = "burst") -> list[dict[str, Any]]:
    """`jobs` copies of the single-GPU example with a preset dataset (no source claims to make)."""
    template = yaml.safe_load((REPO / "examples/lora-single-gpu.yaml").read_text())
    manifests = []
    for i in range(jobs):
        body = copy.deepcopy(template)
        body["metadata"] = {"name": f"{stem}-{i}", "namespace": namespace}
        body["spec"]["dataset"] = {"preset": "geo3k", "maxPromptLength": 1024, "maxResponseLength": 1024}
        manifests.append(body)
    return manifests


def create_all(
    client: Client, manifests: list[dict[str, Any]], workers: int, done: dict[str, float] | None = None
) -> dict[str, float]:
    """Create everything from `workers` threads; when each create was sent (and, into `done`,
    when its response came back), on the monotonic clock."""
    started: dict[str, float] = {}

    def create(manifest: dict[str, Any]) -> None:
        name = manifest["metadata"]["name"]
        started[name] = time.monotonic()
        for attempt in range(1, CREATE_ATTEMPTS + 1):
            try:
                client.create(codecs.from_dict(manifest))
                break
            except httpx2.TimeoutException:
                # An API server out of CPU answers late; the create may have gone through.
                if attempt == CREATE_ATTEMPTS:
                    raise
            except ApiError as error:
                if error.status.code != 409 or attempt == 1:
                    raise
                break  # the create that timed out had gone through
        if done is not None:
            done[name] = time.monotonic()

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(create, manifests))
    return started


def metric_samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of one metric in a Prometheus text exposition, by their labels."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[tuple[tuple[str, str], ...], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out[tuple(sorted(sample.labels.items()))] = sample.value
    return out
