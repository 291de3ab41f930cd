"""The Kubernetes cluster a test session runs against, and small kubectl helpers for tests.

``GRPO_TEST_CLUSTER`` picks the backend:

- ``local`` (default): the control plane built by hack/cluster-up.sh, started here if it is not
  running yet (``make test`` starts it first). If it cannot start, every cluster test errors.
- ``kind``: a kind cluster prepared by hack/kind-up.sh (``make e2e-kind``); needs Docker.
- ``existing``: ``$KUBECONFIG`` as it is; the suite creates only its own namespaces there. The
  fake Ray job API is used when ``GRPO_RAYJOBAPI_URL`` names one.

The local and kind backends describe themselves in ``<state dir>/cluster.env`` (written by the hack/
scripts): kubeconfig, kubectl, the Ray job API's URL, the real Ray head's dashboard URL and the
component log folder.
"""

from __future__ import annotations

import collections
import json
import os
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_operator.api.v1alpha1 import GROUP, PLURAL

from .hack_env import kind_variable, lib_variable
from .rayjobapi import RayJobAPI

REPO_ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("local", "kind", "existing")


class ClusterUnavailableError(RuntimeError):
    """The chosen backend could not be started or reached."""


@dataclass(frozen=True)
class Cluster:
    """One reachable cluster: what tests need to talk to it and to diagnose it."""

    backend: str
    kubeconfig: Path
    kubectl_path: str
    job_api: RayJobAPI | None
    log_dir: Path | None
    # The real Ray head the job API forwards real jobs to (local and kind backends).
    ray_dashboard_url: str | None = None

    @property
    def env(self) -> dict[str, str]:
        """Environment for subprocesses (helm, the operator) aimed at this cluster."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster; raise with its stderr when it fails and ``check``."""
        result = subprocess.run(
            [self.kubectl_path, "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {shlex.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result

    def get(self, resource: str, name: str | None = None, namespace: str | None = None) -> Any:
        """``kubectl get -o json``; None when the named object does not exist."""
        args = ["get", resource, *([name] if name else []), "-o", "json"]
        if namespace:
            args += ["--namespace", namespace]
        result = self.kubectl(*args, check=False)
        if result.returncode != 0:
            if name and "NotFound" in result.stderr:
                return None
            raise AssertionError(f"kubectl {shlex.join(args)} failed:\n{result.stderr}")
        return json.loads(result.stdout)

    def apply(self, manifest: dict[str, Any] | list[dict[str, Any]], namespace: str | None = None) -> None:
        """Server-side apply of one or several objects (as dicts).

        Sent as JSON (a `List` for several): PyYAML writes a string such as a random `482e87` bare,
        and kubectl's YAML 1.2 reads that back as the number 4.82e+89.
        """
        documents = manifest if isinstance(manifest, list) else [manifest]
        body = (
            documents[0] if len(documents) == 1 else {"apiVersion": "v1", "kind": "List", "items": documents}
        )
        args = ["apply", "--server-side", "--field-manager=grpo-tests", "-f", "-"]
        if namespace:
            args += ["--namespace", namespace]
        self.kubectl(*args, input=json.dumps(body))

    def wait_for(
        self,
        resource: str,
        name: str,
        namespace: str | None,
        condition: Callable[[dict[str, Any]], bool],
        *,
        timeout: float = 60,
        what: str = "the condition",
    ) -> dict[str, Any]:
        """Poll an object until ``condition(obj)`` holds; fail with the last state seen."""
        deadline = time.monotonic() + timeout
        obj = None
        while True:
            obj = self.get(resource, name, namespace)
            if obj is not None and condition(obj):
                return obj
            if time.monotonic() > deadline:
                state = json.dumps((obj or {}).get("status"), indent=1) if obj else "(not found)"
                raise AssertionError(
                    f"{resource}/{name} did not reach {what} in {timeout} s; status:\n{state}"
                )
            time.sleep(0.5)

    def wait_gone(self, resource: str, name: str, namespace: str | None, *, timeout: float = 60) -> None:
        """Poll until the object no longer exists."""
        deadline = time.monotonic() + timeout
        while self.get(resource, name, namespace) is not None:
            if time.monotonic() > deadline:
                raise AssertionError(f"{resource}/{name} still exists after {timeout} s")
            time.sleep(0.5)

    def install_crds(self, document: dict[str, Any] | None = None) -> None:
        """Apply our CRD as an install or an upgrade does (this release's, or `document` in its
        place) and wait until the API server serves it. One field manager for both, so a rule that
        `document` leaves out is removed, as an upgrade to it would."""
        apply = ("apply", "--server-side", "--force-conflicts", "-f")
        if document is None:
            self.kubectl(*apply, str(REPO_ROOT / "crds"))
        else:
            self.kubectl(*apply, "-", input=json.dumps(document))
        self.kubectl("wait", "--for=condition=Established", f"crd/{PLURAL}.{GROUP}", "--timeout=60s")

    def events(self, namespace: str) -> list[dict[str, Any]]:
        return self.get("events", namespace=namespace)["items"]

    def log_tails(self, lines: int = 20, width: int = 400) -> dict[str, str]:
        """The last lines of every component's log (local and kind backends), long lines cut."""
        if self.log_dir is None or not self.log_dir.is_dir():
            return {}
        tails = {}
        for log in sorted(self.log_dir.glob("*.log")):
            with log.open(errors="replace") as f:
                last = collections.deque(f, maxlen=lines)
            # KubeRay logs whole objects on one line: keep the start of each.
            tails[log.stem] = "".join(
                line if len(line) <= width else line[:width] + " [...]\n" for line in last
            )
        return tails


def read_env_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition("=")
        values[key] = shlex.split(value)[0] if value else ""
    return values


def _from_env_file(backend: str, path: Path) -> Cluster:
    values = read_env_file(path)
    return Cluster(
        backend=backend,
        kubeconfig=Path(values["KUBECONFIG"]),
        kubectl_path=values["KUBECTL"],
        job_api=RayJobAPI(values["RAYJOBAPI_URL"]),
        log_dir=Path(values["LOG_DIR"]),
        ray_dashboard_url=values.get("RAY_DASHBOARD_URL"),
    )


def _run_script(script: str) -> None:
    result = subprocess.run(["bash", str(REPO_ROOT / "hack" / script)], capture_output=True, text=True)
    if result.returncode != 0:
        raise ClusterUnavailableError(
            f"hack/{script} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
        )


def connect(backend: str | None = None) -> Cluster:
    """The cluster of the chosen backend, starting the local one if needed."""
    backend = backend or os.environ.get("GRPO_TEST_CLUSTER", "local")
    if backend == "local":
        # Idempotent and quick when the cluster already runs (make test starts it first).
        _run_script("cluster-up.sh")
        return _from_env_file(backend, Path(lib_variable("CLUSTER_DIR")) / "cluster.env")
    if backend == "kind":
        env_file = Path(kind_variable("KIND_CLUSTER_DIR")) / "cluster.env"
        if not env_file.is_file():
            raise ClusterUnavailableError(
                f"{env_file} is missing: run `make e2e-kind` (hack/kind-up.sh) first"
            )
        return _from_env_file(backend, env_file)
    if backend == "existing":
        kubeconfig = os.environ.get("KUBECONFIG")
        if not kubeconfig:
            raise ClusterUnavailableError("GRPO_TEST_CLUSTER=existing needs KUBECONFIG")
        url = os.environ.get("GRPO_RAYJOBAPI_URL")
        return Cluster(
            backend=backend,
            kubeconfig=Path(kubeconfig),
            kubectl_path=os.environ.get("KUBECTL", "kubectl"),
            job_api=RayJobAPI(url) if url else None,
            log_dir=None,
        )
    raise ClusterUnavailableError(f"GRPO_TEST_CLUSTER={backend!r} is not one of {BACKENDS}")
