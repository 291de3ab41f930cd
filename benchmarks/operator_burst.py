"""Burst benchmark: N GRPOJobs created at once against the local cluster.

Measures, for the operator:
  - create -> RayJob created: from the client's create call to the RayJob's ADDED watch event;
  - RayJob status -> GRPOJob status: from the watch event in which a RayJob's jobStatus turns
    RUNNING to the one in which its GRPOJob's phase turns Running;
  - the operator's peak resident memory (VmHWM).
And the floor: the same number of RayJobs created directly by a client (create -> ADDED).

It adds fake NVIDIA nodes for the burst (so every job can really run) and removes them after.
Needs a running local cluster (make cluster-up). Not a test: run it by hand, e.g.

    .venv/bin/python benchmarks/operator_burst.py --jobs 200
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from lightkube import Client, codecs
from lightkube.resources.core_v1 import Namespace, Node

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from grpo_operator.api.v1alpha1 import GRPOJob  # noqa: E402
from grpo_operator.build.rayjob import build_rayjob  # noqa: E402
from grpo_operator.config import load_settings  # noqa: E402
from grpo_operator.k8s import GRPOJobResource, RayJobResource  # noqa: E402
from integration.operator_process import OperatorProcess  # noqa: E402

BENCH_LABEL = "grpo.dev/bench"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_s": round(percentile(values, 0.50), 3),
        "p99_s": round(percentile(values, 0.99), 3),
        "max_s": round(max(values), 3),
        "mean_s": round(statistics.fmean(values), 3),
    }


def bench_nodes(count: int) -> list[dict[str, Any]]:
    template = next(d for d in yaml.safe_load_all((REPO / "hack/cluster/node-pools.yaml").read_text()) if d)
    nodes = []
    for i in range(count):
        node = copy.deepcopy(template)
        name = f"kwok-bench-{i}"
        node["metadata"]["name"] = name
        node["metadata"]["labels"].update({"kubernetes.io/hostname": name, BENCH_LABEL: "true"})
        for key in ("allocatable", "capacity"):
            node["status"][key]["cpu"] = "128"
        nodes.append(node)
    return nodes


class Watcher(threading.Thread):
    """Records when each object was first seen and when a predicate first held, by name."""

    def __init__(self, client: Client, resource: Any, namespace: str, predicate: Any) -> None:
        super().__init__(daemon=True)
        self.client, self.resource, self.namespace, self.predicate = client, resource, namespace, predicate
        self.added: dict[str, float] = {}
        self.reached: dict[str, float] = {}
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            try:
                for _, obj in self.client.watch(self.resource, namespace=self.namespace):
                    now = time.monotonic()
                    body = obj.to_dict()
                    name = body["metadata"]["name"]
                    self.added.setdefault(name, now)
                    if name not in self.reached and self.predicate(body):
                        self.reached[name] = now
                    if self.stop:
                        return
            except Exception:  # a dropped watch is re-opened; timestamps already taken stay
                time.sleep(0.2)


def create_all(client: Client, manifests: list[dict[str, Any]], workers: int) -> dict[str, float]:
    started: dict[str, float] = {}

    def create(manifest: dict[str, Any]) -> None:
        started[manifest["metadata"]["name"]] = time.monotonic()
        client.create(codecs.from_dict(manifest))

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(create, manifests))
    return started


def wait_all(watcher: Watcher, names: list[str], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(n in watcher.reached for n in names):
            return
        time.sleep(0.5)
    missing = [n for n in names if n not in watcher.reached]
    raise SystemExit(
        f"{len(missing)} of {len(names)} did not reach {what} in {timeout} s (e.g. {missing[:3]})"
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_operator_burst(
    client: Client, kubeconfig: Path, jobs: int, workers: int, timeout: float
) -> dict[str, Any]:
    namespace = f"bench-op-{int(time.time())}"
    client.create(Namespace(metadata={"name": namespace}))
    template = yaml.safe_load((REPO / "examples/lora-single-gpu.yaml").read_text())
    manifests = []
    for i in range(jobs):
        body = copy.deepcopy(template)
        body["metadata"] = {"name": f"burst-{i}", "namespace": namespace}
        body["spec"]["dataset"] = {"preset": "geo3k", "maxPromptLength": 1024, "maxResponseLength": 1024}
        manifests.append(body)
    operator = OperatorProcess(kubeconfig, Path(f"/tmp/{namespace}-operator.log"), resync_seconds=60)
    operator.start()
    rayjobs = Watcher(
        client, RayJobResource, namespace, lambda b: (b.get("status") or {}).get("jobStatus") == "RUNNING"
    )
    grpojobs = Watcher(
        client, GRPOJobResource, namespace, lambda b: (b.get("status") or {}).get("phase") == "Running"
    )
    rayjobs.start()
    grpojobs.start()
    time.sleep(1)
    cpu_before = cpu_seconds(operator.proc.pid)  # type: ignore[union-attr]
    started = create_all(client, manifests, workers)
    names = [m["metadata"]["name"] for m in manifests]
    wait_all(grpojobs, names, timeout, "phase Running")
    create_to_rayjob = [rayjobs.added[f"{n}-1"] - started[n] for n in names]
    status_lag = [grpojobs.reached[n] - rayjobs.reached[f"{n}-1"] for n in names]
    peak = peak_rss_mib(operator.proc.pid)  # type: ignore[union-attr]
    cpu = cpu_seconds(operator.proc.pid) - cpu_before  # type: ignore[union-attr]
    rayjobs.stop = grpojobs.stop = True
    operator.stop()
    client.delete(Namespace, namespace)
    return {
        "namespace": namespace,
        "create_to_rayjob": summary(create_to_rayjob),
        "rayjob_status_to_grpojob_status": summary(status_lag),
        "operator_peak_rss_mib": round(peak, 1),
        "operator_cpu_seconds": round(cpu, 1),
        "burst_seconds": round(max(grpojobs.reached.values()) - min(started.values()), 1),
    }


def run_floor(client: Client, jobs: int, workers: int, timeout: float) -> dict[str, Any]:
    """RayJobs created directly: what create -> RayJob costs with no operator in between.

    They are real RayJobs, so KubeRay loads the cluster as much as during the operator run.
    """
    namespace = f"bench-floor-{int(time.time())}"
    client.create(Namespace(metadata={"name": namespace}))
    settings = load_settings(environ={})
    template = yaml.safe_load((REPO / "examples/lora-single-gpu.yaml").read_text())
    manifests = []
    for i in range(jobs):
        body = copy.deepcopy(template)
        body["metadata"] = {"name": f"floor-{i}", "namespace": namespace, "uid": f"0000-{i}"}
        rayjob = build_rayjob(GRPOJob.model_validate(body), settings, attempt=1)
        rayjob["metadata"].pop("ownerReferences")
        manifests.append(rayjob)
    watcher = Watcher(client, RayJobResource, namespace, lambda b: True)
    watcher.start()
    time.sleep(1)
    started = create_all(client, manifests, workers)
    wait_all(watcher, [m["metadata"]["name"] for m in manifests], timeout, "created")
    latencies = [watcher.added[m["metadata"]["name"]] - started[m["metadata"]["name"]] for m in manifests]
    watcher.stop = True
    client.delete(Namespace, namespace)
    return {"namespace": namespace, "create_to_rayjob": summary(latencies)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=16, help="client threads creating objects")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=Path(os.environ.get("KUBECONFIG", REPO / ".cache/cluster/kubeconfig")),
    )
    parser.add_argument("--out", type=Path, help="write the JSON result here too")
    args = parser.parse_args()
    os.environ["KUBECONFIG"] = str(args.kubeconfig)
    client = Client()
    nodes = bench_nodes((args.jobs + 7) // 8)
    for node in nodes:
        client.apply(codecs.from_dict(node), field_manager="grpo-bench", force=True)
    try:
        result = {
            "jobs": args.jobs,
            "machine": f"{os.cpu_count()} CPUs, {round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB",
            "operator": run_operator_burst(client, args.kubeconfig, args.jobs, args.workers, args.timeout),
            "floor_direct_rayjobs": run_floor(client, args.jobs, args.workers, args.timeout),
        }
    finally:
        for node in nodes:
            client.delete(Node, node["metadata"]["name"])
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
