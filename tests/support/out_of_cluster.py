"""What the chart deploys, run out of cluster (KWOK pods run nothing): the operator and the
pre-delete cleanup hook, each with its ServiceAccount's token and the configuration the chart
renders for its pod."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from support.cluster import Cluster
from support.operator_process import OperatorProcess

from .namespaces import being_deleted
from .release import Release, account_kubeconfig, only

# "... is forbidden: User "system:serviceaccount:ns:name" cannot patch resource ...", quoted
# as is or escaped inside a JSON log record.
RBAC_DENIED = re.compile(r'forbidden: User \\?"system:serviceaccount:')


def write_settings(release: Release, process: OperatorProcess) -> None:
    """The settings file as the operator pod would find it mounted (the ConfigMap's content), but
    for the two listening ports: out of cluster they must not clash with other processes here."""
    settings = release.settings()
    settings["metricsPort"] = process.metrics_port
    settings["healthPort"] = process.health_port
    Path(process.env["GRPO_OPERATOR_CONFIG"]).write_text(yaml.safe_dump(settings))


def start_operator(cluster: Cluster, release: Release, workdir: Path) -> OperatorProcess:
    """The release's operator, out of cluster, as its ServiceAccount, with its settings file."""
    kubeconfig = account_kubeconfig(
        cluster, release.namespace, release.operator_account(), workdir / "operator.kubeconfig"
    )
    process = OperatorProcess(
        kubeconfig,
        workdir / "operator.log",
        extra_env={"GRPO_OPERATOR_CONFIG": str(workdir / "settings.yaml")},
    )
    # Only the settings file speaks: no GRPO_* override from OperatorProcess or the caller's shell.
    for variable in [v for v in process.env if v.startswith("GRPO_") and v != "GRPO_OPERATOR_CONFIG"]:
        del process.env[variable]
    write_settings(release, process)
    process.start()
    return process


def stop_operator(cluster: Cluster, process: OperatorProcess, namespaces: list[str] | None) -> None:
    """Stop it once the jobs it watches are gone, so that none is left held by its finalizer.

    A test that ends early leaves its jobs behind: in a namespace being deleted, or (``namespaces``
    listed) in one of the module's own, emptied here. Only a running operator lets them go.
    """
    if process.proc is not None and process.proc.poll() is None:
        for namespace in namespaces or []:
            cluster.kubectl(
                "delete", "grpojobs", "--all", "--namespace", namespace, "--wait=false", check=False
            )
        deadline = time.monotonic() + 60
        while being_deleted(cluster, namespaces) and time.monotonic() < deadline:
            time.sleep(1)
    process.stop()


def operator_log(process: OperatorProcess) -> str:
    return process.log_file.read_text(errors="replace") if process.log_file.exists() else ""


def apply_cleanup_hook_objects(cluster: Cluster, release: Release) -> dict[str, Any]:
    """Create the pre-delete hook's ServiceAccount, RBAC and script as `helm uninstall` would
    before its Job; the Job (to run out of cluster) is returned."""
    hooks = release.hooks()
    job = only(hooks, "Job")
    cluster.apply([h for h in hooks if h["kind"] != "Job"])
    return job


def run_cleanup_hook(
    cluster: Cluster, release: Release, job: dict[str, Any], workdir: Path
) -> subprocess.CompletedProcess[str]:
    """Run the hook Job's container out of cluster: its script (from the hook's ConfigMap), its
    environment, and its ServiceAccount's credentials."""
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    script_volume = next(v for v in pod["volumes"] if v["name"] == "script")["configMap"]["name"]
    hook_configmap = cluster.get("configmap", script_volume, release.namespace)
    assert hook_configmap is not None, f"the hook's script ConfigMap {script_volume} is missing"
    script = workdir / "pre_delete.py"
    script.write_text(hook_configmap["data"]["pre_delete.py"])
    kubeconfig = account_kubeconfig(
        cluster, release.namespace, pod["serviceAccountName"], workdir / "cleanup.kubeconfig"
    )
    env = {**cluster.env, **{e["name"]: e["value"] for e in container["env"]}, "KUBECONFIG": str(kubeconfig)}
    timeout = float(env["GRPO_CLEANUP_TIMEOUT"]) + 30
    return subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def assert_operator_log_clean(process: OperatorProcess, namespace: str) -> None:
    """No request of the operator's was refused (the chart's RBAC is enough), and no handler
    failed on the test's objects."""
    log = operator_log(process)
    denied = forbidden_lines(log)
    assert not denied, "the chart's RBAC refused the operator:\n" + "\n".join(denied[:5])
    failed = error_lines(log, namespace)
    assert not failed, f"the operator failed on objects in {namespace}:\n" + "\n".join(failed[:5])


def forbidden_lines(log: str) -> list[str]:
    """Requests the authorizer refused: the API server words every RBAC denial this way."""
    return [line[:500] for line in log.splitlines() if RBAC_DENIED.search(line)]


def error_lines(log: str, namespace: str) -> list[str]:
    """The operator's JSON log records at error level about objects in ``namespace``."""
    found = []
    for line in log.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("severity") not in ("error", "critical"):
            continue
        about = (record.get("object") or {}).get("namespace")
        if about == namespace or namespace in str(record.get("message", "")):
            found.append(str(record.get("message", line))[:500])
    return found
