"""End-to-end fixtures: the chart installed with helm, and the operator run with its credentials.

Each test module installs one release of the chart (``helm install --wait``) into a namespace of
its own and uninstalls it at the end. Because KWOK runs no container, the operator the release
deploys is started here as a process (tests/integration/operator_process.py) that authenticates
with a token of the release's ServiceAccount and reads the release's settings ConfigMap: the
chart's RBAC and settings are exactly what it gets. Nothing here is specific to the local
backend, so ``GRPO_TEST_CLUSTER=kind`` runs the same tests.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cluster.backend import Cluster
from integration.operator_process import OperatorProcess

from .release import Helm, Release, account_kubeconfig, helm_binary, only

TEST_LABEL = "grpo.dev/test"
# Every namespace this session creates carries it: what a cluster-wide release may act on.
RUN_LABEL = "grpo.dev/e2e-run"
RUN = secrets.token_hex(4)


@pytest.fixture(scope="session")
def helm(cluster: Cluster) -> Helm:
    return Helm(helm_binary(cluster), cluster)


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test (tests/conftest.py's, marked as this session's)."""
    stem = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].rstrip("-")
    name = create_namespace(cluster, stem)
    yield name
    delete_namespace(cluster, name)


def create_namespace(cluster: Cluster, stem: str) -> str:
    """A fresh namespace labelled as the suite's (hack/cluster-down.sh deletes what is left)."""
    name = f"e2e-{stem}-{secrets.token_hex(3)}"
    labels = {TEST_LABEL: "true", RUN_LABEL: RUN}
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
    cluster.wait_for("serviceaccount", "default", name, lambda _: True, timeout=30, what="existence")
    return name


def delete_namespace(cluster: Cluster, name: str) -> None:
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
    if cluster.job_api is not None:
        cluster.job_api.forget_namespace(name)


def foreign_grpojobs(cluster: Cluster) -> list[str]:
    """Live GRPOJobs this session did not create: a cluster-wide release would act on them, and its
    cleanup hook delete them. (Those already being deleted, or in a namespace being deleted, only
    need an operator to let go.)"""
    namespaces = cluster.get("namespaces")["items"]
    skip = {
        ns["metadata"]["name"]
        for ns in namespaces
        if ns["metadata"].get("labels", {}).get(RUN_LABEL) == RUN or ns["metadata"].get("deletionTimestamp")
    }
    items = json.loads(cluster.kubectl("get", "grpojobs", "--all-namespaces", "-o", "json").stdout)["items"]
    return sorted(
        f"{j['metadata']['namespace']}/{j['metadata']['name']}"
        for j in items
        if j["metadata"]["namespace"] not in skip and not j["metadata"].get("deletionTimestamp")
    )


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


def being_deleted(cluster: Cluster, namespaces: list[str] | None) -> list[str]:
    """GRPOJobs with a deletion timestamp, in ``namespaces`` or anywhere."""
    items = json.loads(cluster.kubectl("get", "grpojobs", "--all-namespaces", "-o", "json").stdout)["items"]
    return [
        f"{j['metadata']['namespace']}/{j['metadata']['name']}"
        for j in items
        if j["metadata"].get("deletionTimestamp")
        and (namespaces is None or j["metadata"]["namespace"] in namespaces)
    ]


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


def describe(objects: list[dict[str, Any]]) -> list[str]:
    return [f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in objects]


def existing(cluster: Cluster, objects: list[dict[str, Any]]) -> list[str]:
    """Which of these objects (as Helm rendered them) exist in the cluster now."""
    return describe(
        [o for o in objects if cluster.get(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))]
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if report.failed:
        for name, value in getattr(item, "funcargs", {}).items():
            if isinstance(value, OperatorProcess):
                report.sections.append((f"{name} log (tail)", value.tail(60)))
    return report
