"""Chaos run: many GRPOJobs while the operator is killed at random moments and the API server's
answers are disturbed (benchmarks.chaos_proxy between the operator and the API server).

Jobs of six kinds, each kind in a namespace whose fake Ray job API plays its timeline:

    succeed   the Ray job runs, then succeeds                   -> Succeeded
    retry     every attempt fails retryably (exit 75)            -> Failed, BackoffLimitExceeded, attempt 2
    config    the attempt fails with a configuration error      -> Failed at attempt 1
    deadline  runs forever, activeDeadlineSeconds ends it       -> Failed, DeadlineExceeded
    suspend   runs forever; suspended, then resumed, mid-chaos  -> Running, the attempt after the suspended one
    recreate  deleted and re-created under its name mid-chaos   -> Succeeded, as the new job

While faults are on, the operator (a real `grpo-operator run` process) is SIGKILLed every few
seconds and started again, and a share of its requests is refused, throttled, reset, delayed or
answered with an error after the API server applied them. Then the faults stop and the run waits
for every job to settle, and counts:

    converged          jobs in the state their kind expects
    stuck              jobs that are not, when the settle time is up (a job whose children are not
                       all there counts as stuck too: its pods would never start)
    duplicated RayJobs RayJobs a job's status does not account for (more attempts than it made,
                       or an attempt's RayJob made twice)
    leaked Ray clusters RayClusters still there that nothing should hold: of a finished job, of a
                       replaced attempt, or without a RayJob

Needs a running local cluster (make cluster-up). Not a test by itself; tests/integration/
test_chaos.py runs a short one with --check, which exits 1 unless all four targets (everything
converged, nothing stuck, duplicated or leaked) are met. The recorded run:

    .venv/bin/python -m benchmarks.chaos --jobs 60 --chaos-seconds 180 --out /tmp/chaos.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from lightkube import ApiError, Client, codecs
from lightkube.config.kubeconfig import KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Namespace, Node

from .examples import example_job, with_changes
from .harness import (
    RUNNING_FOREVER,
    GRPOJobResource,
    OperatorProcess,
    RayJobAPI,
    RayJobResource,
    read_env_file,
)
from .paths import CACHE, CRDS, REPO

RayClusterResource = create_namespaced_resource("ray.io", "v1", "RayCluster", "rayclusters")
SUCCESS = (("RUNNING", 0), ("SUCCEEDED", 25, "Job finished successfully."))
KINDS: dict[str, dict[str, Any]] = {
    "succeed": {"timeline": SUCCESS},
    "retry": {
        "timeline": (("RUNNING", 0), ("FAILED", 12, "Job entrypoint command failed with exit code 75.")),
        "spec": {"runPolicy": {"backoffLimit": 1}},
    },
    "config": {
        "timeline": (("RUNNING", 0), ("FAILED", 10, "Job entrypoint command failed with exit code 3."))
    },
    "deadline": {"timeline": RUNNING_FOREVER, "spec": {"runPolicy": {"activeDeadlineSeconds": 40}}},
    "suspend": {"timeline": RUNNING_FOREVER},
    "recreate": {"timeline": SUCCESS},
}


@dataclass
class Job:
    kind: str
    namespace: str
    name: str
    created_at: float = 0.0
    uid: str = ""
    events: list[str] = field(default_factory=list)
    attempt_at_suspend: int = 0
    """The job's attempt when it was suspended (0: none yet); a resume starts the one after it. On
    a loaded machine, with the operator killed every few seconds, a job can be suspended before its
    first attempt exists, and then resumes into attempt 1: nothing was stopped."""


CHILDREN = {
    "ConfigMap": ("configmaps", "{}-spec"),
    "ServiceAccount": ("serviceaccounts", "{}-trainer"),
    "Role": ("roles", "{}-trainer"),
    "RoleBinding": ("rolebindings", "{}-trainer"),
    "PersistentVolumeClaim": ("persistentvolumeclaims", "{}-checkpoints"),
    "NetworkPolicy": ("networkpolicies", "{}-ray"),
}


def expected(job: Job, obj: dict[str, Any] | None, children: set[tuple[str, str]]) -> str | None:
    """None when the job is where its kind must end, with all its children; otherwise what is wrong.

    `children`: (kind, name) of every object in the job's namespace that could be a child."""
    if obj is None:
        return "the GRPOJob is gone"
    missing = [kind for kind, (_, name) in CHILDREN.items() if (kind, name.format(job.name)) not in children]
    if missing and (obj.get("status") or {}).get("phase") != "Failed":
        return f"children missing: {', '.join(missing)}"
    status = obj.get("status") or {}
    phase, attempt = status.get("phase"), status.get("attempt")
    conditions = {c["type"]: c for c in status.get("conditions", [])}
    failed = (conditions.get("Failed") or {}).get("reason")
    want: dict[str, bool] = {
        "succeed": phase == "Succeeded" and attempt == 1,
        "retry": phase == "Failed" and failed == "BackoffLimitExceeded" and attempt == 2,
        "config": phase == "Failed" and failed == "TrainerFailed" and attempt == 1,
        "deadline": phase == "Failed" and failed == "DeadlineExceeded",
        "suspend": phase == "Running"
        and (attempt or 0) >= job.attempt_at_suspend + 1
        and not obj["spec"].get("runPolicy", {}).get("suspend"),
        "recreate": phase == "Succeeded" and attempt == 1 and obj["metadata"]["uid"] == job.uid,
    }
    # A finished job keeps only the conditions of its end, so Created is asked of a running one.
    created = (conditions.get("Created") or {}).get("status") == "True"
    if want[job.kind] and (created or phase in ("Failed", "Succeeded")):
        return None
    return f"phase={phase} attempt={attempt} failed={failed} created={created}"


