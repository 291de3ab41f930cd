"""The sympy pool: answers within the deadline, kills and replaces a worker that misses it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from grpo_trainer.rewards import sympy_pool
from grpo_trainer.rewards.sympy_pool import SympyPool
from grpo_trainer.rewards.sympy_worker import build, equal

X_PLUS_1 = ["add", ["sym", "x"], ["num", "1"]]
ONE_PLUS_X = ["add", ["num", "1"], ["sym", "x"]]
SLEEPER = "import sys, time\nfor line in sys.stdin:\n    time.sleep(30)\n"


@pytest.fixture
def pool() -> SympyPool:
    created = SympyPool(size=2)
    yield created
    created.close()


def test_worker_builds_exact_expressions() -> None:
    assert equal(build(["div", ["num", "1"], ["num", "2"]]), build(["num", "0.5"]))
    assert not equal(build(X_PLUS_1), build(["sym", "x"]))
    with pytest.raises(ValueError, match="exponent"):
        build(["pow", ["sym", "x"], ["num", "100000"]])


def test_pool_answers_and_reuses_workers(pool: SympyPool) -> None:
    assert pool.warm_up(timeout_s=60)
    deadline = time.monotonic() + 30
    assert pool.equal(X_PLUS_1, ONE_PLUS_X, deadline) is True
    assert pool.equal(X_PLUS_1, ["sym", "x"], deadline) is False
    assert pool.timeouts == 0


def test_bad_requests_get_no_verdict_but_keep_the_worker(pool: SympyPool) -> None:
    assert pool.equal(["bogus"], ["num", "1"], time.monotonic() + 30) is None
    assert pool.equal(X_PLUS_1, ONE_PLUS_X, time.monotonic() + 30) is True


def test_a_worker_past_its_deadline_is_killed_and_replaced(
    pool: SympyPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text(SLEEPER)
    monkeypatch.setattr(sympy_pool, "WORKER_FILE", sleeper)
    spawned: list[sympy_pool._Worker] = []

    class Recorded(sympy_pool._Worker):
        def __init__(self, memory_mb: int) -> None:
            super().__init__(memory_mb)
            spawned.append(self)

    monkeypatch.setattr(sympy_pool, "_Worker", Recorded)
    started = time.monotonic()
    assert pool.equal(X_PLUS_1, ONE_PLUS_X, started + 0.3) is None
    assert time.monotonic() - started < 0.4
    assert pool.timeouts == 1
    deadline = time.monotonic() + 10
    while len(spawned) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert spawned[0].proc.wait(timeout=5) is not None
    assert spawned[1].proc.poll() is None


def test_callers_beyond_the_pool_size_wait_only_until_their_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text(SLEEPER)
    monkeypatch.setattr(sympy_pool, "WORKER_FILE", sleeper)
    pool = SympyPool(size=1)
    try:
        busy = threading.Thread(target=pool.equal, args=(X_PLUS_1, ONE_PLUS_X, time.monotonic() + 1.0))
        busy.start()
        time.sleep(0.1)
        started = time.monotonic()
        assert pool.equal(X_PLUS_1, ONE_PLUS_X, started + 0.2) is None
        assert time.monotonic() - started < 0.3
        busy.join()
    finally:
        pool.close()


def test_a_deadline_already_past_costs_nothing(pool: SympyPool) -> None:
    assert pool.equal(X_PLUS_1, ONE_PLUS_X, time.monotonic() - 1) is None
    assert pool._alive == 0
