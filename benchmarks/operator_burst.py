"""Burst benchmark: N GRPOJobs created at once against the local cluster.

Measures, for the operator:
  - create -> RayJob created: from the client's create call to the RayJob's ADDED watch event;
  - RayJob status -> GRPOJob status: from the watch event in which a RayJob's jobStatus turns
    RUNNING to the one in which its GRPOJob's phase turns Running;
  - which trigger created each RayJob (the operator's grpo_rayjobs_created_total): the event
    path (job, rayjob, retry) or the resync;
  - the operator's API requests per job, by verb and resource (its grpo_api_requests_total);
  - CPU seconds of the API server, the operator and every other process of this cluster, from
    the first create to the last job Running; the operator's peak resident memory (VmHWM);
  - with --steady-minutes, the steady state afterwards: every job Running, operator and API
    server CPU and the operator's requests per minute.
And the floor, first: the same number of RayJobs created directly by a client (create -> ADDED).
Each part waits for the other's namespace to be gone, so neither runs beside a deletion.

It adds fake NVIDIA nodes for the burst (so every job can really run) and removes them after.
Needs a running local cluster (make cluster-up). Not a test: run it by hand, e.g.

    .venv/bin/python -m benchmarks.operator_burst --jobs 200 \
        --summary docs/benchmarks/data/operator-burst-200.json --out /tmp/burst-200.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.children.rayjob import build_rayjob
from grpo_operator.config import load_settings
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Namespace

from .harness import (
    GRPOJobResource,
    OperatorProcess,
    RayJobResource,
    add_nodes,
    burst_jobs,
    burst_nodes,
    create_all,
    metric_samples,
    remove_nodes,
)
from .paths import BENCHMARKS, CACHE


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


def cluster_pids(kubeconfig: Path) -> dict[int, str]:
    """This cluster's own components by pid (hack/cluster-up.sh's pid files beside the kubeconfig):
    other engineers' clusters on the same machine run processes of the same names."""
    named: dict[int, str] = {}
    for pid_file in sorted((kubeconfig.parent / "pids").glob("*.pid")):
        try:
            named[int(pid_file.read_text().split()[0])] = f"{pid_file.stem} (this cluster)"
        except (OSError, ValueError, IndexError):
            continue
    return named


def scrape(operator: OperatorProcess) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """The operator's own counters: requests by verb and resource, RayJobs by trigger, requeues."""
    text = operator.metrics()
    return {
        name: metric_samples(text, name)
        for name in (
            "grpo_api_requests_total",
            "grpo_rayjobs_created_total",
            "grpo_reconciles_requeued_total",
            "process_cpu_seconds_total",
        )
    }