class Cluster:
    """What the run reads and writes, as the admin (never through the chaos proxy)."""

    def __init__(self, kubeconfig: Path) -> None:
        self.client = Client(KubeConfig.from_file(kubeconfig), field_manager="grpo-chaos")

    def job(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.client.get(GRPOJobResource, name, namespace=namespace).to_dict()
        except ApiError as error:
            if error.status.code == 404:
                return None
            raise

    def items(self, resource: Any, namespace: str) -> list[dict[str, Any]]:
        return [o.to_dict() for o in self.client.list(resource, namespace=namespace)]

    def children(self, namespace: str) -> set[tuple[str, str]]:
        """(kind, name) of the objects a job's children could be, in one namespace."""
        from lightkube.resources.core_v1 import ConfigMap, PersistentVolumeClaim, ServiceAccount
        from lightkube.resources.networking_v1 import NetworkPolicy
        from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding

        found = set()
        for resource in (ConfigMap, ServiceAccount, Role, RoleBinding, PersistentVolumeClaim, NetworkPolicy):
            found |= {
                (resource.__name__, o.metadata.name) for o in self.client.list(resource, namespace=namespace)
            }
        return found

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.client.create(codecs.from_dict(body)).to_dict()  # type: ignore[no-any-return]

    def patch_spec(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        from lightkube.types import PatchType

        self.client.patch(
            GRPOJobResource, name, {"spec": patch}, namespace=namespace, patch_type=PatchType.MERGE
        )

    def delete(self, namespace: str, name: str) -> None:
        self.client.delete(GRPOJobResource, name, namespace=namespace)


def manifest(job: Job) -> dict[str, Any]:
    body = example_job("lora-single-gpu", **{"metadata": None, "spec.dataset": None})
    changes = {
        "metadata": {"name": job.name, "namespace": job.namespace, "labels": {"grpo.dev/chaos": "true"}},
        "spec.model.source": "/opt/models/tiny",
        "spec.dataset": {"preset": "geo3k", "maxPromptLength": 1024, "maxResponseLength": 1024},
    }
    for section, values in KINDS[job.kind].get("spec", {}).items():
        changes.update({f"spec.{section}.{key}": value for key, value in values.items()})
    return with_changes(body, changes)


def capacity_nodes(cluster: Cluster, count: int) -> list[str]:
    """Fake 8-GPU nodes, so that every job's Ray cluster can be scheduled at once: a job waiting
    for room is not what this run measures. Removed at the end."""
    template = next(d for d in yaml.safe_load_all((REPO / "hack/cluster/node-pools.yaml").read_text()) if d)
    names = []
    for i in range(count):
        node = copy.deepcopy(template)
        name = f"kwok-chaos-{i}"
        node["metadata"]["name"] = name
        node["metadata"]["labels"].update({"kubernetes.io/hostname": name, "grpo.dev/chaos": "true"})
        for key in ("allocatable", "capacity"):
            node["status"][key]["cpu"] = "128"
        cluster.client.apply(codecs.from_dict(node), field_manager="grpo-chaos", force=True)
        names.append(name)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready = {
            n.metadata.name
            for n in cluster.client.list(Node, labels={"grpo.dev/chaos": "true"})
            if any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))
        }
        if ready >= set(names):
            return names
        time.sleep(0.5)
    raise SystemExit("the chaos run's nodes were not Ready within 120 s")


