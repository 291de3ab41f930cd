"""What a user's reward starts dies with its sandbox worker: on retirement, on close, with the trainer.

Both engines call custom rewards through `rewards.sandbox`; each worker leads a process group of
its own and every way it ends kills the group. The reward here forks a sleeper that would
otherwise live ten minutes; each test looks for it by a marker in its command line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from grpo_trainer.rewards import custom
from grpo_trainer.rewards.sandbox import SandboxPool
from support.processes import gone, processes_with

FORKING_FILE = """
import subprocess, sys, time

def compute_score(data_source, solution_str, ground_truth, extra_info=None, marker="", **kwargs):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", marker])
    if solution_str == "hang":
        time.sleep(600)
    return 1.0
"""


@pytest.fixture
def forking_file(tmp_path: Path) -> str:
    path = tmp_path / "forking.py"
    path.write_text(textwrap.dedent(FORKING_FILE))
    return str(path)


def test_a_closed_pool_leaves_no_process_the_reward_started(forking_file: str) -> None:
    marker = f"grpo-sleeper-{uuid.uuid4().hex}"
    pool = SandboxPool(forking_file, "compute_score", size=1)
    pool.start()
    outcome = pool.call(("d", "fine", "", None), {"marker": marker}, time.monotonic() + 10)
    assert outcome.ok
    assert processes_with(marker), "the reward's sleeper should be running while the pool is"
    pool.close()
    assert gone(marker)


def test_a_worker_killed_for_a_timeout_takes_its_children_along(forking_file: str) -> None:
    marker = f"grpo-sleeper-{uuid.uuid4().hex}"
    options = {"custom_path": forking_file, "custom_timeout_s": 1.0, "marker": marker}
    assert custom.compute_score("d", "hang", "", None, **options) == 0.0
    assert gone(marker)
    custom.close_pools()


def test_the_engines_close_leaves_no_process_behind(forking_file: str) -> None:
    marker = f"grpo-sleeper-{uuid.uuid4().hex}"
    options = {"custom_path": forking_file, "custom_workers": 2, "marker": marker}
    assert custom.compute_score_batch(["d"] * 3, ["a", "b", "c"], ["", "", ""], None, **options) == [1.0] * 3
    assert len(processes_with(marker)) == 3
    custom.close_pools()
    assert gone(marker)


def test_when_the_trainer_is_killed_the_workers_and_their_children_go_too(forking_file: str) -> None:
    """SIGKILL leaves the trainer no chance to clean up: the workers' watchdog ends their groups."""
    marker = f"grpo-sleeper-{uuid.uuid4().hex}"
    trainer = textwrap.dedent(
        f"""
        import sys
        from grpo_trainer.rewards import custom
        custom.compute_score("d", "a", "", None, custom_path={forking_file!r}, marker={marker!r})
        print("scored", flush=True)
        sys.stdin.read()
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-c", trainer], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=dict(os.environ)
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == b"scored"
        assert processes_with(marker)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        assert gone(marker, within_s=10.0)
    finally:
        process.kill()
        process.wait()
