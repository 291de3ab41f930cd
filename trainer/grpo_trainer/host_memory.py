"""Whether the kernel's out-of-memory killer ended a process of the attempt, and what memory it had.

A verl worker killed for host memory leaves no exception in the engine's log: Ray says only "The
actor died unexpectedly before finishing this task", which reads as a lost node. Offloading to
host memory (verl's actor and reference `param_offload`, `optimizer_offload`) is what usually
fills it: with a 4B model's actor state and Adam moments, the reference and vLLM's sleeping
weights offloaded, the FSDP worker held 105 GiB of shared pages on a 128 GiB machine when the
kernel killed it in step 1's update.

The kernel counts its kills: per memory cgroup (`memory.events` under cgroup v2, the
`oom_kill` line of `memory.oom_control` under v1; a container sees its own cgroup there), and
machine-wide in `/proc/vmstat` (read only where no cgroup file is readable: outside a container,
whose counts are the machine's anyway). The trainer reads the count before the engine starts and
after it fails; a rise is the cause. Only the processes of this container are seen: a Ray worker
killed on another node of a multi-node job is still reported as a lost node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_CGROUP_V2_EVENTS = "sys/fs/cgroup/memory.events"
_CGROUP_V2_LIMIT = "sys/fs/cgroup/memory.max"
_CGROUP_V1_CONTROL = "sys/fs/cgroup/memory/memory.oom_control"
_CGROUP_V1_LIMIT = "sys/fs/cgroup/memory/memory.limit_in_bytes"
_VMSTAT = "proc/vmstat"
_MEMINFO = "proc/meminfo"
_UNLIMITED = 1 << 60
"""Above this a cgroup v1 limit is the kernel's "no limit" (a page-rounded LONG_MAX)."""


@dataclass(frozen=True)
class OomKills:
    """The kernel's count of out-of-memory kills, where it was read, and what ran out."""

    count: int
    scope: str
    """Where the count comes from: "container" (its memory cgroup) or "machine" (/proc/vmstat)."""
    ran_out: str
    """What ran out, with its size where it can be read: "the container's memory limit (96 GiB)",
    "the node's memory (125.8 GiB)"."""

    def describe(self, killed: int) -> str:
        """One sentence for a failure line: how many processes, and whose memory ran out."""
        processes = "a process" if killed == 1 else f"{killed} processes"
        where = "in the attempt's container" if self.scope == "container" else "on this machine"
        return (
            f"the kernel's out-of-memory killer ended {processes} {where} during the attempt: host "
            f"memory ran out (not device memory), {self.ran_out}"
        )


def oom_kills(root: Path = Path("/")) -> OomKills | None:
    """The count now, or None where no count is readable (a kernel older than 4.13, say)."""
    for events, limit in ((_CGROUP_V2_EVENTS, _CGROUP_V2_LIMIT), (_CGROUP_V1_CONTROL, _CGROUP_V1_LIMIT)):
        count = _field(_read(root / events), "oom_kill")
        if count is not None:
            bound = _limit(_read(root / limit))
            if bound is not None:
                return OomKills(count, "container", f"the container's memory limit ({_size(bound)})")
            return OomKills(count, "container", _node_memory(root, "the node's memory"))
    count = _field(_read(root / _VMSTAT), "oom_kill")
    if count is None:
        return None
    return OomKills(count, "machine", _node_memory(root, "the machine's memory"))


def killed_since(before: OomKills | None, after: OomKills | None) -> int:
    """Kills between two readings of the same counter (0 when either is missing or they differ)."""
    if before is None or after is None or before.scope != after.scope:
        return 0
    return max(0, after.count - before.count)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _field(text: str | None, name: str) -> int | None:
    found = re.search(rf"^{name}\s+(\d+)\s*$", text or "", re.MULTILINE)
    return int(found[1]) if found else None


def _limit(text: str | None) -> int | None:
    value = (text or "").strip()
    if not value.isdigit() or int(value) >= _UNLIMITED:
        return None  # "max" (v2) or v1's unlimited: the container may use the node's memory
    return int(value)


def _node_memory(root: Path, what: str) -> str:
    total = re.search(r"^MemTotal:\s+(\d+) kB", _read(root / _MEMINFO) or "", re.MULTILINE)
    return f"{what} ({_size(int(total[1]) * 1024)})" if total else what


def _size(size: int) -> str:
    if size < 2**30:
        return f"{size // 2**20} MiB"
    return f"{size / 2**30:.1f}".removesuffix(".0") + " GiB"
