"""RayJobs whose entrypoint really runs: the job API forwards them to the real Ray head on loopback.

Each test creates a RayJob directly (HTTPMode, as the operator does) in a namespace routed to the
real backend, with a tiny CPU entrypoint, and checks what the head pod's view gave it (files from
ConfigMap and claim volumes, Secret-backed env, the ServiceAccount's token), how KubeRay reports
the ending, and that no process of a job outlives it. hack/rayjobapi/real.py describes the backend.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cluster import Cluster
from support.processes import processes_with_env, wait_no_processes_with_env
from support.rayjobapi import RayJobAPI

pytestmark = pytest.mark.cluster

# What the entrypoint runs (an env value, so the entrypoint stays a plain `python -c "$PROBE"`):
# it reads the spec from its ConfigMap volume, writes into its claim, acts with its token.
PROBE = """
import json, os, pathlib, subprocess
root = pathlib.Path(os.environ["GRPO_WORKDIR"])
def kubectl(*args):
    return subprocess.run([os.environ["KUBECTL"], *args], capture_output=True, text=True)
patched = kubectl("patch", "configmap", "status", "--type=merge", "-p", '{"data": {"phase": "done"}}')
result = {
    "spec": json.loads((root / "grpo/spec/job.json").read_text()),
    "whoami": kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}").stdout,
    "patched": patched.returncode == 0,
    "can_list_secrets": kubectl("auth", "can-i", "list", "secrets").stdout.strip(),
    "greeting": os.environ["GREETING"],
}
(root / "data/out.json").write_text(json.dumps(result))
print("API_TOKEN=" + os.environ["API_TOKEN"])
"""


def rayjob(
    name: str,
    entrypoint: str,
    *,
    env: list[dict[str, Any]] | None = None,
    volumes: list[dict[str, Any]] | None = None,
    mounts: list[dict[str, Any]] | None = None,
    service_account: str | None = None,
) -> dict[str, Any]:
    """A RayJob with a head only, submitted over HTTP by KubeRay, as the operator's are."""
    pod: dict[str, Any] = {
        "containers": [
            {
                "name": "ray-head",
                "image": "rayproject/ray:2.46.0",
                "env": env or [],
                "volumeMounts": mounts or [],
            }
        ],
        "volumes": volumes or [],
    }
    if service_account:
        pod["serviceAccountName"] = service_account
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name},
        "spec": {
            "entrypoint": entrypoint,
            "submissionMode": "HTTPMode",
            # As the operator's: KubeRay refuses to suspend a RayJob that keeps its cluster.
            "shutdownAfterJobFinishes": True,
            "backoffLimit": 0,
            "rayClusterSpec": {
                "rayVersion": "2.46.0",
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": pod}},
            },
        },
    }


def deployment_is(*statuses: str) -> Callable[[dict[str, Any]], bool]:
    return lambda obj: (obj.get("status") or {}).get("jobDeploymentStatus") in statuses


def job_status_is(status: str) -> Callable[[dict[str, Any]], bool]:
    return lambda obj: (obj.get("status") or {}).get("jobStatus") == status


def real_job(job_api: RayJobAPI, namespace: str, timeout: float = 60) -> dict[str, Any]:
    """The namespace's real job once the real head has it (its view is built, its workdir known)."""
    deadline = time.monotonic() + timeout
    while True:
        jobs = [j for j in job_api.jobs(namespace) if j.get("backend") == "real"]
        if jobs and jobs[0]["phase"] != "preparing":
            return jobs[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"no real job reached the real head from {namespace} in {timeout} s: {jobs}")
        time.sleep(0.5)