def proxy_kubeconfig(url: str, folder: Path) -> Path:
    path = folder / "chaos-proxy.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "chaos", "cluster": {"server": url}}],
                "users": [{"name": "chaos", "user": {}}],
                "contexts": [{"name": "chaos", "context": {"cluster": "chaos", "user": "chaos"}}],
                "current-context": "chaos",
            }
        )
    )
    return path


class Proxy:
    def __init__(self, kubeconfig: Path, rate: float, max_faults: int, seed: int, log: Path) -> None:
        self.log = log.open("w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.chaos_proxy",
                "--kubeconfig",
                str(kubeconfig),
                "--rate",
                str(rate),
                "--max-faults",
                str(max_faults),
                "--seed",
                str(seed),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("listening on "):
            raise SystemExit(f"the chaos proxy did not start: {line!r} (log: {log})")
        self.url = line.removeprefix("listening on ")

    def control(self, action: str) -> dict[str, Any]:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        request = urllib.request.Request(f"{self.url}/_chaos/{action}", method="POST", data=b"")
        with opener.open(request, timeout=10) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


class Killer(threading.Thread):
    """SIGKILLs the operator every few seconds and starts it again; restarts it if it exited."""

    def __init__(self, operator: OperatorProcess, rng: random.Random, every: tuple[float, float]) -> None:
        super().__init__(daemon=True)
        self.operator, self.rng, self.every = operator, rng, every
        self.stop_flag = threading.Event()
        self.kills = 0
        self.exits = 0

    def run(self) -> None:
        while not self.stop_flag.wait(self.rng.uniform(*self.every)):
            proc = self.operator.proc
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
                self.kills += 1
            else:
                self.exits += 1  # it stopped by itself (lost its Lease to a faulty network)
            time.sleep(self.rng.uniform(0.2, 3.0))
            restart(self.operator)


def restart(operator: OperatorProcess) -> None:
    """Start the operator again; through a faulty proxy a start can fail, so try until it runs."""
    for _ in range(10):
        try:
            operator.start(timeout=120)
            return
        except RuntimeError as error:
            print(f"chaos: operator start failed, again: {str(error)[:200]}", flush=True)
    raise SystemExit("the operator would not start ten times in a row")


def leaks_and_duplicates(cluster: Cluster, jobs: list[Job]) -> tuple[list[str], list[str]]:
    """Ray clusters nothing should hold, and RayJobs a job's status does not account for."""
    leaked: list[str] = []
    duplicated: list[str] = []
    for namespace in sorted({j.namespace for j in jobs}):
        objects = {o["metadata"]["name"]: o for o in cluster.items(GRPOJobResource, namespace)}
        rayjobs = {r["metadata"]["name"]: r for r in cluster.items(RayJobResource, namespace)}
        for rayjob in rayjobs.values():
            owner = rayjob["metadata"]["labels"].get("grpo.dev/job", "")
            job = objects.get(owner)
            attempt = int(rayjob["metadata"]["labels"].get("grpo.dev/attempt", "0"))
            refs = [r["uid"] for r in rayjob["metadata"].get("ownerReferences", [])]
            status = (job or {}).get("status") or {}
            if job is None or job["metadata"]["uid"] not in refs:
                if not rayjob["metadata"].get("deletionTimestamp"):
                    duplicated.append(f"{namespace}/{rayjob['metadata']['name']}: not its job's")
            elif attempt > (status.get("attempt") or 0):
                duplicated.append(
                    f"{namespace}/{rayjob['metadata']['name']}: beyond attempt {status.get('attempt')}"
                )
        for raycluster in cluster.items(RayClusterResource, namespace):
            name = raycluster["metadata"]["name"]
            owners = [
                r["name"] for r in raycluster["metadata"].get("ownerReferences", []) if r["kind"] == "RayJob"
            ]
            if not owners or owners[0] not in rayjobs:
                leaked.append(f"{namespace}/{name}: no RayJob")
                continue
            rayjob = rayjobs[owners[0]]
            job = objects.get(rayjob["metadata"]["labels"].get("grpo.dev/job", ""))
            status = (job or {}).get("status") or {}
            if job is None or status.get("phase") in ("Succeeded", "Failed", "Suspended"):
                leaked.append(f"{namespace}/{name}: its job is {status.get('phase') or 'gone'}")
            elif owners[0] != status.get("rayJobName"):
                leaked.append(f"{namespace}/{name}: of a replaced attempt ({owners[0]})")
    return leaked, duplicated


def schedule(jobs: list[Job], rng: random.Random, chaos_seconds: float) -> list[tuple[float, str, Job]]:
    """(seconds from the start, action, job), in time order: jobs arrive over the first half of the
    chaos; suspends, resumes and re-creations follow them."""
    arrivals = sorted((rng.uniform(0, chaos_seconds / 2), job) for job in jobs)
    actions: list[tuple[float, str, Job]] = []
    for at, job in arrivals:
        if job.kind == "suspend":
            pause = at + rng.uniform(8, 25)
            actions += [(pause, "suspend", job), (pause + rng.uniform(8, 25), "resume", job)]
        elif job.kind == "recreate":
            actions.append((at + rng.uniform(5, 20), "recreate", job))
    return sorted([(at, "create", job) for at, job in arrivals] + actions, key=lambda a: a[0])


def act(cluster: Cluster, action: str, job: Job) -> None:
    if action == "create":
        job.uid = cluster.create(manifest(job))["metadata"]["uid"]
    elif action == "suspend":
        status = (cluster.job(job.namespace, job.name) or {}).get("status") or {}
        job.attempt_at_suspend = int(status.get("attempt") or 0)
        cluster.patch_spec(job.namespace, job.name, {"runPolicy": {"suspend": True}})
    elif action == "resume":
        cluster.patch_spec(job.namespace, job.name, {"runPolicy": {"suspend": False}})
    elif action == "recreate":
        cluster.delete(job.namespace, job.name)
        job.uid = cluster.create(manifest(job))["metadata"]["uid"]


def settle(
    cluster: Cluster, jobs: list[Job], namespaces: list[str], args: argparse.Namespace
) -> tuple[dict[str, str], list[str], list[str], float | None]:
    """Wait for every job to reach what it should: (stuck jobs, leaked, duplicated, seconds taken)."""
    calm = time.monotonic()
    wrong: dict[str, str] = {}
    leaked: list[str] = []
    duplicated: list[str] = []
    while time.monotonic() - calm < args.settle_seconds:
        wrong = {}
        children = {ns: cluster.children(ns) for ns in namespaces}
        for job in jobs:
            problem = expected(job, cluster.job(job.namespace, job.name), children[job.namespace])
            if problem:
                wrong[f"{job.namespace}/{job.name}"] = problem
        leaked, duplicated = leaks_and_duplicates(cluster, jobs)
        if not wrong and not leaked and not duplicated:
            return wrong, leaked, duplicated, round(time.monotonic() - calm, 1)
        time.sleep(2)
    return wrong, leaked, duplicated, None


def run(args: argparse.Namespace) -> dict[str, Any]:
    env = read_env_file(Path(os.environ.get("GRPO_CLUSTER_DIR", CACHE / "cluster")) / "cluster.env")
    kubeconfig = Path(env["KUBECONFIG"])
    job_api = RayJobAPI(env["RAYJOBAPI_URL"])
    cluster = Cluster(kubeconfig)
    rng = random.Random(args.seed)
    stamp = int(time.time())
    namespaces = {kind: f"chaos-{kind}-{stamp}" for kind in KINDS}
    for kind, namespace in namespaces.items():
        cluster.client.create(Namespace(metadata={"name": namespace, "labels": {"grpo.dev/chaos": "true"}}))
        job_api.configure_namespace(namespace, KINDS[kind]["timeline"])
    nodes = capacity_nodes(cluster, (args.jobs + 5) // 6)
    workdir = Path(args.workdir or f"/tmp/chaos-{stamp}")
    workdir.mkdir(parents=True, exist_ok=True)
    cluster.client.apply(
        codecs.from_dict(yaml.safe_load((CRDS / "grpo.dev_grpojobs.yaml").read_text())),
        force=True,
    )

    proxy = Proxy(kubeconfig, args.fault_rate, args.max_faults, args.seed, workdir / "proxy.log")
    operator = OperatorProcess(
        proxy_kubeconfig(proxy.url, workdir),
        workdir / "operator.log",
        resync_seconds=args.resync_seconds,
        extra_env={
            "GRPO_NAMESPACES": ",".join(namespaces.values()),
            "GRPO_LEASE_NAMESPACE": namespaces["succeed"],
            "GRPO_LEASE_NAME": "chaos",
            "GRPO_LEADER_IDENTITY": "chaos-operator",
            "GRPO_LOG_FORMAT": "plain",
        },
    )
    kinds = list(KINDS)
    jobs = [Job(kinds[i % len(kinds)], "", f"chaos-{i}") for i in range(args.jobs)]
    for job in jobs:
        job.namespace = namespaces[job.kind]
    print(f"chaos: {len(jobs)} jobs in {len(namespaces)} namespaces, logs in {workdir}", flush=True)

    operator.start()
    proxy.control("on")
    killer = Killer(operator, rng, (args.kill_min, args.kill_max))
    killer.start()
    started = time.monotonic()
    for at, action, job in schedule(jobs, rng, args.chaos_seconds):
        time.sleep(max(0.0, started + at - time.monotonic()))
        act(cluster, action, job)
        job.events.append(f"{time.monotonic() - started:.1f}s {action}")
    time.sleep(max(0.0, started + args.chaos_seconds - time.monotonic()))
    killer.stop_flag.set()
    killer.join(180)
    faults = proxy.control("off")["stats"]
    if operator.proc is None or operator.proc.poll() is not None:
        restart(operator)
    calm = time.monotonic()
    print(f"chaos: faults off after {calm - started:.0f} s; {killer.kills} kills; settling", flush=True)

    wrong, leaked, duplicated, converged_after = settle(cluster, jobs, list(namespaces.values()), args)
    operator.stop()
    proxy.stop()
    if not args.keep:
        for namespace in namespaces.values():
            cluster.client.delete(Namespace, namespace)
            job_api.forget_namespace(namespace)
        for node in nodes:
            cluster.client.delete(Node, node)
    return {
        "jobs": len(jobs),
        "by_kind": {kind: sum(1 for j in jobs if j.kind == kind) for kind in KINDS},
        "converged": len(jobs) - len(wrong),
        "stuck": len(wrong),
        "duplicated_rayjobs": len(duplicated),
        "leaked_ray_clusters": len(leaked),
        "settled_after_faults_stopped_s": converged_after,
        "operator_kills": killer.kills,
        "operator_exits_on_its_own": killer.exits,
        "chaos_seconds": args.chaos_seconds,
        "fault_rate": args.fault_rate,
        "faults": faults,
        "stuck_jobs": wrong,
        "duplicated": duplicated,
        "leaked": leaked,
        "logs": str(workdir),
        "machine": f"{os.cpu_count()} CPUs",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument("--chaos-seconds", type=float, default=180)
    parser.add_argument("--settle-seconds", type=float, default=300)
    parser.add_argument("--fault-rate", type=float, default=0.2, help="share of API requests disturbed")
    parser.add_argument("--max-faults", type=int, default=5000)
    parser.add_argument(
        "--kill-min", type=float, default=4.0, help="seconds between operator kills, at least"
    )
    parser.add_argument("--kill-max", type=float, default=15.0)
    parser.add_argument(
        "--resync-seconds",
        type=float,
        default=60.0,
        help="the operator's full resync (the product's default)",
    )
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--workdir", help="logs of the proxy and the operator (default /tmp/chaos-<time>)")
    parser.add_argument("--keep", action="store_true", help="leave the namespaces for inspection")
    parser.add_argument("--out", type=Path, help="write the JSON result here too")
    parser.add_argument("--check", action="store_true", help="exit 1 unless every target is met")
    args = parser.parse_args()
    result = run(args)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    targets_met = (
        result["stuck"] == 0 and result["duplicated_rayjobs"] == 0 and result["leaked_ray_clusters"] == 0
    )
    return 0 if targets_met or not args.check else 1


if __name__ == "__main__":
    raise SystemExit(main())
