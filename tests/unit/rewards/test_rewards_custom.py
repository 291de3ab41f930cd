"""custom: users' reward files, per-sample or batch, through both of verl's contracts.

The verl entries run the user's code in worker processes (rewards/sandbox.py); the loaders used by
in-process engines (the TRL engine) import it here.
"""

from __future__ import annotations

import concurrent.futures
import os
import textwrap
import time
from pathlib import Path

import pytest
from grpo_trainer.failures import ConfigError
from grpo_trainer.rewards import custom
from grpo_trainer.rewards.batching import adapt_batch, as_batch
from grpo_trainer.rewards.sandbox import RewardLoadError

SAMPLE_FILE = """
from dataclasses import dataclass

@dataclass
class Weights:  # dataclasses need the module registered in sys.modules
    hit: float = 1.0

def compute_score(data_source, solution_str, ground_truth, extra_info=None, bonus=0.0, **kwargs):
    return {"score": Weights().hit * (solution_str == ground_truth) + bonus, "length": float(len(solution_str))}
"""

BATCH_FILE = """
def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, log=None, **kwargs):
    if log:
        with open(log, "a") as out:
            out.write(f"{len(solution_strs)}\\n")
    return [float(s == t) for s, t in zip(solution_strs, ground_truths)]

def flaky(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    if solution_str == "boom":
        raise RuntimeError("user bug")
    return {"score": 1.0, "extra": 2.0}
"""


@pytest.fixture
def sample_file(tmp_path: Path) -> str:
    path = tmp_path / "reward.py"
    path.write_text(textwrap.dedent(SAMPLE_FILE))
    return str(path)


@pytest.fixture
def batch_file(tmp_path: Path) -> str:
    path = tmp_path / "batch_reward.py"
    path.write_text(textwrap.dedent(BATCH_FILE))
    return str(path)


def test_per_sample_function_is_called_with_the_users_kwargs(sample_file: str) -> None:
    result = custom.compute_score("d", "a", "a", None, custom_path=sample_file, bonus=0.5)
    assert result == {"score": 1.5, "length": 1.0}


def test_batch_function_is_detected_and_adapted(batch_file: str) -> None:
    options = {"custom_path": batch_file, "custom_name": "compute_score_batch"}
    assert custom.compute_score("d", "a", "a", None, **options) == 1.0
    assert custom.compute_score("d", "a", "b", None, **options) == 0.0


def test_batch_entry_calls_a_batch_function_once(batch_file: str, tmp_path: Path) -> None:
    log = tmp_path / "calls.txt"
    options = {"custom_path": batch_file, "custom_name": "compute_score_batch", "log": str(log)}
    assert custom.compute_score_batch(["d"] * 3, ["a", "b", "c"], ["a", "x", "c"], None, **options) == [
        1.0,
        0.0,
        1.0,
    ]
    assert log.read_text().split() == ["3"]


def test_batch_entry_loops_over_a_per_sample_function(sample_file: str) -> None:
    results = custom.compute_score_batch(["d", "d"], ["a", "b"], ["a", "a"], None, custom_path=sample_file)
    assert [r["score"] for r in results] == [1.0, 0.0]


def test_kind_can_be_forced(batch_file: str) -> None:
    function = custom.load_sample_function(batch_file, "flaky", kind="sample")
    assert function("d", "x", "x") == {"score": 1.0, "extra": 2.0}
    with pytest.raises(ValueError, match="auto, sample or batch"):
        custom.load_sample_function(batch_file, "flaky", kind="both")


def test_function_kind_reads_the_signature() -> None:
    def per_sample(data_source, solution_str, ground_truth, extra_info=None): ...
    def batch(data_sources, solution_strs, ground_truths, extra_infos): ...
    def named_batch(*args, **kwargs): ...

    assert custom.function_kind(per_sample) == "sample"
    assert custom.function_kind(batch) == "batch"
    assert custom.function_kind(named_batch, "score_batch") == "batch"


