"""hack/cluster-down.sh leaves no Ray process behind, even one a job detached from Ray's own tree.

No cluster: the test starts a private Ray head with hack/cluster-lib.sh's start_ray_head, on free
loopback ports and its own state folder, so stopping it cannot touch the session's cluster or a
developer's own Ray. cluster-down.sh on that folder then does what it does on a full cluster.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.processes import cmdline, processes_in_session, processes_with_env

REPO_ROOT = Path(__file__).resolve().parents[2]
RAY_PORT_VARIABLES = (
    "GCS",
    "DASHBOARD",
    "NODE_MANAGER",
    "OBJECT_MANAGER",
    "CLIENT_SERVER",
    "DASHBOARD_AGENT",
    "DASHBOARD_AGENT_GRPC",
    "RUNTIME_ENV_AGENT",
    "METRICS_EXPORT",
    "AUTOSCALER_METRICS",
    "DASHBOARD_METRICS",
)


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_block(size: int) -> int:
    """The first of ``size`` consecutive free loopback ports, below Linux's ephemeral range."""
    for _ in range(50):
        base = random.randrange(20000, 32000 - size)
        if all(_free(port) for port in range(base, base + size)):
            return base
    raise RuntimeError(f"no {size} consecutive free ports found")


@pytest.fixture
def private_head_env() -> Iterator[dict[str, str]]:
    # A short folder: Ray's socket paths must fit in 107 bytes.
    cluster_dir = tempfile.mkdtemp(prefix="grpo-rh-")
    base = free_port_block(len(RAY_PORT_VARIABLES) + 20)
    env = {**os.environ, "GRPO_CLUSTER_DIR": cluster_dir}
    for offset, name in enumerate(RAY_PORT_VARIABLES):
        env[f"GRPO_RAY_{name}_PORT"] = str(base + offset)
    env["GRPO_RAY_MIN_WORKER_PORT"] = str(base + len(RAY_PORT_VARIABLES))
    env["GRPO_RAY_MAX_WORKER_PORT"] = str(base + len(RAY_PORT_VARIABLES) + 19)
    env["GRPO_RAY_NUM_CPUS"] = "1"
    yield env
    # Whatever happened above, nothing of this head may outlive the test.
    subprocess.run(
        ["bash", str(REPO_ROOT / "hack/cluster-down.sh")], env=env, capture_output=True, check=False
    )
    shutil.rmtree(cluster_dir, ignore_errors=True)


@pytest.mark.slow
def test_cluster_down_stops_every_process_of_the_ray_head(private_head_env: dict[str, str]) -> None:
    env = private_head_env
    start = ". hack/lib.sh && . hack/cluster-lib.sh && start_ray_head && wait_for_ray_head"
    started = subprocess.run(["bash", "-c", start], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert started.returncode == 0, started.stdout + started.stderr
    marker = f"GRPO_RAY_HEAD_OF={env['GRPO_CLUSTER_DIR']}"
    dashboard = f"http://127.0.0.1:{env['GRPO_RAY_DASHBOARD_PORT']}"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    # A job whose child leaves the entrypoint's process group: Ray's own stop would miss it.
    body = {"entrypoint": "setsid sleep 900 & sleep 900", "submission_id": "detached"}
    request = urllib.request.Request(
        f"{dashboard}/api/jobs/", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with opener.open(request, timeout=30) as response:
        assert response.status == 200
    deadline = time.monotonic() + 60
    while len([p for p in processes_with_env(marker) if b"sleep" in cmdline(p)]) < 2:
        assert time.monotonic() < deadline, "the job's sleeps never started"
        time.sleep(0.5)
    # Ray renames workers and dashboard modules, which hides their environment: count the session.
    session = int((Path(env["GRPO_CLUSTER_DIR"]) / "pids/ray-head.pid").read_text().split()[0])
    assert len(processes_in_session(session)) > 10  # gcs_server, raylet, dashboard modules, workers, ...

    down = subprocess.run(
        ["bash", str(REPO_ROOT / "hack/cluster-down.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert down.returncode == 0, down.stdout + down.stderr
    left = {pid: cmdline(pid) for pid in {*processes_with_env(marker), *processes_in_session(session)}}
    assert left == {}
