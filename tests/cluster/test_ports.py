"""hack/lib.sh's default ports: clusters at different GRPO_PORT_OFFSETs never share one.

Two clusters side by side (the tests' and `make demo`'s at +500, or one per worktree) shift every
default by their offset. A port of one cluster equals a port of another exactly when two defaults
differ by the difference of their offsets: Ray's GCS once sat 4000 above etcd, so a cluster at
+4000 could not start its etcd while one at +0 ran a Ray head.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OFFSETS = range(0, 10001, 500)


def _defaults(offset: int) -> dict[str, int]:
    """Every port variable hack/lib.sh sets, at this offset, the worker range expanded."""
    script = ". hack/lib.sh && set | grep -E '^[A-Z_]+_PORT='"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    env["GRPO_PORT_OFFSET"] = str(offset)
    done = subprocess.run(
        ["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    ports = {name: int(value) for name, value in (line.split("=", 1) for line in done.stdout.split())}
    low, high = ports.pop("RAY_MIN_WORKER_PORT"), ports.pop("RAY_MAX_WORKER_PORT")
    ports.update({f"RAY_WORKER_PORT_{i}": p for i, p in enumerate(range(low, high + 1))})
    return ports


def test_clusters_at_different_offsets_share_no_port() -> None:
    base = _defaults(0)
    assert len(base) > 100, base  # the components' ports and Ray's worker range
    assert len(set(base.values())) == len(base), "two components of one cluster share a port"
    for offset in OFFSETS[1:]:
        shifted = _defaults(offset)
        assert all(shifted[name] == port + offset for name, port in base.items())
        shared = set(base.values()) & set(shifted.values())
        assert not shared, f"a cluster at +{offset} takes ports of one at +0: {sorted(shared)}"
