"""The real node of the cpu pool (hack/node-up.sh), as the tests of real pods name it."""

from __future__ import annotations

import subprocess
import time

from support.cluster import REPO_ROOT, Cluster
from support.hack_env import lib_variable

NODE = "real-cpu-0"
# Where a chart value or pod spec pins a pod to it (KWOK's cpu nodes carry the same pool label).
NODE_SELECTOR = {"kubernetes.io/hostname": NODE}
# Its taint (hack/lib.sh, NODE_TAINT, "key=value:effect"): what a pod meant for it tolerates, so
# that no other test's pod of the cpu pool starts a real container there.
TAINT_KEY, _, _taint_rest = lib_variable("NODE_TAINT").partition("=")
TAINT_EFFECT = _taint_rest.rpartition(":")[2]
TOLERATIONS = [{"key": TAINT_KEY, "operator": "Exists", "effect": TAINT_EFFECT}]


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


# What a pod runs to try ports of an address: one line per port, "open" or why not. A refused or
# timed-out connect is what an enforced NetworkPolicy gives; the ports tried listen, so without a
# policy every one is open.
_REACH = (
    "import socket, sys\n"
    "for port in sys.argv[2:]:\n"
    "    try:\n"
    "        socket.create_connection((sys.argv[1], int(port)), timeout=3).close()\n"
    "        print(port, 'open')\n"
    "    except OSError as e:\n"
    "        print(port, type(e).__name__)\n"
)


def reach(cluster: Cluster, pod: str, namespace: str, address: str, ports: list[int]) -> dict[int, bool]:
    """Which of ``ports`` of ``address`` a connection from pod ``pod`` (its first container,
    which has Python) gets through to, by ``kubectl exec``."""
    out = cluster.kubectl(
        "exec", pod, "--namespace", namespace, "--", "python", "-c", _REACH, address, *map(str, ports)
    ).stdout
    return {int(port): state == "open" for port, state in (line.split() for line in out.splitlines())}


def wait_reach(
    cluster: Cluster,
    pod: str,
    namespace: str,
    address: str,
    expected: dict[int, bool],
    *,
    timeout: float = 60,
) -> None:
    """Until pod ``pod`` reaches exactly the ports of ``expected`` that are True: the enforcer
    rewrites its rules a moment after a policy or a pod changes."""
    deadline = time.monotonic() + timeout
    while (seen := reach(cluster, pod, namespace, address, list(expected))) != expected:
        if time.monotonic() > deadline:
            raise AssertionError(f"from {namespace}/{pod} to {address}: {seen}, expected {expected}")
        time.sleep(2)
