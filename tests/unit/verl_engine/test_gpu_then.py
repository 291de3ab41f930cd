"""`benchmarks/verl_gpu.py start A --then B`: B starts, with A's options, once A's supervisor has exited.

A comparison's two runs used to be started by two device calls, and a call that waited for the
first and then started the second ran past the call's limit and lost the lease. The chain runs
on the GPU machine itself; what CPU can check is the command line it hands on and that it waits
for the first attempt's supervisor (not only its exit code: the supervisor stops Ray after it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

import pytest
from support.scripts import load_script

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "verl_gpu.py"


@pytest.fixture
def verl_gpu() -> ModuleType:
    return load_script(SCRIPT, "verl_gpu_then_under_test")


def test_the_next_part_gets_the_same_options(verl_gpu: ModuleType) -> None:
    given = ["start", "raw-4b", "--response-length", "512", "--then", "shapes-4b", "--steps", "3"]
    assert verl_gpu.then_argv(given, "raw-4b", "shapes-4b") == [
        "start",
        "shapes-4b",
        "--response-length",
        "512",
        "--steps",
        "3",
    ]
    assert verl_gpu.then_argv(["start", "--then=shapes-4b", "raw-4b"], "raw-4b", "shapes-4b") == [
        "start",
        "shapes-4b",
    ]


def test_the_same_part_chains_its_next_attempt(verl_gpu: ModuleType) -> None:
    """A cold attempt and its retry back to back: `start shapes-4b --then shapes-4b`."""
    given = ["start", "shapes-4b", "--steps", "1", "--then", "shapes-4b", "--attempt", "1"]
    assert verl_gpu.then_argv(given, "shapes-4b", "shapes-4b", 1) == [
        "start",
        "shapes-4b",
        "--steps",
        "1",
        "--attempt",
        "2",
    ]
    assert verl_gpu.then_argv(["start", "tiny", "--attempt=2", "--then=tiny"], "tiny", "tiny", 2)[-2:] == [
        "--attempt",
        "3",
    ]


def test_the_chain_waits_for_the_supervisor_then_starts(
    verl_gpu: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "attempt-1"
    folder.mkdir()
    (folder / "then.json").write_text(json.dumps({"argv": ["start", "shapes-4b", "--steps", "3"]}))
    supervisor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    (folder / "pid").write_text(str(supervisor.pid))
    (folder / "rc").write_text("0")  # written before the supervisor stops Ray: not yet the end
    started: list[tuple[list[str], float]] = []
    monkeypatch.setattr(verl_gpu, "THEN_POLL_S", 0.1)

    def start(argv: list[str]) -> int:
        started.append((argv, time.monotonic()))
        return 0

    monkeypatch.setattr(verl_gpu, "main", start)
    began = time.monotonic()
    # On the GPU machine the supervisor is reaped by init once the start command has exited; here
    # the test is its parent and reaps it, or it would linger as a zombie that signal 0 still finds.
    threading.Thread(target=supervisor.wait, daemon=True).start()
    assert verl_gpu.run_then(folder) == 0
    assert [argv for argv, _ in started] == [["start", "shapes-4b", "--steps", "3"]]
    assert started[0][1] - began >= 1.0, "started before the first attempt's supervisor had exited"


def test_the_chain_gives_up_on_a_first_attempt_that_never_ends(
    verl_gpu: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "attempt-1"
    folder.mkdir()
    (folder / "then.json").write_text(json.dumps({"argv": ["start", "shapes-4b"]}))
    supervisor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (folder / "pid").write_text(str(supervisor.pid))
        monkeypatch.setattr(verl_gpu, "THEN_POLL_S", 0.05)
        monkeypatch.setattr(verl_gpu, "THEN_LIMIT_S", 0.3)
        monkeypatch.setattr(verl_gpu, "main", lambda argv: pytest.fail("started while the first still ran"))
        assert verl_gpu.run_then(folder) == 1
    finally:
        supervisor.kill()
        supervisor.wait()
