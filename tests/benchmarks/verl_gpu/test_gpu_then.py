"""`python -m benchmarks.verl_gpu start A --then B`: B starts, with A's options, once A's supervisor has exited.

A comparison's two runs used to be started by two device calls, and a call that waited for the
first and then started the second ran past the call's limit and lost the lease. The chain runs
on the GPU machine itself; what CPU can check is the command line it hands on and that it waits
for the first attempt's supervisor (not only its exit code: the supervisor stops Ray after it).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from benchmarks.verl_gpu import chain, cli, machine, summaries


def test_the_next_part_gets_the_same_options() -> None:
    given = ["start", "raw-4b", "--response-length", "512", "--then", "shapes-4b", "--steps", "3"]
    assert chain.then_argv(given, "raw-4b", "shapes-4b") == [
        "start",
        "shapes-4b",
        "--response-length",
        "512",
        "--steps",
        "3",
    ]
    assert chain.then_argv(["start", "--then=shapes-4b", "raw-4b"], "raw-4b", "shapes-4b") == [
        "start",
        "shapes-4b",
    ]


def test_the_same_part_chains_its_next_attempt() -> None:
    """A cold attempt and its retry back to back: `start shapes-4b --then shapes-4b`."""
    given = ["start", "shapes-4b", "--steps", "1", "--then", "shapes-4b", "--attempt", "1"]
    assert chain.then_argv(given, "shapes-4b", "shapes-4b", 1) == [
        "start",
        "shapes-4b",
        "--steps",
        "1",
        "--attempt",
        "2",
    ]
    assert chain.then_argv(["start", "tiny", "--attempt=2", "--then=tiny"], "tiny", "tiny", 2)[-2:] == [
        "--attempt",
        "3",
    ]


def test_the_chain_waits_for_the_supervisor_then_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "attempt-1"
    folder.mkdir()
    (folder / chain.THEN_REQUEST).write_text(json.dumps({"argv": ["start", "shapes-4b", "--steps", "3"]}))
    supervisor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    (folder / "pid").write_text(str(supervisor.pid))
    (folder / "rc").write_text("0")  # written before the supervisor stops Ray: not yet the end
    started: list[tuple[list[str], float]] = []
    monkeypatch.setattr(chain, "THEN_POLL_S", 0.1)

    def start(argv: list[str]) -> int:
        started.append((argv, time.monotonic()))
        return 0

    monkeypatch.setattr(cli, "main", start)
    began = time.monotonic()
    # On the GPU machine the supervisor is reaped by init once the start command has exited; here
    # the test is its parent and reaps it, or it would linger as a zombie that signal 0 still finds.
    threading.Thread(target=supervisor.wait, daemon=True).start()
    assert chain.run_then(folder) == 0
    assert [argv for argv, _ in started] == [["start", "shapes-4b", "--steps", "3"]]
    assert started[0][1] - began >= 1.0, "started before the first attempt's supervisor had exited"
    assert (folder / chain.THEN_STARTED).read_text() == "0"  # what a `wait` reads to follow on

    # A start that refuses (SystemExit with its message) still tells a `wait` there is nothing to follow.
    def refuse(argv: list[str]) -> int:
        raise SystemExit("the model is not there")

    monkeypatch.setattr(cli, "main", refuse)
    with pytest.raises(SystemExit):
        chain.run_then(folder)
    assert (folder / chain.THEN_STARTED).read_text() == "1"


def test_the_chain_gives_up_on_a_first_attempt_that_never_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "attempt-1"
    folder.mkdir()
    (folder / chain.THEN_REQUEST).write_text(json.dumps({"argv": ["start", "shapes-4b"]}))
    supervisor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (folder / "pid").write_text(str(supervisor.pid))
        monkeypatch.setattr(chain, "THEN_POLL_S", 0.05)
        monkeypatch.setattr(chain, "THEN_LIMIT_S", 0.3)
        monkeypatch.setattr(cli, "main", lambda argv: pytest.fail("started while the first still ran"))
        assert chain.run_then(folder) == 1
    finally:
        supervisor.kill()
        supervisor.wait()


def _ended_attempt(folder: Path, then: list[str] | None = None) -> None:
    """An attempt folder as the supervisor leaves it: its output, exit code and (dead) pid."""
    folder.mkdir(parents=True)
    (folder / "output.log").write_text("[    1.0s] engine command: main_ppo\n")
    (folder / "rc").write_text("0")
    command = {
        "command": ["python3", "-m", "grpo_trainer", "run"],
        "env": {},
        "started": time.time(),
        "sample_every": 0,
    }
    (folder / "command.json").write_text(json.dumps(command))
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    (folder / "pid").write_text(done.stdout.strip())
    if then is not None:
        (folder / chain.THEN_REQUEST).write_text(json.dumps({"argv": then}))


def _wait(tmp_path: Path, seconds: float) -> int:
    import argparse

    return summaries.cmd_wait(
        argparse.Namespace(part="shapes-4b", seconds=seconds, out=tmp_path / "out", stop_at_startup=False)
    )


def test_one_wait_follows_the_attempt_the_chain_starts_after_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `wait` that comes in the seconds between a cold attempt's end and its retry's start
    follows the retry once the chain has started it, instead of returning with the first alone."""
    monkeypatch.setattr(machine, "WORK", tmp_path / "work")
    monkeypatch.setattr(chain, "THEN_POLL_S", 0.05)
    (tmp_path / "out").mkdir()
    first = tmp_path / "work" / "shapes-4b" / "attempt-1"
    _ended_attempt(first, then=["start", "shapes-4b", "--steps", "1", "--attempt", "2"])

    def chain_starts_the_retry() -> None:
        time.sleep(0.5)
        _ended_attempt(first.parent / "attempt-2")
        (first / chain.THEN_STARTED).write_text("0")

    starter = threading.Thread(target=chain_starts_the_retry)
    starter.start()
    assert _wait(tmp_path, 30) == 0
    starter.join()
    said = capsys.readouterr().out
    assert "following shapes-4b attempt 1" in said
    assert "following shapes-4b attempt 2" in said
    assert "shapes-4b attempt 2: ended, exit code 0" in said
    ages = re.findall(
        r"machine up ([\d.]+) min, held about ([\d.]+); it goes back at 30 min held, (-?[\d.]+) left", said
    )
    assert len(ages) == 2, said  # when the wait begins and when it returns
    # Held: up and the minute the lease ran before the machine booted.
    assert all(abs(float(held) - float(up) - machine.HELD_BEFORE_BOOT_MIN) < 0.15 for up, held, _ in ages)
    assert all(abs(float(held) + float(left) - 30) < 0.15 for _, held, left in ages)
    written = json.loads((tmp_path / "out" / "shapes-4b-summary.json").read_text())
    assert set(written["attempts"]) == {"attempt_1", "attempt_2"}
    # The retry chains nothing: a second `wait` follows it alone and returns.
    assert _wait(tmp_path, 30) == 0
    assert "following shapes-4b attempt 1" not in capsys.readouterr().out


