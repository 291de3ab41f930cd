"""The real node of the cpu pool (hack/node-up.sh), as the tests of real pods name it."""

from __future__ import annotations

import subprocess

from support.cluster import REPO_ROOT

NODE = "real-cpu-0"
# Where a chart value or pod spec pins a pod to it (KWOK's cpu nodes carry the same pool label).
NODE_SELECTOR = {"kubernetes.io/hostname": NODE}


def image_tag() -> str:
    """The tag images/build.sh gives this checkout's images (pyproject's version)."""
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    return next(line.split('"')[1] for line in pyproject.splitlines() if line.startswith("version = "))


def node_up() -> None:
    """hack/node-up.sh: idempotent; the first start imports the images (minutes)."""
    result = subprocess.run(
        ["bash", str(REPO_ROOT / "hack" / "node-up.sh")], capture_output=True, text=True, timeout=1800
    )
    assert result.returncode == 0, (
        f"hack/node-up.sh failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
