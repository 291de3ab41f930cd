"""A failed attempt is classified so the operator retries what a retry can fix, and only that."""

from __future__ import annotations

import json

import pytest
from grpo_operator.api import contract as operator_side
from grpo_operator.api.contract import (
    CONFIG_ERROR,
    DATA_ERROR,
    FAILURE_MARKER,
    NOT_RETRYABLE,
    RETRYABLE,
    UNKNOWN,
)
from grpo_trainer.failures import ConfigError, DataError, classify_engine_exit, classify_exception

CASES = [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", 1, "OutOfMemory", RETRYABLE),
    ("RuntimeError: NPU out of memory. Tried to allocate 1.2 GiB", 1, "OutOfMemory", RETRYABLE),
    (
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
        1,
        "OutOfMemory",
        RETRYABLE,
    ),
    (
        "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE) ran for 1800000 ms",
        1,
        "CollectiveTimeout",
        RETRYABLE,
    ),
    (
        "EI0002: The wait execution of the Notify register times out. HCCL timeout",
        1,
        "CollectiveTimeout",
        RETRYABLE,
    ),
    (
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
        1,
        "NodeLost",
        RETRYABLE,
    ),
    (
        "The node with node id abc has been marked dead because the detector has missed too many heartbeats.",
        1,
        "NodeLost",
        RETRYABLE,
    ),
    ("", -9, "Killed", RETRYABLE),
    ("", 137, "Killed", RETRYABLE),
    ("omegaconf.errors.ConfigKeyError: Key 'foo' is not in struct", 1, "EngineConfigError", CONFIG_ERROR),
    ("ValueError: Unknown reward manager: batch", 1, "EngineConfigError", CONFIG_ERROR),
    (
        "AssertionError: real_train_batch_size (100) must be divisible by minimal possible batch size (16)",
        1,
        "EngineConfigError",
        CONFIG_ERROR,
    ),
    ("Traceback ...\nKeyError: 'ground_truth'", 1, "EngineCrashed", UNKNOWN),
]


@pytest.mark.parametrize(("log", "returncode", "reason", "code"), CASES)
def test_classification(log, returncode, reason, code):
    failure = classify_engine_exit(returncode, f"step 3\n{log}\nexiting\n")
    assert (failure.reason, failure.code) == (reason, code)
    # The operator's own reading of the same exit code agrees on retrying.
    message = f"Job entrypoint command failed with exit code {failure.code}, last available logs: ..."
    assert operator_side.is_retryable(message) == failure.retryable


def test_oom_outranks_the_collective_timeouts_it_causes():
    log = "CUDA out of memory on rank 2\n...\nWatchdog caught collective operation timeout on rank 0"
    assert classify_engine_exit(1, log).reason == "OutOfMemory"


def test_a_killed_engine_is_retried_whatever_it_logged_before():
    log = "omegaconf.errors.ConfigKeyError: warning printed earlier"
    assert classify_engine_exit(-15, log).reason == "Killed"


def test_the_marker_line_is_json_the_operator_can_parse():
    failure = classify_engine_exit(1, "CUDA out of memory. Tried to allocate 20 GiB")
    prefix, _, payload = failure.line().partition(" ")
    assert prefix == FAILURE_MARKER
    assert json.loads(payload) == {
        "reason": "OutOfMemory",
        "retryable": True,
        "exitCode": RETRYABLE,
        "message": "CUDA out of memory. Tried to allocate 20 GiB",
    }


def test_trainer_errors_carry_non_retryable_codes():
    assert not ConfigError("x").failure().retryable
    assert not DataError("x").failure().retryable
    assert ConfigError("x").failure().code == operator_side.CONFIG_ERROR


def test_success_is_not_a_failure():
    with pytest.raises(ValueError, match="exited 0"):
        classify_engine_exit(0, "")


class OutOfMemoryError(RuntimeError):
    """Named like torch's, which the classifier recognises without importing torch."""


@pytest.mark.parametrize(
    ("error", "code", "reason"),
    [
        (OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), RETRYABLE, "OutOfMemory"),
        (RuntimeError("CUDA error: out of memory"), RETRYABLE, "OutOfMemory"),
        (RuntimeError("NCCL communicator was aborted"), RETRYABLE, "CollectiveTimeout"),
        (TimeoutError("store"), RETRYABLE, "TimeoutError"),
        (FileNotFoundError("train.parquet"), DATA_ERROR, "DataError"),
        (ValueError("generation_batch_size must be divisible"), CONFIG_ERROR, "ConfigError"),
        (TypeError("GRPOConfig got an unexpected keyword argument 'bogus'"), CONFIG_ERROR, "ConfigError"),
        (RuntimeError("something else"), UNKNOWN, "EngineCrashed"),
    ],
)
def test_an_in_process_engines_exception_is_classified(error: BaseException, code: int, reason: str) -> None:
    failure = classify_exception(error)
    assert (failure.code, failure.reason) == (code, reason)
    assert (code in NOT_RETRYABLE) == (code in (CONFIG_ERROR, DATA_ERROR))
