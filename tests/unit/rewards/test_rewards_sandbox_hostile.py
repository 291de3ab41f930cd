"""A reward written to attack the trainer, through the sandbox as each engine calls it, in real processes.

The trainer here is a process of its own (`TRAINER`), in a session of its own, calling the user's
file the way the TRL engine does (`engines.trl.rewards.sandboxed_reward`, which stops the run on a
bad reward) or the way verl's reward workers do (`rewards.custom.compute_score`, which scores 0):
a reward that ended it, ran code in it or signalled its group would end that process, not the test.
Every case asserts the trainer went on to the end, what it was told, and that no process the
reward started is left (by pid).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from grpo_trainer.rewards import custom
from support.processes import alive

HOSTILE = r'''
import os, pickle, signal, struct, sys, time

class Exit:
    def __reduce__(self):
        return (os._exit, (0,))

class Exec:
    def __init__(self, marker):
        self.marker = marker
    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('ran in the trainer')",))

def forge(trainer):
    """Write a reply claiming 0.99 on every descriptor this process, its parent and the trainer hold."""
    body = pickle.dumps({"ok": True, "value": 0.99})
    frame = struct.pack(">I", len(body)) + body
    ours = [f"/proc/self/fd/{fd}" for fd in os.listdir("/proc/self/fd")]
    others = [f"/proc/{pid}/fd/{fd}" for pid in {os.getppid(), trainer}
              for fd in _listdir(f"/proc/{pid}/fd") if int(fd) > 2]
    for path in ours + others:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            os.write(fd, frame)
        except OSError:
            pass
        finally:
            os.close(fd)

def _listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []

def double_fork(pids):
    """A sleeper in a session of its own, orphaned at once: its pid goes to the file `pids`."""
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            with open(pids, "a") as out:
                out.write(f"{os.getpid()}\n")
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)"])
        os._exit(0)
    os.waitpid(first, 0)
    while not os.path.exists(pids):
        time.sleep(0.01)

def compute_score(data_source, solution_str, ground_truth, extra_info=None, trainer=0, marker="", pids="", **kw):
    if solution_str == "exit-on-unpickle":
        return {"score": 1.0, "trick": Exit()}
    if solution_str == "exec-on-unpickle":
        return Exec(marker)
    if solution_str == "forge":
        forge(trainer)
        return 0.5
    if solution_str == "huge":
        return "x" * 200_000_000
    if solution_str == "double-fork":
        double_fork(pids)
        return 1.0
    if solution_str == "signal-group":
        os.killpg(os.getpgid(os.getppid()), signal.SIGTERM)
        time.sleep(5)
    return float(len(solution_str))
'''

TRAINER = r"""
import json, os, sys, time
request = json.loads(sys.argv[1])
options = {**request["options"], "trainer": os.getpid()}
if request["engine"] == "trl":
    from grpo_trainer.engines.trl.rewards import sandboxed_reward
    reward = sandboxed_reward(request["file"], "compute_score", options)
    def score(response):
        return reward(prompts=[None], completions=[response], answer=[""])[0]
else:
    from grpo_trainer.rewards import custom
    def score(response):
        return custom.compute_score("d", response, "", None, custom_path=request["file"], **options)
for response in request["responses"]:
    started = time.monotonic()
    try:
        result = {"score": score(response)}
    except Exception as error:
        result = {"error": f"{type(error).__name__}: {error}"}
    print(json.dumps({"response": response, **result, "seconds": time.monotonic() - started}), flush=True)
