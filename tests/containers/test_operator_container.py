"""The operator from its image, not from this checkout: a container with the chart pod's hardening
(user 65532, read-only root, no capabilities, no privilege escalation) runs a GRPOJob through the
real API server and KubeRay to Succeeded. The container shares the host's network namespace only
to reach the local API server on loopback."""

from __future__ import annotations

import secrets
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import Cluster
from support.jobs import apply_job, condition, example, phase_is
from support.operator_process import free_port
from support.rayjobapi import RayJobAPI, succeeds_after

from .conftest import docker


@pytest.fixture
def operator_container(images, cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[str]:
    name = f"grpo-operator-{secrets.token_hex(4)}"
    health = free_port()
    # The cluster's credentials with their certificates inline, readable by the container's user.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(cluster.kubectl("config", "view", "--raw", "--flatten").stdout)
    kubeconfig.chmod(0o644)
    docker(
        "run", "--detach", "--name", name,
        "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "--user", "65532:65532", "--network", "host",
        # The chart's emptyDir at /tmp (lightkube writes inline certificates there).
        "--tmpfs", "/tmp",
        "--volume", f"{kubeconfig}:/etc/grpo/kubeconfig:ro",
        "--env", "KUBECONFIG=/etc/grpo/kubeconfig",
        # Only this test's namespace, and no Lease: another operator may watch the same cluster.
        "--env", f"GRPO_NAMESPACES={namespace}",
        "--env", "GRPO_LEADER_ELECTION=false",
        "--env", "GRPO_RESYNC_SECONDS=3",
        "--env", f"GRPO_HEALTH_PORT={health}",
        "--env", f"GRPO_METRICS_PORT={free_port()}",
        images["operator"]["RepoTags"][0],
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{health}/healthz", timeout=2):
                    break
            except OSError:
                state = docker("inspect", "-f", "{{.State.Status}}", name).stdout.strip()
                if state != "running" or time.monotonic() > deadline:
                    logs = docker("logs", "--tail", "40", name, check=False)
                    pytest.fail(
                        f"the operator container ({state}) never answered /healthz:\n{logs.stdout}{logs.stderr}"
                    )
                time.sleep(0.5)
        yield name
    finally:
        docker("rm", "--force", name, check=False)


def test_the_operator_image_runs_a_job_to_succeeded(
    cluster: Cluster, namespace: str, job_api: RayJobAPI, operator_container: str
) -> None:
    job_api.configure_namespace(namespace, succeeds_after(3))
    job = apply_job(cluster, namespace, example("geo3k-ascend-910b"))
    obj = cluster.wait_for("grpojob", job, namespace, phase_is("Succeeded"), timeout=180, what="Succeeded")
    assert condition(obj, "Succeeded")["status"] == "True"
    [submission] = job_api.submissions(namespace)
    assert submission["entrypoint"] == "grpo-train run --spec /grpo/spec/job.json"
    logs = docker("logs", operator_container)
    assert job in logs.stdout + logs.stderr, "the job was handled by the container's operator"
