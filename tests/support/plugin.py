"""`kubectl grpo` as a user runs it: kubectl finds `kubectl-grpo` on the PATH, as `pip install`
puts it in a virtualenv's bin/, and the plugin talks to the test cluster with kubectl's config."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.cluster import Cluster

REPO = Path(__file__).resolve().parents[2]


def plugin_path(folder: Path) -> str:
    """A PATH whose first folder (`folder`) holds a `kubectl-grpo` of this checkout's plugin."""
    shim = folder / "kubectl-grpo"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m grpo_kubectl "$@"\n')
    shim.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def kubectl_grpo(
    cluster: Cluster, path: str, *args: str, stdin: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`kubectl grpo ARGS` with `path` as PATH; never raises on the plugin's exit code."""
    env = {
        **cluster.env,
        "PATH": path,
        "PYTHONPATH": os.pathsep.join(str(REPO / p) for p in ("operator", "trainer", "kubectl")),
    }
    return subprocess.run(
        [cluster.kubectl_path, "grpo", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