def by_label(samples: dict[tuple[tuple[str, str], ...], float], *labels: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in samples.items():
        named = dict(key)
        label = " ".join(named.get(label, "") for label in labels)
        out[label] = out.get(label, 0.0) + value
    return dict(sorted(out.items()))


def requests_per_job(
    before: dict[tuple[tuple[str, str], ...], float],
    after: dict[tuple[tuple[str, str], ...], float],
    jobs: int,
) -> dict[str, Any]:
    """The operator's requests between two scrapes, per job: by verb, by verb and resource, and
    the answers that were not 2xx."""
    delta = {key: after.get(key, 0.0) - before.get(key, 0.0) for key in after}
    failed = {k: v for k, v in delta.items() if not dict(k)["code"].startswith("2") and v}
    return {
        "total": round(sum(delta.values()) / jobs, 2),
        "by_verb": {k: round(v / jobs, 2) for k, v in by_label(delta, "verb").items() if v},
        "by_verb_resource": {
            k: round(v / jobs, 3) for k, v in by_label(delta, "verb", "resource").items() if v
        },
        "not_2xx_total": {k: int(v) for k, v in by_label(failed, "verb", "resource", "code").items()},
    }


MEMORY_PROBE = BENCHMARKS / "memory_probe"
"""A sitecustomize that traces the operator's allocations and reports them on SIGUSR2."""


def probe_env(report: Path | None) -> dict[str, str]:
    """The operator's environment for --memory-probe: tracemalloc in it, reports into `report`."""
    if report is None:
        return {}
    path = os.environ.get("PYTHONPATH")
    return {
        "GRPO_MEMORY_PROBE": str(report),
        "PYTHONPATH": f"{MEMORY_PROBE}{os.pathsep}{path}" if path else str(MEMORY_PROBE),
    }


def memory_report(pid: int, report: Path | None, timeout: float = 120) -> None:
    """Ask the traced operator for a report and wait until it has appended it."""
    if report is None:
        return

    def size() -> int:
        return report.stat().st_size if report.is_file() else 0

    before = size()
    os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and size() == before:
        time.sleep(0.5)


def run_operator_burst(
    client: Client,
    kubeconfig: Path,
    jobs: int,
    workers: int,
    timeout: float,
    resync: float,
    steady: float,
    memory_probe: Path | None = None,
    max_passes: int | None = None,
) -> dict[str, Any]:
    namespace = f"bench-op-{int(time.time())}"
    client.create(Namespace(metadata={"name": namespace}))
    manifests = burst_jobs(namespace, jobs)
    log_file = Path(f"/tmp/{namespace}-operator.log")
    env = probe_env(memory_probe)
    if max_passes is not None:
        env["GRPO_MAX_CONCURRENT_RECONCILES"] = str(max_passes)
    operator = OperatorProcess(kubeconfig, log_file, resync_seconds=resync, extra_env=env)
    operator.start()
    operator.wait_leading()
    names = [m["metadata"]["name"] for m in manifests]
    rayjobs = Watcher("rayjobs", namespace, [f"{n}-1" for n in names], rayjob_running, timeout)
    grpojobs = Watcher("grpojobs", namespace, names, grpojob_running, timeout)
    rayjobs.start()
    grpojobs.start()
    time.sleep(3)  # both watches open before the first create
    pid = operator.proc.pid  # type: ignore[union-attr]
    named = {**cluster_pids(kubeconfig), pid: "grpo-operator", os.getpid(): "benchmark client"}
    sampler = CpuSampler(named)
    sampler.start()
    time.sleep(0.3)
    before = scrape(operator)
    answered: dict[str, float] = {}
    load_before = os.getloadavg()
    started = create_all(client, manifests, workers, answered)
    grpojobs.wait()
    rayjobs.wait()
    after = scrape(operator)
    create_to_rayjob = [rayjobs.added[f"{n}-1"] - started[n] for n in names]
    status_lag = [grpojobs.reached[n] - rayjobs.reached[f"{n}-1"] for n in names]
    first, all_running = min(started.values()), max(grpojobs.reached.values())
    whole = sampler.used_between(first, all_running)
    rss_all_running = peak_rss_mib(pid)
    memory_report(pid, memory_probe)
    steady_state = measure_steady(operator, sampler, named, jobs, steady) if steady else None
    sampler.stop = True
    peak = peak_rss_mib(pid)
    if steady:
        memory_report(pid, memory_probe)
    operator.stop()
    client.delete(Namespace, namespace)
    apiserver = whole.get("kube-apiserver (this cluster)", 0.0)
    operator_cpu = whole.get("grpo-operator", 0.0)
    return {
        "namespace": namespace,
        "operator_log": str(log_file),
        "resync_seconds": resync,
        "max_concurrent_reconciles": max_passes,
        "create_to_rayjob": summary(create_to_rayjob),
        "waited_over_10s": sum(1 for v in create_to_rayjob if v > 10),
        "rayjob_status_to_grpojob_status": summary(status_lag),
        "rayjobs_created_by_trigger": {
            k: int(v) for k, v in by_label(after["grpo_rayjobs_created_total"], "trigger").items()
        },
        "requeued": {k: int(v) for k, v in by_label(after["grpo_reconciles_requeued_total"], "why").items()},
        "requests_per_job": requests_per_job(
            before["grpo_api_requests_total"], after["grpo_api_requests_total"], jobs
        ),
        "operator_peak_rss_mib": round(peak, 1),
        "operator_peak_rss_mib_to_all_running": round(rss_all_running, 1),
        "memory_probe": str(memory_probe) if memory_probe else None,
        # CPU seconds from the first create to the last job Running, by process.
        "apiserver_cpu_s": apiserver,
        "apiserver_cpu_ms_per_job": round(1000 * apiserver / jobs, 1),
        "operator_cpu_s": operator_cpu,
        "operator_cpu_ms_per_job": round(1000 * operator_cpu / jobs, 1),
        "cpu_until_all_running": whole,
        "burst_seconds": round(all_running - first, 1),
        "creates_sent_over_seconds": round(max(started.values()) - first, 2),
        "load_average_before_after": [round(load_before[0], 1), round(os.getloadavg()[0], 1)],
        # CPU seconds by process from the first create to the last RayJob: who the burst ran on.
        "cpu_until_last_rayjob": sampler.used_between(first, max(rayjobs.added[f"{n}-1"] for n in names)),
        "steady_state": steady_state,
        "timeline": timeline(started, answered, grpojobs, rayjobs, names),
    }


def measure_steady(
    operator: OperatorProcess, sampler: CpuSampler, named: dict[int, str], jobs: int, minutes: float
) -> dict[str, Any]:
    """Every job Running, nothing changing: what the operator and the API server spend per minute."""
    time.sleep(30)  # the burst's tail (children, KubeRay's last status writes) out of the window
    start, before = time.monotonic(), scrape(operator)
    time.sleep(60 * minutes)
    end, after = time.monotonic(), scrape(operator)
    used = sampler.used_between(start, end)
    delta = {
        k: after["grpo_api_requests_total"].get(k, 0.0) - before["grpo_api_requests_total"].get(k, 0.0)
        for k in after["grpo_api_requests_total"]
    }
    per_minute = 60 / (end - start)
    return {
        "minutes": round((end - start) / 60, 1),
        "jobs": jobs,
        "operator_cpu_s_per_minute": round(used.get("grpo-operator", 0.0) * per_minute, 2),
        "apiserver_cpu_s_per_minute": round(used.get("kube-apiserver (this cluster)", 0.0) * per_minute, 2),
        "api_requests_per_minute": round(sum(delta.values()) * per_minute, 1),
        "api_requests_per_minute_by_verb": {
            k: round(v * per_minute, 1) for k, v in by_label(delta, "verb", "resource").items() if v
        },
        "rayjobs_created_by_trigger": {
            k: int(v) for k, v in by_label(after["grpo_rayjobs_created_total"], "trigger").items()
        },
    }


def run_floor(client: Client, jobs: int, workers: int, timeout: float) -> dict[str, Any]:
    """RayJobs created directly: what create -> RayJob costs with no operator in between.

    They are real RayJobs, so KubeRay loads the cluster as much as during the operator run.
    """
    namespace = f"bench-floor-{int(time.time())}"
    client.create(Namespace(metadata={"name": namespace}))
    settings = load_settings(environ={})
    manifests = []
    for i, body in enumerate(burst_jobs(namespace, jobs, stem="floor")):
        body["metadata"]["uid"] = f"0000-{i}"
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


def wait_gone(client: Client, namespace: str, timeout: float) -> float:
    """Seconds until a deleted namespace is gone (its Ray clusters with it), at most `timeout`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            client.get(Namespace, namespace)
        except ApiError as error:
            if error.status.code == 404:
                break
        time.sleep(2)
    return round(time.monotonic() - started, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=16, help="client threads creating objects")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--resync-seconds", type=float, default=60.0, help="the operator's resync period")
    parser.add_argument(
        "--max-concurrent-reconciles",
        type=int,
        default=None,
        help="the operator's bound on reconcile passes at once (its setting; default: the operator's own)",
    )
    parser.add_argument(
        "--steady-minutes",
        type=float,
        default=0.0,
        help="afterwards, measure this long with every job Running",
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=Path(os.environ.get("KUBECONFIG", CACHE / "cluster" / "kubeconfig")),
    )
    parser.add_argument("--out", type=Path, help="write the whole JSON result (per-job timeline too) here")
    parser.add_argument(
        "--memory-probe",
        type=Path,
        help="trace the operator's allocations (tracemalloc: slower) and append reports to this file "
        "once every job runs and after the steady state",
    )
    parser.add_argument("--summary", type=Path, help="write the result without the timeline here")
    args = parser.parse_args()
    os.environ["KUBECONFIG"] = str(args.kubeconfig)
    client = Client(timeout=httpx2.Timeout(60.0))  # a loaded API server answers late
    nodes = burst_nodes(args.jobs)
    add_nodes(client, nodes)
    try:
        memory = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
        result: dict[str, Any] = {
            "jobs": args.jobs,
            "machine": f"{os.cpu_count()} CPUs, {memory} GiB",
            "command": " ".join(sys.argv),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        floor = run_floor(client, args.jobs, args.workers, args.timeout)
        floor["deleted_in_seconds"] = wait_gone(client, floor["namespace"], args.timeout)
        result["floor_direct_rayjobs"] = floor
        result["operator"] = run_operator_burst(
            client,
            args.kubeconfig,
            args.jobs,
            args.workers,
            args.timeout,
            args.resync_seconds,
            args.steady_minutes,
            args.memory_probe,
            args.max_concurrent_reconciles,
        )
        operator_p99 = result["operator"]["create_to_rayjob"]["p99_s"]
        result["p99_over_floor_p99"] = round(operator_p99 / floor["create_to_rayjob"]["p99_s"], 2)
        result["operator"]["deleted_in_seconds"] = wait_gone(
            client, result["operator"]["namespace"], args.timeout
        )
    finally:
        remove_nodes(client, nodes)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    result["operator"].pop("timeline")  # per-job detail goes to --out only
    if args.summary:
        args.summary.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
