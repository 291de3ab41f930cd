"""The Helm chart as a user installs it, and the identities its release creates.

Only helm and kubectl against the test cluster: the same code drives the local control plane and
kind. Under KWOK the chart's operator pod is "Running" but runs nothing, so the tests run the
operator (and the pre-delete hook's script) out of cluster with the credentials of the chart's
own ServiceAccounts: a token from the TokenRequest API in a kubeconfig of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.cluster import Cluster

REPO = Path(__file__).resolve().parents[2]
# The chart under test; GRPO_E2E_CHART points at another copy (a packaged .tgz, a release candidate).
CHART = Path(os.environ.get("GRPO_E2E_CHART", REPO / "charts" / "grpo-operator"))


def helm_binary(cluster: Cluster) -> str:
    """The helm that hack/build-binaries.sh puts next to kubectl (local and kind backends)."""
    beside_kubectl = Path(cluster.kubectl_path).parent / "helm"
    if beside_kubectl.is_file():
        return str(beside_kubectl)
    found = os.environ.get("HELM") or shutil.which("helm")
    if not found:
        pytest.fail(f"no helm at {beside_kubectl}, $HELM or on PATH: build it with `make cluster-up`")
    return found


@dataclass(frozen=True)
class Helm:
    binary: str
    cluster: Cluster

    def __call__(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [self.binary, "--kubeconfig", str(self.cluster.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result


def documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def only(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind}{f' {name}' if name else ''}, found {len(found)}"
    return found[0]


@dataclass(frozen=True)
class Release:
    """One installed release of the chart."""

    helm: Helm
    name: str
    namespace: str

    def install(self, values: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        # --wait: the install is only done when the Deployment is available, as users see it.
        return self.helm(
            "install",
            self.name,
            str(CHART),
            "--namespace",
            self.namespace,
            "--values",
            "-",
            "--wait",
            "--timeout",
            "120s",
            input=json.dumps(values),
        )

    def upgrade(self, *sets: str) -> subprocess.CompletedProcess[str]:
        args = ["upgrade", self.name, str(CHART), "--namespace", self.namespace, "--reuse-values"]
        for item in sets:
            args += ["--set", item]
        return self.helm(*args, "--wait", "--timeout", "120s")

    def uninstall(self, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.helm(
            "uninstall",
            self.name,
            "--namespace",
            self.namespace,
            "--wait",
            "--timeout",
            "120s",
            "--ignore-not-found",
            check=check,
        )

    def manifest(self) -> list[dict[str, Any]]:
        """The release's objects as Helm recorded them (hooks and CRDs excluded)."""
        return documents(self.helm("get", "manifest", self.name, "--namespace", self.namespace).stdout)

    def hooks(self) -> list[dict[str, Any]]:
        return documents(self.helm("get", "hooks", self.name, "--namespace", self.namespace).stdout)

    def revision(self) -> int:
        status = json.loads(self.helm("status", self.name, "-n", self.namespace, "-o", "json").stdout)
        assert status["info"]["status"] == "deployed", status["info"]
        return int(status["version"])

    def deployment(self) -> dict[str, Any]:
        return only(self.manifest(), "Deployment")

    def operator_account(self) -> str:
        """The ServiceAccount the operator pod runs as."""
        return str(self.deployment()["spec"]["template"]["spec"]["serviceAccountName"])

    def settings_configmap(self) -> str:
        volumes = self.deployment()["spec"]["template"]["spec"]["volumes"]
        return str(next(v for v in volumes if v["name"] == "settings")["configMap"]["name"])

    def settings_text(self) -> str:
        """The settings file the operator pod would read, as it is in the cluster now."""
        configmap = self.helm.cluster.get("configmap", self.settings_configmap(), self.namespace)
        assert configmap is not None, f"the settings ConfigMap {self.settings_configmap()} is missing"
        return str(configmap["data"]["settings.yaml"])

    def settings(self) -> dict[str, Any]:
        return dict(yaml.safe_load(self.settings_text()))


def account_kubeconfig(cluster: Cluster, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig that authenticates as ServiceAccount ``namespace/account``, as its pod would."""
    token = cluster.kubectl("create", "token", account, "--namespace", namespace, "--duration=1h").stdout
    view = json.loads(
        cluster.kubectl("config", "view", "--raw", "--minify", "--flatten", "-o", "json").stdout
    )
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test-cluster", "cluster": view["clusters"][0]["cluster"]}],
        "users": [{"name": account, "user": {"token": token.strip()}}],
        "contexts": [
            {"name": account, "context": {"cluster": "test-cluster", "user": account, "namespace": namespace}}
        ],
        "current-context": account,
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def describe(objects: list[dict[str, Any]]) -> list[str]:
    return [f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in objects]


def existing(cluster: Cluster, objects: list[dict[str, Any]]) -> list[str]:
    """Which of these objects (as Helm rendered them) exist in the cluster now."""
    return describe(
        [o for o in objects if cluster.get(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))]
    )