def test_errors_in_the_users_function_score_zero_with_the_same_keys(batch_file: str) -> None:
    options = {"custom_path": batch_file, "custom_name": "flaky"}
    assert custom.compute_score("d", "ok", "", None, **options) == {"score": 1.0, "extra": 2.0}
    assert custom.compute_score("d", "boom", "", None, **options) == {"score": 0.0, "extra": 0.0}
    with pytest.raises(custom.RewardFunctionError, match="RuntimeError: user bug"):
        custom.compute_score("d", "boom", "", None, custom_on_error="raise", **options)


def test_a_missing_file_or_function_is_a_clear_configuration_error(sample_file: str, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        custom.load_function(str(tmp_path / "nope.py"), "compute_score")
    with pytest.raises(AttributeError, match="defines no function 'score'; it defines: compute_score"):
        custom.load_function(sample_file, "score")
    with pytest.raises(ValueError, match="custom_path"):
        custom.compute_score("d", "a", "a")
    with pytest.raises(RewardLoadError, match="defines no function 'score'; it defines: compute_score"):
        custom.compute_score("d", "a", "a", custom_path=sample_file, custom_name="score")
    broken = tmp_path / "broken.py"
    broken.write_text("import no_such_module_anywhere\n")
    with pytest.raises(
        RewardLoadError, match="ModuleNotFoundError: No module named 'no_such_module_anywhere'"
    ):
        custom.compute_score("d", "a", "a", custom_path=str(broken))


def test_an_edited_file_is_loaded_again(sample_file: str) -> None:
    assert custom.compute_score("d", "a", "a", custom_path=sample_file)["score"] == 1.0
    Path(sample_file).write_text("def compute_score(*args, **kwargs):\n    return 7.0\n")
    stat = os.stat(sample_file)
    os.utime(sample_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    # A new version of the file gets fresh workers (and its results their own keys).
    assert custom.compute_score("d", "a", "a", custom_path=sample_file) == 7.0


def test_file_uri_prefix_is_accepted(sample_file: str) -> None:
    assert custom.load_function(f"file://{sample_file}", "compute_score")("d", "a", "a")["score"] == 1.0


def test_adapters_round_trip() -> None:
    def batch(data_sources, solution_strs, ground_truths, extra_infos, **kwargs):
        return [len(s) + kwargs.get("plus", 0) for s in solution_strs]

    per_sample = adapt_batch(batch)
    assert per_sample("d", "abc", None, None, plus=1) == 4
    assert as_batch(per_sample)(["d", "d"], ["a", "bb"], [None], None) == [1, 2]


HOSTILE_FILE = """
import math, os, signal, sys, time

print("the function's own prints must not disturb the protocol")

def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    print("scoring", solution_str)
    if solution_str == "exit":
        sys.exit(3)
    if solution_str == "interrupt":
        raise KeyboardInterrupt
    if solution_str == "hang":
        while True:
            pass
    if solution_str == "sleep":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(60)
    if solution_str == "die":
        os._exit(9)
    if solution_str == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if solution_str == "nan":
        return float("nan")
    if solution_str == "inf":
        return {"score": math.inf, "extra": math.nan}
    if solution_str == "text":
        return "great"
    if solution_str == "unpicklable":
        return {"score": 1.0, "handle": (lambda: 1)}
    return {"score": 1.0, "extra": 2.0}

def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **kwargs):
    if solution_strs[0] == "short":
        return [1.0]
    if solution_strs[0] == "none":
        return None
    return [compute_score(d, s, g, e) for d, s, g, e in zip(data_sources, solution_strs, ground_truths, extra_infos)]
"""


@pytest.fixture
def hostile_file(tmp_path: Path) -> str:
    path = tmp_path / "hostile.py"
    path.write_text(textwrap.dedent(HOSTILE_FILE))
    return str(path)


@pytest.mark.parametrize(
    ("response", "bound"),
    [
        ("exit", 1.0),
        ("interrupt", 1.0),
        ("hang", 1.0),
        ("sleep", 1.0),
        ("die", 1.0),
        ("segfault", 1.0),
        ("nan", 1.0),
        ("inf", 1.0),
        ("text", 1.0),
        ("unpicklable", 1.0),
    ],
)
def test_the_trainer_survives_whatever_the_function_does_within_the_bound(
    hostile_file: str, response: str, bound: float
) -> None:
    options = {"custom_path": hostile_file, "custom_timeout_s": bound}
    assert custom.compute_score("d", "warm", "", None, **options) == {"score": 1.0, "extra": 2.0}
    started = time.monotonic()
    result = custom.compute_score("d", response, "", None, **options)
    elapsed = time.monotonic() - started
    assert result == {"score": 0.0, "extra": 0.0}
    assert elapsed < bound + 0.5, f"{response}: {elapsed:.2f} s"
    # And the next call is served as usual, by the same worker or a fresh one.
    assert custom.compute_score("d", "fine", "", None, **options) == {"score": 1.0, "extra": 2.0}


def test_a_batch_of_the_wrong_length_scores_zero_for_the_whole_batch(hostile_file: str) -> None:
    options = {"custom_path": hostile_file, "custom_name": "compute_score_batch"}
    assert (
        custom.compute_score_batch(["d"] * 3, ["short", "b", "c"], ["", "", ""], None, **options) == [0.0] * 3
    )
    assert custom.compute_score_batch(["d"] * 2, ["none", "b"], ["", ""], None, **options) == [0.0] * 2
    results = custom.compute_score_batch(["d"] * 2, ["a", "nan"], ["", ""], [{}, {}], **options)
    assert results == [{"score": 1.0, "extra": 2.0}, {"score": 0.0, "extra": 0.0}]


def test_concurrent_calls_from_many_threads_each_get_their_own_result(sample_file: str) -> None:
    options = {"custom_path": sample_file, "custom_workers": 3}
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        texts = [f"t{i}" for i in range(40)]
        results = list(pool.map(lambda t: custom.compute_score("d", t, "t7", None, **options), texts))
    assert [r["score"] for r in results] == [1.0 if t == "t7" else 0.0 for t in texts]
    assert [r["length"] for r in results] == [float(len(t)) for t in texts]


def test_the_engine_checks_the_named_function_without_running_the_file(tmp_path: Path) -> None:
    reward = tmp_path / "reward.py"
    reward.write_text(
        "raise SystemExit('never run')\n"
        "from helpers import shared_score\n"
        "alias = shared_score\n"
        "def compute_score(*a, **k):\n    return 1.0\n"
        "async def score_async(*a, **k):\n    return 1.0\n"
    )
    for name in ("compute_score", "score_async", "alias", "shared_score"):
        custom.check_defines(str(reward), name)
    with pytest.raises(
        ConfigError, match=r"defines no 'score' \(its functions: compute_score, score_async\)"
    ):
        custom.check_defines(str(reward), "score")
    reward.write_text("def compute_score(:\n")
    with pytest.raises(ConfigError, match=r"reward\.py line 1"):
        custom.check_defines(str(reward), "compute_score")
    with pytest.raises(ConfigError, match="cannot read the reward file"):
        custom.check_defines(str(tmp_path / "missing.py"), "compute_score")


def test_a_huge_error_message_is_cut_in_the_warning_and_the_error(tmp_path: Path, caplog) -> None:
    reward = tmp_path / "loud.py"
    reward.write_text("def compute_score(*args, **kwargs):\n    raise ValueError('x' * 5_000_000)\n")
    custom._last_report.clear()
    with caplog.at_level("WARNING", logger=custom.__name__):
        assert custom.compute_score("d", "a", "a", None, custom_path=str(reward)) == 0.0
    [line] = [r.getMessage() for r in caplog.records if "the function raised" in r.getMessage()]
    assert len(line) < custom.MESSAGE_LIMIT + 500
    assert "more characters)" in line
    with pytest.raises(custom.RewardFunctionError) as raised:
        custom.compute_score("d", "a", "a", None, custom_path=str(reward), custom_on_error="raise")
    assert len(str(raised.value)) < custom.MESSAGE_LIMIT + 500
