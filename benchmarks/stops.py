"""Steps lost per planned stop, and the time from the stop to the pods gone, on the real node.

For each stop — `suspend` (runPolicy.suspend, then a resume), `eviction` (the Eviction API on the
head pod, what a drain and the cluster autoscaler use) and `deadline` (activeDeadlineSeconds
running out) — the colour job (examples/colours-cpu.yaml, its reward paced so a step lasts a few
seconds) is stopped mid-run at a step no periodic save makes, once with save-on-stop (`on`, the
default) and once without (`off`: checkpoint.saveOnStop.enabled false, what every stop did before):

    steps lost        the highest step trained before the stop less the step the job went on from
                      (the next attempt's status.checkpoint.resumedFromStep; for a deadline, which
                      ends the job, the step its last checkpoint holds)
    seconds to gone   from the stop's request to the last of the stopped pods gone (for an
                      eviction: the evicted head pod), which includes the save on stop

Needs the local cluster with its real node up (`make test` leaves both; hack/real-backend-up.sh
starts them). `--install` installs the operator's chart onto the real node and prepares a
namespace for the job, as the real-pod tests do (tests/support/real_node_release.py), and removes
both after; `--namespace NS` uses a namespace so prepared, watched by an operator already there:

    .venv/bin/python -m benchmarks.stops --install [--stops suspend,eviction,deadline]
        [--modes on,off] [--runs 1] [--out docs/benchmarks/data/stops-real-node.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from grpo_operator.children.meta import JOB_LABEL

from . import harness  # noqa: F401  (loads tests/support as `support`)
from .paths import REPO

STOPS = ("suspend", "eviction", "deadline")
MODES = ("on", "off")
STEPS = 12
SAVE_EVERY = 3
STOP_AT = (4, 5, 7, 8)
"""Steps the stop is made after: none a periodic save (every SAVE_EVERY) makes anyway."""
REWARD_PACE_S = 0.02
"""Seconds the reward sleeps a call, as the real-node tests pace the job (16 x 8 calls a step)."""
OUT = REPO / "docs" / "benchmarks" / "data" / "stops-real-node.json"


# --- the pure parts ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StopRun:
    """One stopped job: what it had trained, where it went on from, how long its pods took."""

    stop: str
    mode: str
    requested_after: int
    trained: int
    went_on_from: int
    seconds_to_gone: float

    @property
    def steps_lost(self) -> int:
        return max(0, self.trained - self.went_on_from)


def went_on_from(stop: str, status: dict[str, Any]) -> int:
    """The step the job went on from after the stop, from its final status."""
    checkpoint = status.get("checkpoint") or {}
    if stop == "deadline":  # the job ended: what its newest checkpoint holds is what it kept
        last = checkpoint.get("lastStop") or {}
        return int(last.get("step") if last.get("stepsLost") == 0 else checkpoint.get("latestStep") or 0)
    return int(checkpoint.get("resumedFromStep") or 0)


def summarise(runs: list[StopRun]) -> dict[str, Any]:
    """Per stop and mode: the steps each run lost and the seconds to the pods gone."""
    out: dict[str, Any] = {}
    for run in runs:
        out.setdefault(run.stop, {}).setdefault(run.mode, []).append(run)
    return {
        stop: {
            mode: {
                "runs": len(group),
                "steps_lost": [r.steps_lost for r in group],
                "steps_lost_max": max(r.steps_lost for r in group),
                "seconds_to_gone_median": round(statistics.median(r.seconds_to_gone for r in group), 1),
                "seconds_to_gone_max": round(max(r.seconds_to_gone for r in group), 1),
            }
            for mode, group in modes.items()
        }
        for stop, modes in out.items()
    }


def document(runs: list[StopRun], commit: str, machine: dict[str, Any], when: datetime) -> dict[str, Any]:
    """The JSON the benchmark page reads: the summary, every run, and where it was measured."""
    return {
        "benchmark": "stops",
        "date": when.strftime("%Y-%m-%d"),
        "commit": commit,
        "machine": machine,
        "job": {
            "example": "colours-cpu",
            "steps": STEPS,
            "save_every": SAVE_EVERY,
            "reward_pace_s": REWARD_PACE_S,
        },
        "summary": summarise(runs),
        "runs": [{**asdict(r), "steps_lost": r.steps_lost} for r in runs],
    }


def paced_job(name: str, mode: str) -> list[dict[str, Any]]:
    """The colour job, paced, with save-on-stop on or off."""
    from support.colour_lives import colour_job, paced
    from support.real_node_release import REAL_NODE_VOLUMES

    documents = colour_job(
        name,
        STEPS,
        SAVE_EVERY,
        resources={"cpuPerNode": "1", "memoryPerNode": "6Gi"},
        checkpoint={**REAL_NODE_VOLUMES, "saveOnStop": {"enabled": mode == "on"}},
    )
    return paced(documents, REWARD_PACE_S)


# --- the cluster's side ----------------------------------------------------------------------------


def _pods(cluster: Any, namespace: str, job: str) -> list[dict[str, Any]]:
    return [
        p
        for p in cluster.get("pods", namespace=namespace)["items"]
        if p["metadata"].get("labels", {}).get(JOB_LABEL) == job
    ]


def _step(cluster: Any, namespace: str, job: str) -> int:
    body = cluster.get("grpojob", job, namespace) or {}
    return int(((body.get("status") or {}).get("progress") or {}).get("step") or 0)


def _patch(cluster: Any, namespace: str, job: str, spec: dict[str, Any]) -> None:
    cluster.kubectl(
        "patch", "grpojob", job, "-n", namespace, "--type=merge", "-p", json.dumps({"spec": spec})
    )


def _request(cluster: Any, namespace: str, job: str, stop: str) -> Callable[[], bool]:
    """Make the stop; returns the check that its pods are gone."""
    if stop == "suspend":
        _patch(cluster, namespace, job, {"runPolicy": {"suspend": True}})
    elif stop == "deadline":
        _patch(cluster, namespace, job, {"runPolicy": {"activeDeadlineSeconds": 1}})
    else:
        head = next(
            p
            for p in _pods(cluster, namespace, job)
            if p["metadata"]["labels"].get("ray.io/node-type") == "head"
        )
        name, uid = head["metadata"]["name"], head["metadata"]["uid"]
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/eviction"
        cluster.kubectl("create", "--raw", path, "-f", "-", input=json.dumps(eviction))
        return lambda: all(p["metadata"]["uid"] != uid for p in _pods(cluster, namespace, job))
    return lambda: not _pods(cluster, namespace, job)


def _wait(
    check: Callable[[], bool], timeout: float, what: str, during: Callable[[], None] = lambda: None
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen in {timeout} s")
        during()
        time.sleep(1)


def measure(cluster: Any, namespace: str, stop: str, mode: str, at: int) -> StopRun:
    job = f"stop-{stop[:5]}-{mode}-{secrets.token_hex(2)}"
    cluster.apply(paced_job(job, mode), namespace)
    _wait(lambda: _step(cluster, namespace, job) >= at, 900, f"{job} at step {at}")
    trained = [_step(cluster, namespace, job)]
    began = time.monotonic()
    gone = _request(cluster, namespace, job, stop)
    _wait(gone, 900, f"{job}'s pods gone", during=lambda: trained.append(_step(cluster, namespace, job)))
    seconds = time.monotonic() - began
    # What the stopped attempt reported last (its reporter's final report may follow its pods).
    time.sleep(10)
    trained.append(_step(cluster, namespace, job))
    if stop == "suspend":
        _patch(cluster, namespace, job, {"runPolicy": {"suspend": False}})
    final = ("Failed",) if stop == "deadline" else ("Succeeded", "Failed")
    _wait(
        lambda: (cluster.get("grpojob", job, namespace).get("status") or {}).get("phase") in final,
        1200,
        f"{job} ended",
    )
    status = cluster.get("grpojob", job, namespace)["status"]
    cluster.kubectl("delete", "grpojob", job, "-n", namespace, "--wait=false", check=False)
    return StopRun(stop, mode, at, max(trained), went_on_from(stop, status), round(seconds, 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stops", description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--namespace", help="a namespace prepared for the job, with an operator watching it")
    where.add_argument(
        "--install", action="store_true", help="install the operator and a namespace, then remove them"
    )
    parser.add_argument("--stops", default=",".join(STOPS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    from support.cluster import connect

    cluster = connect()
    if not args.install:
        return _run(cluster, args.namespace, args)
    import tempfile

    from support.namespaces import delete_namespace
    from support.real_node_release import install_operator, training_namespace
    from support.release import Helm, helm_binary

    with tempfile.TemporaryDirectory() as scratch:
        print("installing the operator on the real node and a namespace for the job", flush=True)
        namespace = training_namespace(cluster, "bench-stops", Path(scratch))
        release = install_operator(cluster, Helm(helm_binary(cluster), cluster), [namespace])
        try:
            return _run(cluster, namespace, args)
        finally:
            release.uninstall(check=False)
            delete_namespace(cluster, release.namespace)
            delete_namespace(cluster, namespace)


def _run(cluster: Any, namespace: str, args: argparse.Namespace) -> int:
    runs: list[StopRun] = []
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    machine = {"node": "real-cpu-0", "host": platform.node(), "cpus": _cpus()}
    for index in range(args.runs):
        for stop in args.stops.split(","):
            for mode in args.modes.split(","):
                run = measure(cluster, namespace, stop, mode, STOP_AT[index % len(STOP_AT)])
                print(json.dumps({**asdict(run), "steps_lost": run.steps_lost}), flush=True)
                runs.append(run)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(
                    json.dumps(document(runs, commit, machine, datetime.now(UTC)), indent=2) + "\n"
                )
    return 0


def _cpus() -> int:
    return os.cpu_count() or 0


if __name__ == "__main__":
    raise SystemExit(main())
