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
import multiprocessing
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
from grpo_operator.children.rayjob import build_rayjob  # noqa: E402
from grpo_operator.config import load_settings  # noqa: E402
from support.operator_process import OperatorProcess  # noqa: E402
from support.resources import GRPOJobResource, RayJobResource  # noqa: E402

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


def wait_until_ready(client: Client, names: list[str], timeout: float = 120) -> None:
    """Block until every node is Ready: KWOK's and the controller manager's writes that bring a new
    node up must not land inside the burst being measured."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = {
            node.metadata.name
            for node in client.list(Node, labels={BENCH_LABEL: "true"})
            if any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))
        }
        if ready >= set(names):
            return
        time.sleep(0.5)
    raise SystemExit(f"the benchmark's nodes were not Ready within {timeout:.0f} s")


def rayjob_running(body: dict[str, Any]) -> bool:
    return (body.get("status") or {}).get("jobStatus") == "RUNNING"


def grpojob_running(body: dict[str, Any]) -> bool:
    return (body.get("status") or {}).get("phase") == "Running"


def exists(body: dict[str, Any]) -> bool:
    return True


RESOURCES = {"rayjobs": RayJobResource, "grpojobs": GRPOJobResource}


def _watch(resource: str, namespace: str, names: list[str], predicate: Any, timeout: float, out: Any) -> None:
    """Watcher process body: timestamps per object until every name reached the predicate."""
    client = Client()
    added: dict[str, float] = {}
    reached: dict[str, float] = {}
    has_status: dict[str, float] = {}
    wanted = set(names)
    deadline = time.monotonic() + timeout
    while not wanted <= reached.keys() and time.monotonic() < deadline:
        try:
            for _, obj in client.watch(RESOURCES[resource], namespace=namespace):
                now = time.monotonic()
                body = obj.to_dict()
                name = body["metadata"]["name"]
                added.setdefault(name, now)
                if body.get("status"):
                    has_status.setdefault(name, now)
                if name not in reached and predicate(body):
                    reached[name] = now
                if wanted <= reached.keys() or now > deadline:
                    break
        except Exception:  # a dropped watch is re-opened; timestamps already taken stay
            time.sleep(0.2)
    out.put({"added": added, "reached": reached, "has_status": has_status})


class Watcher:
    """Records when each object was first seen, first had a status, and first met a predicate.

    It runs in a process of its own (CLOCK_MONOTONIC is shared by all processes): in the process
    whose 16 threads create the objects, a watcher thread waits for the GIL, and its timestamps
    would include that wait.
    """

    def __init__(
        self, resource: str, namespace: str, names: list[str], predicate: Any, timeout: float
    ) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._queue = ctx.Queue()
        self._proc = ctx.Process(
            target=_watch, args=(resource, namespace, names, predicate, timeout, self._queue), daemon=True
        )
        self.names, self.what, self.timeout = names, predicate.__name__, timeout
        self.added: dict[str, float] = {}
        self.reached: dict[str, float] = {}
        self.has_status: dict[str, float] = {}

    def start(self) -> None:
        self._proc.start()

    def wait(self) -> None:
        """Block until the watcher is done; exit when some objects never reached the predicate."""
        result = self._queue.get(timeout=self.timeout + 60)
        self._proc.join(10)
        self.added, self.reached, self.has_status = result["added"], result["reached"], result["has_status"]
        missing = [n for n in self.names if n not in self.reached]
        if missing:
            raise SystemExit(
                f"{len(missing)} of {len(self.names)} did not reach {self.what} in {self.timeout} s"
                f" (e.g. {missing[:3]})"
            )


def create_all(
    client: Client, manifests: list[dict[str, Any]], workers: int, done: dict[str, float] | None = None
) -> dict[str, float]:
    """Create everything from `workers` threads; when each create was sent (and, into `done`,
    when its response came back)."""
    started: dict[str, float] = {}

    def create(manifest: dict[str, Any]) -> None:
        name = manifest["metadata"]["name"]
        started[name] = time.monotonic()
        client.create(codecs.from_dict(manifest))
        if done is not None:
            done[name] = time.monotonic()

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(create, manifests))
    return started


def process_cpu(pid: int) -> tuple[str, float]:
    """A process's command and its user + system CPU seconds so far, from /proc/<pid>/stat."""
    head, rest = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)
    fields = rest.split()
    return head.split("(", 1)[1], (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    return process_cpu(pid)[1]


def cpu_by_process(named: dict[int, str]) -> dict[int, tuple[str, float]]:
    """Per pid: a name (from `named`, else the command; a kernel worker's command names its current
    work queue, so that part is cut) and the CPU seconds it has used so far."""
    out: dict[int, tuple[str, float]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        pid = int(stat.parent.name)
        try:
            comm, seconds = process_cpu(pid)
        except OSError:  # the process ended between the listing and the read
            continue
        name = named.get(pid, comm.split("-", 1)[0] if comm.startswith("kworker") else comm)
        out[pid] = (name, seconds)
    return out


class CpuSampler(threading.Thread):
    """Snapshots of `cpu_by_process` four times a second, to split a window's CPU by component."""

    def __init__(self, named: dict[int, str]) -> None:
        super().__init__(daemon=True)
        self.named = named
        self.samples: list[tuple[float, dict[int, tuple[str, float]]]] = []
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            self.samples.append((time.monotonic(), cpu_by_process(self.named)))
            time.sleep(0.25)

    def used_between(self, start: float, end: float) -> dict[str, float]:
        """CPU seconds by name between the last sample before `start` and the first after `end`."""
        before = max((s for s in self.samples if s[0] <= start), key=lambda s: s[0], default=self.samples[0])
        after = min((s for s in self.samples if s[0] >= end), key=lambda s: s[0], default=self.samples[-1])
        used: dict[str, float] = {}
        for pid, (name, cpu) in after[1].items():
            used[name] = used.get(name, 0.0) + cpu - before[1].get(pid, (name, 0.0))[1]
        return {k: round(v, 2) for k, v in sorted(used.items(), key=lambda kv: -kv[1]) if v >= 0.05}


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timeline(
    started: dict[str, float], done: dict[str, float], grpojobs: Watcher, rayjobs: Watcher, names: list[str]
) -> list[dict[str, Any]]:
    """Per job, seconds after the first create: where each job's time to its RayJob went."""
    t0 = min(started.values())

    def at(table: dict[str, float], key: str) -> float | None:
        return round(table[key] - t0, 3) if key in table else None

    return [
        {
            "job": n,
            "create_sent": at(started, n),
            "create_answered": at(done, n),
            "job_seen": at(grpojobs.added, n),
            "status_written": at(grpojobs.has_status, n),
            "rayjob_seen": at(rayjobs.added, f"{n}-1"),
        }
        for n in names
    ]


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
    names = [m["metadata"]["name"] for m in manifests]
    rayjobs = Watcher("rayjobs", namespace, [f"{n}-1" for n in names], rayjob_running, timeout)
    grpojobs = Watcher("grpojobs", namespace, names, grpojob_running, timeout)
    rayjobs.start()
    grpojobs.start()
    time.sleep(3)  # both watches open before the first create
    cpu_before = cpu_seconds(operator.proc.pid)  # type: ignore[union-attr]
    sampler = CpuSampler({operator.proc.pid: "grpo-operator", os.getpid(): "benchmark client"})  # type: ignore[union-attr]
    sampler.start()
    time.sleep(0.3)
    answered: dict[str, float] = {}
    started = create_all(client, manifests, workers, answered)
    grpojobs.wait()
    rayjobs.wait()
    sampler.stop = True
    create_to_rayjob = [rayjobs.added[f"{n}-1"] - started[n] for n in names]
    status_lag = [grpojobs.reached[n] - rayjobs.reached[f"{n}-1"] for n in names]
    peak = peak_rss_mib(operator.proc.pid)  # type: ignore[union-attr]
    cpu = cpu_seconds(operator.proc.pid) - cpu_before  # type: ignore[union-attr]
    operator.stop()
    client.delete(Namespace, namespace)
    return {
        "namespace": namespace,
        "create_to_rayjob": summary(create_to_rayjob),
        "rayjob_status_to_grpojob_status": summary(status_lag),
        "operator_peak_rss_mib": round(peak, 1),
        "operator_cpu_seconds": round(cpu, 1),
        "burst_seconds": round(max(grpojobs.reached.values()) - min(started.values()), 1),
        "creates_sent_over_seconds": round(max(started.values()) - min(started.values()), 2),
        # CPU seconds by process from the first create to the last RayJob: who the burst ran on.
        "cpu_until_last_rayjob": sampler.used_between(
            min(started.values()), max(rayjobs.added[f"{n}-1"] for n in names)
        ),
        "timeline": timeline(started, answered, grpojobs, rayjobs, names),
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
    names = [m["metadata"]["name"] for m in manifests]
    watcher = Watcher("rayjobs", namespace, names, exists, timeout)
    watcher.start()
    time.sleep(3)
    started = create_all(client, manifests, workers)
    watcher.wait()
    latencies = [watcher.added[n] - started[n] for n in names]
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
        wait_until_ready(client, [node["metadata"]["name"] for node in nodes])
        result = {
            "jobs": args.jobs,
            "machine": f"{os.cpu_count()} CPUs, {round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB",
            "operator": run_operator_burst(client, args.kubeconfig, args.jobs, args.workers, args.timeout),
            "floor_direct_rayjobs": run_floor(client, args.jobs, args.workers, args.timeout),
        }
    finally:
        for node in nodes:
            client.delete(Node, node["metadata"]["name"])
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    result["operator"].pop("timeline")  # per-job detail goes to --out only
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
