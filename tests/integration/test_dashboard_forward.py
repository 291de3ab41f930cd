"""`kubectl grpo dashboard` against a job the operator runs on KWOK nodes."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support.cluster import Cluster
from support.jobs import apply_job, example, phase_is
from support.operator_process import OperatorProcess
from support.plugin import kubectl_grpo, plugin_path

REPO = Path(__file__).resolve().parents[2]


def _plugin(
    cluster: Cluster, tmp_path: Path, *args: str, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    return kubectl_grpo(cluster, plugin_path(tmp_path), *args, timeout=timeout)


def test_dashboard_reaches_the_running_head_of_a_kwok_job_up_to_its_node(
    operator: OperatorProcess, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """A job the operator runs: the plugin finds the head Service from the status and the head pod
    running, and kubectl's port-forward resolves the Service to that pod and asks the API server
    for its node's kubelet. That is as far as a KWOK node goes (it has no kubelet, hence no
    address), and the user gets kubectl's reason in one line, naming the Service."""
    job = apply_job(cluster, namespace, example("geo3k-ascend-910b"))
    status = cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="Running")[
        "status"
    ]
    service = f"{status['rayClusterName']}-head-svc"
    assert status["dashboardURL"].startswith(f"{service}.{namespace}.svc")
    result = _plugin(cluster, tmp_path, "-n", namespace, "dashboard", job, "--port", "0")
    assert result.returncode == 1, result
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(
        f"error: cannot forward the Ray dashboard (svc/{service} in {namespace}): "
    )
    # The API server's answer for a node without a kubelet address: kubectl got past the Service
    # and the pod (a missing Service or a pod not running is refused before this).
    assert "no preferred addresses found" in result.stderr, result.stderr