def test_a_wait_stops_at_a_chain_that_did_not_start_or_at_its_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(machine, "WORK", tmp_path / "work")
    monkeypatch.setattr(chain, "THEN_POLL_S", 0.05)
    (tmp_path / "out").mkdir()
    first = tmp_path / "work" / "shapes-4b" / "attempt-1"
    _ended_attempt(first, then=["start", "shapes-4b", "--attempt", "2"])
    began = time.monotonic()
    assert _wait(tmp_path, 0.4) == 0  # the chain has not started the retry: time is up
    assert time.monotonic() - began < 5
    (first / chain.THEN_STARTED).write_text("2")  # `start` refused the retry
    assert _wait(tmp_path, 30) == 0
    said = capsys.readouterr().out
    assert "the next part did not start (exit code 2" in said
    assert "following shapes-4b attempt 2" not in said


def test_a_wait_that_stops_at_startup_stops_each_attempt_once_its_rollout_server_is_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`wait --stop-at-startup`: a start-up pair in a lease with little device time left stops the
    cold attempt once its start-up is over (the chain then starts the retry) instead of waiting
    for its steps; an attempt still starting up is left running."""
    monkeypatch.setattr(machine, "WORK", tmp_path / "work")
    (tmp_path / "out").mkdir()
    folder = tmp_path / "work" / "shapes-4b" / "attempt-1"
    _ended_attempt(folder)
    (folder / "rc").unlink()
    # Stopped, it exits as a stopped attempt's supervisor records it: 75, not 0.
    script = (
        "import signal, sys, time\n"
        "def stopped(*_):\n"
        "    open(sys.argv[2], 'w').write('75'); sys.exit(75)\n"
        "signal.signal(signal.SIGTERM, stopped)\n"
        "log = open(sys.argv[1], 'a')\n"
        "for line in ['[  20.0s] actor and ref model engine initialized',"
        " '[  30.0s] checkpoint engine manager initialized', '[  31.0s] generating']:\n"
        "    time.sleep(0.3); log.write(line + '\\n'); log.flush()\n"
        "time.sleep(60)\n"
    )
    attempt = subprocess.Popen(
        [sys.executable, "-c", script, str(folder / "output.log"), str(folder / "rc")], start_new_session=True
    )
    try:
        (folder / "pid").write_text(str(attempt.pid))
        (folder / "child-pid").write_text(str(attempt.pid))
        threading.Thread(target=attempt.wait, daemon=True).start()
        import argparse

        began = time.monotonic()
        args = argparse.Namespace(part="shapes-4b", seconds=30, out=tmp_path / "out", stop_at_startup=True)
        # A stop the wait asked for is no failure: `wait && start --attempt N` goes on.
        assert summaries.cmd_wait(args) == 0
        assert time.monotonic() - began < 20, "waited for the attempt's end, not its start-up's"
        # The stand-in writes its exit code before it exits, and the thread above may hold the
        # process's wait while it reaps it: `poll()` can read None for a moment, so wait a little.
        try:
            attempt.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail("the attempt was left running")
        assert (folder / "rc").read_text() == "75"
        said = capsys.readouterr().out
        assert "attempt 1: stopped at the end of its start-up" in said
        assert "shapes-4b attempt 1: stopped at the end of its start-up, exit code 75" in said
        written = json.loads((tmp_path / "out" / "shapes-4b-summary.json").read_text())
        assert written["attempts"]["attempt_1"]["startup_s"]["rollout_server"] == 30.0
    finally:
        attempt.kill()

    # Without the mark yet, the attempt runs on when the time is up.
    second = folder.parent / "attempt-2"
    _ended_attempt(second)
    (second / "rc").unlink()
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        (second / "pid").write_text(str(running.pid))
        (second / "child-pid").write_text(str(running.pid))
        args = argparse.Namespace(part="shapes-4b", seconds=0.5, out=tmp_path / "out", stop_at_startup=True)
        assert summaries.cmd_wait(args) == 0
        assert running.poll() is None
    finally:
        running.kill()
        running.wait()

    # One that ended by itself with an error, before its mark, is a failure with or without the stop.
    third = folder.parent / "attempt-3"
    _ended_attempt(third)
    (third / "rc").write_text("1")
    args = argparse.Namespace(part="shapes-4b", seconds=5, out=tmp_path / "out", stop_at_startup=True)
    assert summaries.cmd_wait(args) == 1
    assert "shapes-4b attempt 3: ended, exit code 1" in capsys.readouterr().out
