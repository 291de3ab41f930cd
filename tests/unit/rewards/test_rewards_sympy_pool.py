"""The sympy pool: answers within the deadline; soft and hard timeouts; cheap replacement."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from grpo_trainer.rewards import sympy_pool
from grpo_trainer.rewards.sympy_pool import SympyPool
from grpo_trainer.rewards.sympy_worker import build, equal

X_PLUS_1 = ["add", ["sym", "x"], ["num", "1"]]
ONE_PLUS_X = ["add", ["num", "1"], ["sym", "x"]]


@pytest.fixture
def pool() -> Iterator[SympyPool]:
    created = SympyPool(size=2)
    yield created
    created.close()


def test_worker_builds_exact_expressions() -> None:
    assert equal(build(["div", ["num", "1"], ["num", "2"]]), build(["num", "0.5"]))
    assert not equal(build(X_PLUS_1), build(["sym", "x"]))
    with pytest.raises(ValueError, match="exponent"):
        build(["pow", ["sym", "x"], ["num", "100000"]])


HARD_A = [
    "pow",
    ["mul", ["add", ["sym", "x"], ["sym", "y"]], ["sub", ["sym", "x"], ["sym", "y"]]],
    ["num", "900"],
]
HARD_B = [
    "pow",
    ["sub", ["pow", ["sym", "x"], ["num", "2"]], ["pow", ["sym", "y"], ["num", "2"]]],
    ["num", "900"],
]


def test_pool_answers_and_reuses_workers(pool: SympyPool) -> None:
    assert pool.warm_up(timeout_s=60)
    deadline = time.monotonic() + 30
    assert pool.equal(X_PLUS_1, ONE_PLUS_X, deadline) is True
    assert pool.equal(X_PLUS_1, ["sym", "x"], deadline) is False
    assert pool._alive == 1


def test_bad_requests_get_no_verdict_but_keep_the_worker(pool: SympyPool) -> None:
    assert pool.equal(["bogus"], ["num", "1"], time.monotonic() + 30) is None
    assert pool.equal(X_PLUS_1, ONE_PLUS_X, time.monotonic() + 30) is True
    assert pool._alive == 1


def test_a_worker_stops_itself_at_its_budget_and_stays_usable(
    pool: SympyPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert pool.warm_up(timeout_s=60)
    monkeypatch.setattr(sympy_pool, "SOFT_MARGIN_S", 0.3)  # room for a late timer on a loaded machine
    started = time.monotonic()
    assert pool.equal(HARD_A, HARD_B, started + 0.5) is None
    assert time.monotonic() - started < 0.5
    assert (pool.soft_timeouts, pool.hard_timeouts) == (1, 0)
    assert pool.equal(X_PLUS_1, ONE_PLUS_X, time.monotonic() + 30) is True
    assert pool._alive == 1


def test_a_worker_that_misses_the_deadline_is_killed_and_replaced(
    pool: SympyPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert pool.warm_up(timeout_s=60)
    monkeypatch.setattr(sympy_pool, "SOFT_MARGIN_S", -60.0)  # the worker would keep going for a minute
    stuck_pid = pool._idle[-1].pid
    started = time.monotonic()
    assert pool.equal(HARD_A, HARD_B, started + 0.5) is None
    assert time.monotonic() - started < 0.6  # the deadline plus the time to send the kill
    assert pool.hard_timeouts == 1
    for _ in range(500):
        try:
            os.kill(stuck_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.01)
    else:
        pytest.fail("the stuck worker is still running")
    started = time.monotonic()
    assert pool.equal(X_PLUS_1, ONE_PLUS_X, started + 30) is True
    assert time.monotonic() - started < 1.0, "a replacement is a fork, not a new sympy import"


def test_callers_beyond_the_pool_size_wait_only_until_their_deadline() -> None:
    pool = SympyPool(size=1)
    try:
        assert pool.warm_up(timeout_s=60)
        busy = threading.Thread(target=pool.equal, args=(HARD_A, HARD_B, time.monotonic() + 1.0))
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
    assert pool._zygote is None


def test_closing_stops_the_zygote_and_its_workers() -> None:
    pool = SympyPool(size=2)
    assert pool.warm_up(timeout_s=60)
    zygote = pool._zygote
    assert zygote is not None
    worker_pid = pool._idle[-1].pid
    pool.close()
    assert zygote.proc.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.kill(worker_pid, 0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract sockets are Linux-only")
def test_without_a_writable_temporary_folder_an_abstract_socket_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def read_only(*args: object, **kwargs: object) -> str:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(sympy_pool.tempfile, "mkdtemp", read_only)
    pool = SympyPool(size=1)
    try:
        assert pool.warm_up(timeout_s=60)
        assert pool._zygote is not None
        assert pool._zygote.socket_path.startswith("@")
        assert pool.equal(X_PLUS_1, ONE_PLUS_X, time.monotonic() + 30) is True
    finally:
        pool.close()


def test_sympy_that_cannot_start_is_not_retried_on_every_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise SystemExit(3)\n")
    monkeypatch.setattr(sympy_pool, "WORKER_FILE", broken)
    pool = SympyPool(size=1)
    try:
        started = time.monotonic()
        assert pool.equal(X_PLUS_1, ONE_PLUS_X, started + 5) is None
        assert time.monotonic() - started < 5
        assert pool.equal(X_PLUS_1, ONE_PLUS_X, time.monotonic() + 5) is None
        assert pool._zygote is None
        assert pool._retry_at > time.monotonic()
    finally:
        pool.close()
