"""`kubectl grpo dashboard`: the job's Ray dashboard on this machine, through `kubectl port-forward`.

The operator records the dashboard's in-cluster address (status.dashboardURL, KubeRay's
`<head-svc>.<namespace>.svc.cluster.local:8265`), which only pods can reach. The plugin runs
kubectl's own port-forward to the head's Service with the same kubeconfig and context, so the
user's rights and the cluster's proxying are kubectl's, not ours. Before it does, the plugin looks
for the Ray cluster's head pod itself, so a job whose head is missing or not running yet gets a
line naming that pod and why, not kubectl's message about a Service it could not forward.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any
from urllib.parse import urlsplit

from .cluster import PluginError

RAY_DASHBOARD_PORT = 8265
# KubeRay names the head's Service after the RayCluster.
HEAD_SERVICE_SUFFIX = "-head-svc"


def dashboard_service(name: str, body: dict[str, Any]) -> tuple[str, int]:
    """The head Service and port of the job's current Ray cluster (from its status)."""
    status = body.get("status") or {}
    url = status.get("dashboardURL") or ""
    if url:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.hostname:
            return parts.hostname.split(".")[0], parts.port or RAY_DASHBOARD_PORT
    if status.get("rayClusterName"):
        return status["rayClusterName"] + HEAD_SERVICE_SUFFIX, RAY_DASHBOARD_PORT
    phase = status.get("phase") or "not reconciled yet"
    raise PluginError(
        f"grpojob {name} has no Ray cluster now ({phase}): the dashboard lives with the cluster; "
        f"`kubectl grpo logs {name}` and `kubectl grpo plot {name}` read what the job left"
    )


def head_labels(body: dict[str, Any]) -> dict[str, str] | None:
    """The labels KubeRay gives the head pod of the job's current Ray cluster (None: no cluster)."""
    status = body.get("status") or {}
    cluster = status.get("rayClusterName")
    if not cluster:
        service = (status.get("dashboardURL") or "").split(".")[0]
        cluster = service.removesuffix(HEAD_SERVICE_SUFFIX) if service.endswith(HEAD_SERVICE_SUFFIX) else ""
    return {"ray.io/cluster": cluster, "ray.io/node-type": "head"} if cluster else None


def head_problem(name: str, body: dict[str, Any], pods: list[dict[str, Any]]) -> str | None:
    """Why the job's Ray head cannot serve its dashboard now, from the head pods found; None when
    one runs."""
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    if any((p.get("status") or {}).get("phase") == "Running" for p in live):
        return None
    status = body.get("status") or {}
    labels = head_labels(body) or {}
    if not live:
        return (
            f"grpojob {name} has no Ray head pod (Ray cluster {labels.get('ray.io/cluster')}, job "
            f"{status.get('phase') or 'not reconciled yet'}): KubeRay has not created it yet, or it is being replaced"
        )
    pod = live[0]
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    return (
        f"the Ray head pod {pod['metadata']['name']} of grpojob {name} is not running ({phase}: {_why(pod)})"
    )


def _why(pod: dict[str, Any]) -> str:
    """The scheduler's or kubelet's one-line reason a pod is not running."""
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting")
        if waiting:
            return " ".join(str(waiting.get("message") or waiting.get("reason") or "waiting").split())
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return " ".join(str(condition.get("message") or condition.get("reason")).split())
    return "not scheduled yet" if not (pod.get("spec") or {}).get("nodeName") else "starting"


def kubectl_binary() -> str:
    """The kubectl that runs this plugin ($KUBECTL wins), else the first on PATH."""
    found = os.environ.get("KUBECTL") or shutil.which("kubectl")
    if not found:
        raise PluginError("the dashboard is forwarded by kubectl, and no kubectl is on PATH (or $KUBECTL)")
    return found


def port_forward_command(
    namespace: str,
    service: str,
    *,
    remote: int,
    local: int,
    address: str,
    kubeconfig: str | None,
    context: str | None,
) -> list[str]:
    command = [kubectl_binary(), "port-forward", "-n", namespace, f"svc/{service}", f"{local}:{remote}"]
    command += ["--address", address]
    command += ["--kubeconfig", kubeconfig] if kubeconfig else []
    command += ["--context", context] if context else []
    return command


def forward(
    namespace: str,
    service: str,
    *,
    remote: int,
    local: int,
    address: str,
    kubeconfig: str | None,
    context: str | None,
) -> int:
    """Runs the port-forward until Ctrl-C; prints the local URL once kubectl listens."""
    command = port_forward_command(
        namespace,
        service,
        remote=remote,
        local=local,
        address=address,
        kubeconfig=kubeconfig,
        context=context,
    )
    with tempfile.TemporaryFile(mode="w+") as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
        try:
            _announce(process, namespace, service)
            code = process.wait()
        except KeyboardInterrupt:
            process.terminate()
            process.wait(timeout=10)
            return 0
        if code:
            errors.seek(0)
            lines = [line.strip() for line in errors.read().splitlines() if line.strip()]
            why = lines[-1].removeprefix("error: ") if lines else f"kubectl exited with {code}"
            raise PluginError(f"cannot forward the Ray dashboard (svc/{service} in {namespace}): {why}")
    return 0


def _announce(process: subprocess.Popen[str], namespace: str, service: str) -> None:
    """The URL, from kubectl's "Forwarding from 127.0.0.1:PORT -> 8265" (the port may be one it chose)."""
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("Forwarding from") and "->" in line:
            where = line.split()[2]
            host = where.rsplit(":", 1)[0].strip("[]")
            port = where.rsplit(":", 1)[1]
            host = "localhost" if host in ("127.0.0.1", "::1") else host
            print(
                f"Ray dashboard (svc/{service} in {namespace}): http://{host}:{port}  (Ctrl-C stops)",
                flush=True,
            )
            break
    for _ in process.stdout:  # "Handling connection for ..." lines: kubectl's chatter, not the user's
        pass
    sys.stdout.flush()