print("done", flush=True)
"""


def run_trainer(
    engine: str, reward_file: Path, responses: list[str], **options: Any
) -> tuple[int, list[dict[str, Any]], str]:
    """(exit code, one result per response it got to, its standard error)."""
    request = {"engine": engine, "file": str(reward_file), "responses": responses, "options": options}
    done = subprocess.run(
        [sys.executable, "-c", TRAINER, json.dumps(request)],
        capture_output=True,
        text=True,
        errors="replace",  # a forging reward writes binary frames on the trainer's standard error too
        timeout=120,
        start_new_session=True,
        check=False,
    )
    lines = done.stdout.splitlines()
    results = [json.loads(line) for line in lines if line.startswith("{")]
    return done.returncode if lines[-1:] == ["done"] else -1000 - done.returncode, results, done.stderr


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.py"
    path.write_text(textwrap.dedent(HOSTILE))
    return path


ENGINES = pytest.mark.parametrize("engine", ["trl", "verl"])


def expect_failure(engine: str, result: dict[str, Any], *words: str) -> None:
    """The TRL engine stops the run naming the file and why; verl's path scores 0."""
    if engine == "trl":
        assert result["error"].startswith("RewardFunctionError: custom reward "), result
        for word in words:
            assert word in result["error"], result
    else:
        assert result == {**result, "score": 0.0}, result


@ENGINES
def test_a_result_whose_unpickling_ends_the_process_is_a_reward_error(engine: str, hostile: Path) -> None:
    code, results, _ = run_trainer(engine, hostile, ["exit-on-unpickle", "abc"])
    assert code == 0, "the trainer was ended by the reward's return value"
    expect_failure(engine, results[0], "compute_score returned an object of type Exit (at ['trick'])")
    assert results[1]["score"] == 3.0


