"""A verl worker killed for host memory: the kernel's count of its kills, read from the files a
container (cgroup v2 or v1) or a machine (/proc/vmstat) has, turns "an actor died" into the cause.

The files are written under a folder standing for `/`; the engine is a real child process whose
log is the one a 4B run on a 128 GiB machine left when the kernel killed its FSDP worker.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from grpo_trainer.engines.verl import launch
from grpo_trainer.failures import HOST_OUT_OF_MEMORY, classify_engine_exit
from grpo_trainer.host_memory import OomKills, killed_since, oom_kills

MEMINFO = "MemTotal:       131961972 kB\nMemAvailable:   130414204 kB\n"
# What the engine printed as the kernel killed its FSDP worker (H100, 128 GiB, actor offloaded).
ACTOR_DIED = (
    "(raylet) A worker died or was killed while executing a task by an unexpected system error.\n"
    "Traceback (most recent call last):\n"
    '  File "/site-packages/verl/trainer/ppo/v1/trainer_base.py", line 610, in _step_once\n'
    "    batch = self._update_actor(batch, metrics=metrics)\n"
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
)


def _root(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_cgroup_v2_container_counts_its_own_kills_against_its_limit(tmp_path: Path) -> None:
    root = _root(
        tmp_path,
        {
            "sys/fs/cgroup/memory.events": "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n",
            "sys/fs/cgroup/memory.max": str(96 * 2**30),
            "proc/vmstat": "oom_kill 40\n",  # the node's: other pods' kills are not ours
            "proc/meminfo": MEMINFO,
        },
    )
    seen = oom_kills(root)
    assert seen == OomKills(2, "container", "the container's memory limit (96 GiB)")
    assert seen.describe(1) == (
        "the kernel's out-of-memory killer ended a process in the attempt's container during the "
        "attempt: host memory ran out (not device memory), the container's memory limit (96 GiB)"
    )


def test_a_container_without_a_limit_ran_the_node_out(tmp_path: Path) -> None:
    root = _root(
        tmp_path,
        {
            "sys/fs/cgroup/memory.events": "oom_kill 0\n",
            "sys/fs/cgroup/memory.max": "max\n",
            "proc/meminfo": MEMINFO,
        },
    )
    assert oom_kills(root) == OomKills(0, "container", "the node's memory (125.8 GiB)")


def test_a_cgroup_v1_container_reads_oom_control(tmp_path: Path) -> None:
    root = _root(
        tmp_path,
        {
            "sys/fs/cgroup/memory/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
            "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",  # v1's "no limit"
            "proc/meminfo": MEMINFO,
        },
    )
    assert oom_kills(root) == OomKills(3, "container", "the node's memory (125.8 GiB)")


def test_a_machine_outside_a_container_reads_vmstat(tmp_path: Path) -> None:
    root = _root(tmp_path, {"proc/vmstat": "pgfault 10\noom_kill 1\n", "proc/meminfo": MEMINFO})
    assert oom_kills(root) == OomKills(1, "machine", "the machine's memory (125.8 GiB)")


def test_no_count_anywhere_is_none_and_counts_no_kill(tmp_path: Path) -> None:
    assert oom_kills(_root(tmp_path, {"proc/vmstat": "pgfault 10\n"})) is None
    now = OomKills(4, "machine", "the machine's memory")
    assert killed_since(None, now) == 0
    assert killed_since(now, None) == 0
    assert killed_since(OomKills(1, "container", "x"), now) == 0  # two counters, no difference
    assert killed_since(OomKills(1, "machine", "x"), now) == 3
    assert now.describe(3).startswith("the kernel's out-of-memory killer ended 3 processes on this machine ")


def test_a_kill_for_host_memory_is_the_cause_and_a_repeat_is_not_retried_again() -> None:
    cause = OomKills(1, "machine", "the machine's memory (125.8 GiB)").describe(1)
    failure = classify_engine_exit(1, ACTOR_DIED, cause)
    assert failure.reason == HOST_OUT_OF_MEMORY
    assert failure.retryable
    assert failure.message == (
        f"{cause}; the engine then: ray.exceptions.ActorDiedError: The actor died unexpectedly "
        "before finishing this task."
    )
    assert failure.signature  # the operator stops after two attempts in a row end this way
    assert classify_engine_exit(-9, "", cause).signature == failure.signature
    assert classify_engine_exit(-9, "", cause).message == cause
    # Without the kernel's word the same log is a lost node, as before.
    assert classify_engine_exit(1, ACTOR_DIED).reason == "NodeLost"


def _launch(code: str) -> launch.VerlLaunch:
    return launch.VerlLaunch([sys.executable, "-c", code], {}, None, None, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(("counts", "reason"), [((5, 6), HOST_OUT_OF_MEMORY), ((5, 5), "NodeLost")])
def test_the_engine_run_reads_the_count_before_and_after(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], counts: tuple[int, int], reason: str
) -> None:
    readings = iter(OomKills(n, "machine", "the machine's memory (125.8 GiB)") for n in counts)
    monkeypatch.setattr(launch, "oom_kills", lambda: next(readings))
    failure = launch.run_engine(_launch(f"import sys; print({ACTOR_DIED!r}); sys.exit(1)"))
    assert failure is not None
    assert failure.reason == reason
    assert next(readings, None) is None  # read once before the engine started and once after
    assert "The actor died unexpectedly" in capsys.readouterr().out
