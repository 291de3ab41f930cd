"""Exit-code classes: the operator retries transient failures and fails bad specs at once."""

from __future__ import annotations

import pytest
from grpo_operator.api import exitcodes
from grpo_trainer.engines.trl.failures import ExitCode, classify


def test_codes_are_the_operators() -> None:
    assert ExitCode.OK == exitcodes.OK
    assert ExitCode.FAILED == exitcodes.UNKNOWN
    assert ExitCode.CONFIG == exitcodes.CONFIG_ERROR
    assert ExitCode.DATA == exitcodes.DATA_ERROR
    assert ExitCode.RETRYABLE == exitcodes.RETRYABLE


class OutOfMemoryError(RuntimeError):
    """Named like torch's, which the classifier recognises without importing torch."""


@pytest.mark.parametrize(
    ("error", "code", "reason"),
    [
        (
            OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
            ExitCode.RETRYABLE,
            "OutOfMemory",
        ),
        (RuntimeError("CUDA error: out of memory"), ExitCode.RETRYABLE, "OutOfMemory"),
        (RuntimeError("NCCL communicator was aborted"), ExitCode.RETRYABLE, "CollectiveTimeout"),
        (TimeoutError("store"), ExitCode.RETRYABLE, "TimeoutError"),
        (FileNotFoundError("train.parquet"), ExitCode.DATA, "DataError"),
        (ValueError("generation_batch_size must be divisible"), ExitCode.CONFIG, "ConfigError"),
        (TypeError("GRPOConfig got an unexpected keyword argument 'bogus'"), ExitCode.CONFIG, "ConfigError"),
        (RuntimeError("something else"), ExitCode.FAILED, "EngineCrashed"),
    ],
)
def test_classify(error: BaseException, code: ExitCode, reason: str) -> None:
    classified = classify(error)
    assert (classified.code, classified.reason) == (code, reason)
    assert (code in exitcodes.NOT_RETRYABLE) == (code in (ExitCode.CONFIG, ExitCode.DATA))