@ENGINES
def test_a_result_whose_unpickling_runs_code_runs_nothing_in_the_trainer(
    engine: str, hostile: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    code, results, _ = run_trainer(engine, hostile, ["exec-on-unpickle", "ab"], marker=str(marker))
    assert not marker.exists(), "the reward's return value ran code in the trainer"
    assert code == 0
    expect_failure(engine, results[0], "compute_score returned an object of type Exec")
    assert results[1]["score"] == 2.0


@ENGINES
def test_a_forged_reply_is_never_read_and_shifts_no_later_reply(engine: str, hostile: Path) -> None:
    responses = ["forge", "a", "bb", "forge", "ccc", "dddd"]
    code, results, _ = run_trainer(engine, hostile, responses)
    assert code == 0
    assert [r.get("score") for r in results if r["response"] != "forge"] == [1.0, 2.0, 3.0, 4.0]
    for forged in (r for r in results if r["response"] == "forge"):
        assert forged.get("score") in (0.5, 0.0, None), "a forged 0.99 was read as the score"
        if engine == "trl" and "error" in forged:
            assert "was not the worker's" in forged["error"] or "exited" in forged["error"]


@ENGINES
def test_a_200_mb_result_is_refused_within_the_bound(engine: str, hostile: Path) -> None:
    code, results, _ = run_trainer(engine, hostile, ["huge", "abcd"], custom_timeout_s=2.0)
    assert code == 0
    assert results[0]["seconds"] < 2.0, results[0]
    expect_failure(engine, results[0], "4 MiB limit")
    assert results[1]["score"] == 4.0


@ENGINES
def test_a_reward_signalling_its_callers_group_reaches_only_its_worker(engine: str, hostile: Path) -> None:
    code, results, _ = run_trainer(engine, hostile, ["signal-group", "abcde"], custom_timeout_s=3.0)
    assert code == 0, "the reward's SIGTERM reached the trainer"
    expect_failure(engine, results[0], "worker process")
    assert results[1]["score"] == 5.0


def wait_gone(pids: list[int], within_s: float = 5.0) -> list[int]:
    deadline = time.monotonic() + within_s
    while (left := [pid for pid in pids if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@ENGINES
def test_a_double_forked_sleeper_in_its_own_session_ends_with_the_trainer(
    engine: str, hostile: Path, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    try:
        code, results, _ = run_trainer(engine, hostile, ["double-fork"], pids=str(pids))
        assert code == 0
        assert results[0]["score"] == 1.0
        sleepers = started(pids)
        assert sleepers
        assert wait_gone(sleepers) == [], "the reward's sleeper outlived the trainer"
    finally:
        kill_all(pids)


def test_a_double_forked_sleeper_ends_when_the_pool_closes(hostile: Path, tmp_path: Path) -> None:
    """In this process, as verl's reward worker runs it: closing the pool ends what the reward started."""
    pids = tmp_path / "pids"
    options = {"custom_path": str(hostile), "custom_timeout_s": 1.0, "pids": str(pids)}
    try:
        assert custom.compute_score("d", "double-fork", "", None, **options) == 1.0
        sleepers = started(pids)
        assert sleepers
        assert all(alive(pid) for pid in sleepers), "the sleeper should run while its worker does"
        custom.close_pools()
        assert wait_gone(sleepers) == []
    finally:
        custom.close_pools()
        kill_all(pids)


def started(pids: Path) -> list[int]:
    """The sleepers' pids, as they wrote them."""
    return [int(line) for line in pids.read_text().split()] if pids.exists() else []


def kill_all(pids: Path) -> None:
    """After a failed check: end the sleepers that escaped, so a failure leaves nothing behind."""
    for pid in started(pids):
        if alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_what_a_reward_may_return_is_data_and_nothing_else() -> None:
    """The schema of a reply (sandbox_worker.plain): what verl and TRL take from a reward, as data."""
    import numpy as np
    from grpo_trainer.rewards.sandbox_worker import MAX_DEPTH, NotPlainError, plain

    assert plain(np.float32(0.5)) == 0.5
    assert type(plain(np.float64(0.25))) is float
    assert plain({"score": np.int64(2), "acc": True, "why": "ok", "none": None}) == {
        "score": 2,
        "acc": True,
        "why": "ok",
        "none": None,
    }
    assert plain((1.0, np.array([0.5, 1.5]), [2])) == [1.0, [0.5, 1.5], [2]]
    for value, why in [
        (b"1.0", "an object of type bytes"),
        ({1: 1.0}, "a dict key of type int"),
        ({"score": {1.0}}, "an object of type set (at ['score'])"),
        ("x" * (5 << 20), "4 MiB limit"),
        ([0.0] * (1 << 20), "4 MiB limit"),
        (np.zeros(1 << 20), "4 MiB limit"),
    ]:
        with pytest.raises(NotPlainError, match=re.escape(why)):
            plain(value)
    nested: list = []
    for _ in range(MAX_DEPTH + 1):
        nested = [nested]
    with pytest.raises(NotPlainError, match="nested deeper"):
        plain(nested)


def test_frames_written_by_others_on_a_workers_pipes_are_neither_run_nor_read(tmp_path: Path) -> None:
    """What a forging reward can do through the trainer's descriptors, done directly: a request
    frame with a made-up nonce on an idle worker's input (the keeper drops it: the function does
    not run), and a reply frame on its output (dropped while idle, skipped during a call). The
    worker stays, and its next answers are its own."""
    import pickle
    import struct

    from grpo_trainer.rewards.sandbox import SandboxPool

    calls = tmp_path / "calls"
    reward = tmp_path / "reward.py"
    reward.write_text(
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
        f"    open({str(calls)!r}, 'a').write(solution_str + '\\n')\n"
        "    return float(len(solution_str))\n"
    )
    pool = SandboxPool(str(reward), "compute_score", size=1)
    try:
        pool.start()
        [worker] = pool._idle
        body = os.urandom(16) + pickle.dumps({"args": ["d", "forged", "g"], "kwargs": {}})
        os.write(worker.proc.stdin.fileno(), struct.pack(">I", len(body)) + body)

        def call(text: str) -> float:
            outcome = pool.call(("d", text, "g"), {}, time.monotonic() + 30)
            assert outcome.ok, outcome
            return outcome.value

        assert call("ab") == 2.0
        # A whole reply frame on the output of an idle worker, then one in the middle of a call.
        reply = os.urandom(16) + json.dumps({"ok": True, "value": 0.99}).encode()
        frame = struct.pack(">I", len(reply)) + reply
        worker.buffer.extend(frame)
        assert call("abc") == 3.0
        assert pool._idle == [worker], "an idle worker with a forged frame was replaced"
        worker.send({"args": ["d", "abcd", "g"], "kwargs": {}})
        worker.buffer.extend(frame)
        assert worker.receive(time.monotonic() + 30) == ("ok", {"ok": True, "value": 4.0})
        assert calls.read_text().split() == ["ab", "abc", "abcd"]
    finally:
        pool.close()
