"""The kernel's own out-of-memory kill, read as the trainer reads it in a pod.

A memory cgroup of this machine with a 64 MiB limit stands for a trainer container's: a folder
standing for the container's `/` links its `sys/fs/cgroup/memory` (cgroup v1) or `sys/fs/cgroup`
(v2) to that cgroup, as a container sees its own. The engine is a real process that puts a child
in the cgroup, which allocates until the kernel kills it, then exits as verl's main_ppo does when
a Ray worker dies under it. Root is needed to make the cgroup, as for the rest of this tier.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from grpo_trainer.engines.verl import launch
from grpo_trainer.failures import HOST_OUT_OF_MEMORY
from grpo_trainer.host_memory import oom_kills

LIMIT = 64 * 2**20
V1 = Path("/sys/fs/cgroup/memory")
V2 = Path("/sys/fs/cgroup")


@pytest.fixture
def container_root(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(the cgroup, a `/` whose cgroup files are that cgroup's), the cgroup removed after."""
    name = f"grpo-oom-{secrets.token_hex(3)}"
    root = tmp_path / "root"
    if (V2 / "cgroup.controllers").is_file():
        group = V2 / name
        group.mkdir()
        (group / "memory.max").write_text(str(LIMIT))
        if (group / "memory.swap.max").is_file():
            (group / "memory.swap.max").write_text("0")  # killed, not swapped out
        (root / "sys/fs").mkdir(parents=True)
        (root / "sys/fs/cgroup").symlink_to(group)
    else:
        group = V1 / name
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(LIMIT))
        if (group / "memory.memsw.limit_in_bytes").is_file():
            (group / "memory.memsw.limit_in_bytes").write_text(str(LIMIT))  # killed, not swapped out
        (root / "sys/fs/cgroup").mkdir(parents=True)
        (root / "sys/fs/cgroup/memory").symlink_to(group)
    try:
        yield group, root
    finally:
        group.rmdir()  # its only process was killed: the cgroup is empty


def test_a_worker_killed_for_host_memory_is_the_attempts_cause(
    container_root: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    group, root = container_root
    before = oom_kills(root)
    assert before is not None, "no oom_kill count in the cgroup's files"
    assert before.ran_out == "the container's memory limit (64 MiB)"
    worker = (
        "import os\n"
        f"open({str(group / 'cgroup.procs')!r}, 'w').write(str(os.getpid()))\n"
        "held = []\n"
        "while True:\n"
        "    held.append(bytearray(8 * 2**20))\n"
    )
    engine = (
        "import subprocess, sys\n"
        f"code = subprocess.run([sys.executable, '-c', {worker!r}]).returncode\n"
        "print(f'worker ended with {code}')\n"
        "print('ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.')\n"
        "sys.exit(1)\n"
    )
    monkeypatch.setattr(launch, "oom_kills", lambda: oom_kills(root))
    command = [sys.executable, "-c", engine]
    failure = launch.run_engine(launch.VerlLaunch(command, {}, None, None, None))  # type: ignore[arg-type]

    assert "worker ended with -9" in capsys.readouterr().out
    after = oom_kills(root)
    assert after is not None
    assert after.count == before.count + 1
    assert failure is not None
    assert failure.reason == HOST_OUT_OF_MEMORY
    assert failure.message.startswith(
        "the kernel's out-of-memory killer ended a process in the attempt's container during the "
        "attempt: host memory ran out (not device memory), the container's memory limit (64 MiB); "
        "the engine then: ray.exceptions.ActorDiedError"
    )
    assert failure.signature