def ray_logs(job_api: RayJobAPI, job: dict[str, Any]) -> str:
    """The job's logs as `ray job logs` would fetch them from the head service, through the job API."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": job_api.base_url}))
    url = f"http://{job['host']}/api/jobs/{job['submission_id']}/logs"
    with opener.open(url, timeout=10) as response:
        return json.loads(response.read())["logs"]


@pytest.fixture
def real_namespace(namespace: str, job_api: RayJobAPI) -> str:
    job_api.configure_namespace(namespace, backend="real")
    return namespace


def test_the_entrypoint_runs_in_the_head_pods_view(
    cluster: Cluster, real_namespace: str, job_api: RayJobAPI
) -> None:
    ns, token = real_namespace, f"s3cr3t-{os.getpid()}"
    cluster.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "spec"},
                "data": {"job.json": '{"steps": 2}'},
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "status"},
                "data": {"phase": "new"},
            },
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "creds"},
                "stringData": {"API_TOKEN": token},
            },
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
            },
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "trainer"}},
            # What the job may do: patch its status ConfigMap, nothing else.
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "trainer"},
                "rules": [
                    {
                        "apiGroups": [""],
                        "resources": ["configmaps"],
                        "resourceNames": ["status"],
                        "verbs": ["get", "patch"],
                    }
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "trainer"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "trainer"},
                "subjects": [{"kind": "ServiceAccount", "name": "trainer", "namespace": ns}],
            },
        ],
        namespace=ns,
    )
    cluster.wait_for("pvc", "data", ns, lambda pvc: pvc["status"].get("phase") == "Bound", what="Bound")
    env = [
        {"name": "PROBE", "value": PROBE},
        {"name": "KUBECTL", "value": cluster.kubectl_path},
        {"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "API_TOKEN"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        # Expanded as the kubelet does: from the names defined above it.
        {"name": "GREETING", "value": "hello from $(POD_NAMESPACE)"},
    ]
    volumes = [
        {"name": "spec", "configMap": {"name": "spec", "items": [{"key": "job.json", "path": "job.json"}]}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "shm", "emptyDir": {"medium": "Memory"}},
    ]
    mounts = [
        {"name": "spec", "mountPath": "/grpo/spec", "readOnly": True},
        {"name": "data", "mountPath": "/data"},
        {"name": "shm", "mountPath": "/dev/shm"},
    ]
    started = time.monotonic()
    cluster.apply(
        rayjob(
            "probe", 'python -c "$PROBE"', env=env, volumes=volumes, mounts=mounts, service_account="trainer"
        ),
        namespace=ns,
    )

    done = cluster.wait_for(
        "rayjob", "probe", ns, deployment_is("Complete", "Failed"), timeout=120, what="an ending"
    )
    job = real_job(job_api, ns)
    assert done["status"]["jobStatus"] == "SUCCEEDED", (done["status"], ray_logs(job_api, job))
    print(f"RayJob created -> Complete in {time.monotonic() - started:.1f} s")

    claim = cluster.get("pvc", "data", ns)
    volume = cluster.get("pv", claim["spec"]["volumeName"])
    result = json.loads((Path(volume["spec"]["hostPath"]["path"]) / "out.json").read_text())
    assert result == {
        "spec": {"steps": 2},
        "whoami": f"system:serviceaccount:{ns}:trainer",
        "patched": True,
        "can_list_secrets": "no",
        "greeting": f"hello from {ns}",
    }
    assert cluster.get("configmap", "status", ns)["data"] == {"phase": "done"}
    assert f"API_TOKEN={token}" in ray_logs(job_api, job)
    [submission] = job_api.submissions(ns)
    assert submission["entrypoint"] == 'python -c "$PROBE"'  # what KubeRay sent, passed on unchanged
    assert job["status"] == "SUCCEEDED"


def test_a_failing_entrypoint_fails_the_rayjob_with_its_exit_code(
    cluster: Cluster, namespace: str, job_api: RayJobAPI
) -> None:
    # The namespace label is how `make demo` would route a namespace; the control API wins over it.
    cluster.kubectl("label", "namespace", namespace, "grpo.dev/ray-backend=real")
    cluster.apply(rayjob("exits", "echo about to fail; exit 3"), namespace=namespace)

    failed = cluster.wait_for("rayjob", "exits", namespace, deployment_is("Complete", "Failed"), timeout=120)

    assert failed["status"]["jobDeploymentStatus"] == "Failed"
    assert failed["status"]["jobStatus"] == "FAILED"
    assert "exit code 3" in failed["status"]["message"]
    assert real_job(job_api, namespace)["backend"] == "real"


def test_a_view_that_cannot_be_built_fails_the_rayjob_with_the_reason(
    cluster: Cluster, real_namespace: str
) -> None:
    env = [{"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "API_TOKEN"}}}]
    cluster.apply(rayjob("no-secret", "true", env=env), namespace=real_namespace)

    failed = cluster.wait_for(
        "rayjob", "no-secret", real_namespace, deployment_is("Complete", "Failed"), timeout=90
    )

    assert failed["status"]["jobStatus"] == "FAILED"
    assert f"Secret {real_namespace}/absent not found" in failed["status"]["message"]


def _running_sleeper(cluster: Cluster, namespace: str, job_api: RayJobAPI, name: str) -> str:
    """Start `sleep 600` as a RayJob; its processes' env entry once the RayJob reports RUNNING."""
    cluster.apply(rayjob(name, "sleep 600"), namespace=namespace)
    cluster.wait_for("rayjob", name, namespace, job_status_is("RUNNING"), timeout=120, what="RUNNING")
    entry = f"GRPO_WORKDIR={real_job(job_api, namespace)['workdir']}"
    deadline = time.monotonic() + 30
    while not processes_with_env(entry):  # RUNNING comes a moment before the entrypoint's fork
        assert time.monotonic() < deadline, f"no process carries {entry}"
        time.sleep(0.2)
    return entry


def test_deleting_a_running_rayjob_stops_its_processes(
    cluster: Cluster, real_namespace: str, job_api: RayJobAPI
) -> None:
    entry = _running_sleeper(cluster, real_namespace, job_api, "sleeper")

    cluster.kubectl("delete", "rayjob", "sleeper", "--namespace", real_namespace, "--wait=false")

    wait_no_processes_with_env(entry, timeout=30)
    cluster.wait_gone("rayjob", "sleeper", real_namespace, timeout=60)
    assert real_job(job_api, real_namespace)["status"] == "STOPPED"


def test_suspending_a_running_rayjob_stops_its_processes(
    cluster: Cluster, real_namespace: str, job_api: RayJobAPI
) -> None:
    # KubeRay v1.5.0 does not stop the Ray job on suspend, it deletes the RayCluster: the job API's
    # watcher notices the head is gone, as the job would die with a real head pod.
    entry = _running_sleeper(cluster, real_namespace, job_api, "suspended")

    cluster.kubectl(
        "patch",
        "rayjob",
        "suspended",
        "--namespace",
        real_namespace,
        "--type=merge",
        "-p",
        '{"spec": {"suspend": true}}',
    )

    wait_no_processes_with_env(entry, timeout=30)
    cluster.wait_for("rayjob", "suspended", real_namespace, deployment_is("Suspended"), timeout=60)
