"""`python -m benchmarks.verl_gpu start --sample-stacks S`: the start-up's stacks, and none of the steps.

A verl attempt spends minutes in four Python processes before its first step; the phase marks in
its output say how long, not where. The supervisor samples the stack of every Python process
under the attempt's command with py-spy until verl's first step line, so a GPU lease's start-up
can be split by what each process was doing, while the steps (what runs are compared on) run
unsampled. Here a real py-spy samples a real process tree: a parent and the child it starts,
each in a function named for its phase.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
import time
from pathlib import Path

import pytest

from benchmarks.verl_gpu import attempts, monitor, stack, stacks


@pytest.fixture(autouse=True)
def _no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    # The supervisor stops the machine's Ray after an attempt; this machine's may be a test's own.
    monkeypatch.setattr(attempts, "stop_ray", lambda: None)


# Scripts in files, not `-c`: a process's title (its command line) is in the samples too.
ATTEMPT = textwrap.dedent(
    """
    import subprocess, sys, time
    from pathlib import Path

    def parent_starting_up():
        child = subprocess.Popen([sys.executable, str(Path(__file__).with_name("child.py"))])
        time.sleep(2.0)
        print("step:1 - timing_s/step:2.0", flush=True)
        return child

    def parent_stepping(child):
        child.wait()
        time.sleep(0.5)

    parent_stepping(parent_starting_up())
    """
)
CHILD = textwrap.dedent(
    """
    import time

    def child_starting_up():  # on past the parent's first step: a sample can only catch it here
        time.sleep(4.0)

    def child_stepping():
        time.sleep(1.0)

    child_starting_up()
    child_stepping()
    """
)


def test_py_spy_is_installed() -> None:
    """The development install carries py-spy (pyproject's dev extra), so the sampler's test runs."""
    found = stack.py_spy()
    assert found is not None
    assert Path(found).name == "py-spy"


def test_start_up_is_sampled_in_every_process_until_the_first_step(tmp_path: Path) -> None:
    folder = tmp_path / "attempt-1"
    folder.mkdir()
    (tmp_path / "attempt.py").write_text(ATTEMPT)
    (tmp_path / "child.py").write_text(CHILD)
    command = [sys.executable, str(tmp_path / "attempt.py")]
    (folder / "command.json").write_text(json.dumps({"command": command, "env": {}, "sample_every": 0.25}))
    assert attempts.supervise(folder) == 0

    stacks = (folder / "stacks.log").read_text()
    samples = re.findall(r"^=== \[\s*([\d.]+)s\] pid (\d+) ", stacks, flags=re.M)
    assert samples, stacks[:2000]
    assert len({pid for _, pid in samples}) == 2, "the attempt's process and its child"
    assert "parent_starting_up" in stacks
    assert "child_starting_up" in stacks
    # The first step's line stops the sampling: neither process's stepping is in it.
    assert "parent_stepping" not in stacks
    assert "child_stepping" not in stacks
    first_step = float(re.search(r"\[\s*([\d.]+)s\] step:1", (folder / "output.log").read_text())[1])
    assert max(float(stamp) for stamp, _ in samples) <= first_step + 0.5


def test_no_sampling_unless_asked(tmp_path: Path) -> None:
    folder = tmp_path / "attempt-1"
    folder.mkdir()
    (folder / "command.json").write_text(
        json.dumps({"command": [sys.executable, "-c", "print('step:1 - ')"], "env": {}})
    )
    assert attempts.supervise(folder) == 0
    assert not (folder / "stacks.log").exists()


def test_only_the_attempts_own_processes() -> None:
    """Another Python process on the machine (here: this test's) is not the attempt's."""
    import subprocess

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            found = monitor.sampled_processes(child.pid)
            if found:
                break
        assert [pid for pid, _ in found] == [child.pid]
        assert all(pid != child.pid for pid, _ in monitor.sampled_processes(1 << 22))
    finally:
        child.kill()
        child.wait()


# Two samples of two processes, as py-spy's `dump` writes them (paths shortened).
SAMPLED = """=== [     5.0s] pid 11 ray::IDLE
Process 11: ray::IDLE
Python v3.12.3 (/usr/bin/python3.12)

Thread 11 (active+gil): "MainThread"
    _call_with_frames_removed (<frozen importlib._bootstrap>:488)
    SourceLoader.source_to_code (<frozen importlib._bootstrap_external>:1059)
    _find_and_load (<frozen importlib._bootstrap>:1360)
    <module> (/tmp/gpu-stack/site-packages/verl/protocol.py:30)

=== [     5.0s] pid 12 ray::WorkerDict
Process 12: ray::WorkerDict
Python v3.12.3 (/usr/bin/python3.12)

Thread 12 (idle): "MainThread"
    Worker.main_loop (/tmp/gpu-stack/site-packages/ray/_private/worker.py:946)
Thread 40 (active): "AsyncIO Thread: default"
    _move_states_to_device (/opt/torch/.venv/lib/python3.12/site-packages/torch/distributed/fsdp/_fsdp_init.py:321)
    apply_fsdp2 (/tmp/gpu-stack/site-packages/verl/utils/fsdp_utils.py:595)
    ActorRolloutRefWorker.init_model (/tmp/gpu-stack/site-packages/verl/workers/engine_workers.py:588)

=== [    10.1s] pid 11 ray::TaskRunnerV1.run
Process 11: ray::TaskRunnerV1.run
Python v3.12.3 (/usr/bin/python3.12)

Thread 11 (idle): "MainThread"
    Worker.main_loop (/tmp/gpu-stack/site-packages/ray/_private/worker.py:946)

=== [    10.1s] pid 12 ray::WorkerDict.actor_rollout_ref_init_model
Process 12: ray::WorkerDict.actor_rollout_ref_init_model
Python v3.12.3 (/usr/bin/python3.12)

Thread 40 (active): "AsyncIO Thread: default"
    reset_sharded_param (/opt/torch/.venv/lib/python3.12/site-packages/torch/distributed/fsdp/_fsdp_param.py:800)
    apply_fsdp2 (/tmp/gpu-stack/site-packages/verl/utils/fsdp_utils.py:600)
"""


def test_the_stacks_read_back_as_what_each_process_did() -> None:
    """`stacks`: a run of one activity per process (idle left out), verl's own frame named with
    its file under the packages folder, and the import samples counted."""
    lines = stacks.stacks_report(SAMPLED)
    assert lines == [
        "    5.0 –     5.0 s  pid 11      ray::IDLE                                 importing: compiling source (1)",
        "    5.0 –    10.1 s  pid 12      ray::WorkerDict                           apply_fsdp2 (verl/utils/fsdp_utils.py) (2)",
        "4 samples, 3 busy: 1 importing, 1 of them compiling source",
    ]
