"""A real Kueue controller manager, run out of cluster against the test cluster.

The binary and its CRDs come from the Go module proxy (hack/addons/build-kueue.sh, cached by
version). Kueue runs as a process on this host with the admin kubeconfig, like the operator in
the integration tests, and only its RayJob integration on. How it is made to run there:

- **No webhooks are registered with the API server.** Kueue's webhooks default and validate what
  users write (a RayJob's `suspend`, a ClusterQueue's defaults); its controllers do not need them,
  and the objects the tests create are complete without them (the operator creates every queued
  RayJob suspended itself). Kueue still starts its webhook server, so it gets a self-signed
  certificate in its work folder (`webhook.certDir`).
- **Its own certificate management off** (`internalCertManagement.enable: false`): on, it would
  wait for a webhook Service and webhook configurations to inject a CA into.
- **The metrics certificate**: with certificate management off, Kueue reads its metrics server's
  certificate from a fixed path, /etc/kueue/metrics/certs. Kueue runs in a private mount
  namespace (`unshare --mount`) with an overlay on /etc that holds that folder, so nothing is
  written to the host's /etc.
- **The visibility API off** (`VisibilityOnDemand=false`): it is an aggregated API server of its own.
- **No leader election**, one process.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
API = "kueue.x-k8s.io/v1beta2"
PLURALS = {
    "ResourceFlavor": "resourceflavors.kueue.x-k8s.io",
    "WorkloadPriorityClass": "workloadpriorityclasses.kueue.x-k8s.io",
    "ClusterQueue": "clusterqueues.kueue.x-k8s.io",
}
"""The cluster-scoped kinds a test makes, as `kubectl delete` names them."""


def kueue_dir() -> Path:
    """The built Kueue (bin/kueue, crds/), building it on first use: minutes, with progress."""
    result = subprocess.run(
        ["bash", str(REPO / "hack" / "addons" / "build-kueue.sh")],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"hack/addons/build-kueue.sh failed:\n{result.stdout[-2000:]}{result.stderr[-3000:]}",
            pytrace=False,
        )
    located = subprocess.run(
        ["bash", "-c", '. hack/lib.sh && . hack/addons/lib.sh && printf %s "$KUEUE_DIR"'],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(located.stdout)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _self_signed(into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            *(
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=kueue-local",
            ),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(into / "tls.key"), "-out", str(into / "tls.crt")),
        ],
        check=True,
        capture_output=True,
    )


class KueueProcess:
    """One Kueue controller manager (see the module docstring for how it runs here)."""

    def __init__(self, kubeconfig: Path, workdir: Path, binary: Path) -> None:
        self.workdir = workdir
        self.log_file = workdir / "kueue.log"
        self.health_port = _free_port()
        certs = workdir / "certs"
        _self_signed(certs)
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": "kueue-system",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{_free_port()}"},
            "webhook": {"port": _free_port(), "host": "127.0.0.1", "certDir": str(certs)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "integrations": {"frameworks": ["ray.io/rayjob"]},
        }
        (workdir / "config.yaml").write_text(yaml.safe_dump(config))
        overlay = workdir / "etc"
        start = " && ".join(
            [
                f"mkdir -p {overlay}/upper {overlay}/work",
                f"mount -t overlay overlay -o lowerdir=/etc,upperdir={overlay}/upper,workdir={overlay}/work /etc",
                "mkdir -p /etc/kueue/metrics/certs",
                f"cp {certs}/tls.crt {certs}/tls.key /etc/kueue/metrics/certs/",
                f"exec {shlex.quote(str(binary))} --config={workdir / 'config.yaml'}"
                " --feature-gates=VisibilityOnDemand=false --zap-log-level=3",
            ]
        )
        self.args = ["unshare", "--mount", "--propagation", "private", "sh", "-c", start]
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90) -> None:
        with self.log_file.open("ab") as log:
            self.proc = subprocess.Popen(
                self.args, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kueue exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"kueue was not ready in {timeout:.0f} s:\n{self.tail()}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)

    def tail(self, lines: int = 40) -> str:
        if not self.log_file.exists():
            return ""
        return "".join(self.log_file.read_text(errors="replace").splitlines(keepends=True)[-lines:])


def cluster_queue(
    name: str,
    flavor: str,
    namespace_label: dict[str, str],
    quota: dict[str, str],
    strategy: str = "StrictFIFO",
) -> dict[str, Any]:
    """A ClusterQueue of one flavor with ``quota`` per resource, for namespaces with the label.

    StrictFIFO by default, so the order of admission is the queue's order (priority, then creation
    time). Under BestEffortFIFO (Kueue's default) a Workload that did not fit waits aside and is
    offered freed quota only in Kueue's next requeue batch (1 s later in Kueue 0.17), so one
    created within that second (a retry made at once, say) can be admitted ahead of it."""
    return {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": namespace_label},
            "queueingStrategy": strategy,
            "resourceGroups": [
                {
                    "coveredResources": sorted(quota),
                    "flavors": [
                        {
                            "name": flavor,
                            "resources": [{"name": r, "nominalQuota": q} for r, q in sorted(quota.items())],
                        }
                    ],
                }
            ],
        },
    }


def workloads_of(cluster: Any, namespace: str, rayjob: str) -> list[dict[str, Any]]:
    """The Kueue Workloads a RayJob owns."""
    items = cluster.get("workloads.kueue.x-k8s.io", namespace=namespace)["items"]
    return [
        w
        for w in items
        if any(
            ref.get("kind") == "RayJob" and ref.get("name") == rayjob
            for ref in w["metadata"].get("ownerReferences", [])
        )
    ]


def admitted(workload: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Admitted" and c["status"] == "True"
        for c in (workload.get("status") or {}).get("conditions", [])
    )


def finished(workload: dict[str, Any]) -> str:
    """The reason Kueue finished the Workload (Succeeded, Failed...), so released its quota; empty
    while it has not."""
    return next(
        (
            c.get("reason", "")
            for c in (workload.get("status") or {}).get("conditions", [])
            if c["type"] == "Finished" and c["status"] == "True"
        ),
        "",
    )


def release(
    cluster: Any, namespaces: list[str], cluster_scoped: list[dict[str, Any]], timeout: float = 90
) -> None:
    """Take a test's Kueue objects down while Kueue still runs, so that nothing is left behind.

    Workloads, ClusterQueues and ResourceFlavors carry Kueue's finalizer
    (`kueue.x-k8s.io/resource-in-use`), which only a running Kueue removes: a namespace deleted
    after the controller has stopped stays Terminating for good with its Workloads, and so do the
    queue and the flavor they used. So the GRPOJobs go first (their RayJobs and Workloads follow),
    then the cluster-scoped objects, each waited for."""
    for ns in namespaces:
        cluster.kubectl("delete", "grpojobs", "--all", "-n", ns, "--wait=false", check=False)
    deadline = time.monotonic() + timeout
    _wait_gone(
        lambda: [
            f"Workload {ns}/{w['metadata']['name']}"
            for ns in namespaces
            for w in cluster.get("workloads.kueue.x-k8s.io", namespace=ns)["items"]
        ],
        deadline,
    )
    for obj in reversed(cluster_scoped):
        cluster.kubectl("delete", PLURALS[obj["kind"]], obj["metadata"]["name"], "--wait=false", check=False)
    _wait_gone(
        lambda: [
            f"{obj['kind']} {obj['metadata']['name']}"
            for obj in cluster_scoped
            if cluster.get(PLURALS[obj["kind"]], obj["metadata"]["name"]) is not None
        ],
        deadline,
    )


def _wait_gone(remaining: Any, deadline: float) -> None:
    left = remaining()
    while left and time.monotonic() < deadline:
        time.sleep(1)
        left = remaining()
    if left:
        raise AssertionError(f"still there after Kueue's clean-up: {', '.join(left)}")
