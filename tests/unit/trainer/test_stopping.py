"""`grpo-train yield` (every Ray pod's preStop) and the supervisor's records, in real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from grpo_operator.api.contract import YIELD_COMMAND, Env, StopRequest
from grpo_trainer.stopping import AttemptFiles

HOOK = "import sys; from grpo_trainer.stopping import hook_main; sys.exit(hook_main(sys.argv[1], float(sys.argv[2])))"


def _started(tmp_path: Path) -> AttemptFiles:
    files = AttemptFiles(tmp_path / "metrics" / "attempt-2.jsonl")
    files.log.parent.mkdir(parents=True)
    files.log.write_text("grpo-train attempt 2\n")  # the driver has started
    return files


def _hook(files: AttemptFiles, timeout: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", HOOK, str(files.metrics_file), str(timeout)], stdout=subprocess.PIPE, text=True
    )


def test_the_hook_asks_and_waits_until_the_attempt_has_ended(tmp_path: Path) -> None:
    files = _started(tmp_path)
    hook = _hook(files, 60)
    deadline = time.monotonic() + 20
    while files.stop_requested() is None:
        assert time.monotonic() < deadline, "no stop request written"
        time.sleep(0.05)
    request = files.stop_requested()
    assert request is not None
    assert 55 < request.deadline - request.requested_at <= 60
    time.sleep(1.0)
    assert hook.poll() is None, "the hook returned before the attempt ended: a worker would go mid-save"
    files.write_exit(76)
    out, _ = hook.communicate(timeout=10)
    assert hook.returncode == 0
    assert "ended" in out


def test_the_hook_gives_up_after_its_timeout(tmp_path: Path) -> None:
    files = _started(tmp_path)
    began = time.monotonic()
    out, _ = _hook(files, 1.5).communicate(timeout=30)
    assert 1.5 <= time.monotonic() - began < 15
    assert "timed out" in out


BEATER = (
    "import sys, time; from pathlib import Path; import grpo_trainer.stopping as s; "
    "s.HEARTBEAT_SECONDS = 0.2; s.AttemptFiles(Path(sys.argv[1])).beating(); time.sleep(600)"
)


def test_the_hook_waits_while_the_attempt_beats_and_returns_once_its_supervisor_is_killed(
    tmp_path: Path,
) -> None:
    """A supervisor SIGKILLed writes no exit record: without the heartbeat, the hook of every pod
    of a crashed attempt would hold its pod the whole grace period (minutes), and the retry's
    pods would wait for the node."""
    import threading

    from grpo_trainer.stopping import wait_for_yield

    files = _started(tmp_path)
    beater = subprocess.Popen([sys.executable, "-c", BEATER, str(files.metrics_file)])
    try:
        deadline = time.monotonic() + 30
        while files.read_heartbeat() is None:
            assert time.monotonic() < deadline, "no heartbeat"
            time.sleep(0.05)
        said: list[str] = []
        hook = threading.Thread(target=lambda: said.append(wait_for_yield(files, 60, stale_after=1.5)))
        hook.start()
        hook.join(4.0)
        assert hook.is_alive(), f"the hook returned while the attempt beat: {said}"
        beater.kill()
        killed = time.monotonic()
        hook.join(30)
        assert not hook.is_alive()
        assert said[0].startswith("no heartbeat for "), said
        assert time.monotonic() - killed < 15
    finally:
        beater.kill()
        beater.wait()


def test_the_hook_returns_at_once_for_an_attempt_that_never_started_here(tmp_path: Path) -> None:
    files = AttemptFiles(tmp_path / "metrics" / "attempt-1.jsonl")
    began = time.monotonic()
    out, _ = _hook(files, 60).communicate(timeout=30)
    assert time.monotonic() - began < 15
    assert "not started" in out
    assert files.stop_requested() is None


def test_the_first_request_stands_and_stale_ones_are_cleared(tmp_path: Path) -> None:
    files = _started(tmp_path)
    first = files.request_stop(30, by="head", now=1000.0)
    assert files.request_stop(90, by="worker", now=1005.0) == first
    assert files.stop_requested() == StopRequest(1000.0, 1030.0, "head")
    files.write_exit(0)
    assert set(files.clear_stale()) == {files.stop_request, files.exit_record}
    assert files.stop_requested() is None
    assert not files.exit_record.exists()


def test_the_pods_hook_is_the_trainers_own_command(tmp_path: Path) -> None:
    """The operator's preStop (contract.YIELD_COMMAND) runs in the trainer image: the command must
    exist there, read the attempt from the pod's environment (the metrics file the operator sets,
    a pod path under GRPO_WORKDIR outside a pod), ask the attempt to stop and never fail the pod."""
    files = AttemptFiles(tmp_path / "grpo" / "metrics" / "attempt-3.jsonl")
    files.log.parent.mkdir(parents=True)
    files.log.write_text("grpo-train attempt 3\n")
    env = {
        **os.environ,
        Env.METRICS_FILE: "/grpo/metrics/attempt-3.jsonl",
        Env.WORKDIR: str(tmp_path),
    }
    command = [str(Path(sys.executable).with_name(YIELD_COMMAND[0])), *YIELD_COMMAND[1:], "0.5"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "timed out" in done.stdout
    assert files.stop_requested() is not None, "the hook asked nothing of the attempt"

    env.pop(Env.METRICS_FILE)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, "no attempt to stop") == (0, done.stdout.split(": ", 1)[1][:18])
