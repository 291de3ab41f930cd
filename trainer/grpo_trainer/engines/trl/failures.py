"""Exit codes by failure class, so the operator can tell a retry from a hopeless job.

The values are `grpo_operator.api.exitcodes`' (a unit test holds them equal); they are repeated
here because the engine also runs where the API models are not installed (the GPU benchmarks).
A retryable failure starts attempt N+1, which resumes from the latest checkpoint; a configuration
or data error fails the job at once, because the same spec would fail the same way again.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    # Unclassified crash: the operator retries within backoffLimit.
    FAILED = 1
    # The job cannot work as written (bad override, batch sizes, reward); never retried.
    CONFIG = 3
    # The dataset is missing or malformed; never retried.
    DATA = 4
    # Transient (EX_TEMPFAIL): device out of memory, collective timeouts, lost devices.
    RETRYABLE = 75


@dataclass(frozen=True)
class Classified:
    code: ExitCode
    reason: str


_RETRYABLE_MESSAGES = (
    ("out of memory", "OutOfMemory"),
    ("nccl", "CollectiveTimeout"),
    ("timed out", "Timeout"),
    ("connection reset", "ConnectionLost"),
    ("ecc error", "DeviceError"),
    ("unspecified launch failure", "DeviceError"),
    ("no cuda gpus are available", "DeviceLost"),
)


def classify(error: BaseException) -> Classified:
    """Map an exception raised by a run to its exit code and a reason a person can read."""
    name = type(error).__name__
    message = str(error).lower()
    if name == "OutOfMemoryError" or isinstance(error, MemoryError):
        return Classified(ExitCode.RETRYABLE, "OutOfMemory")
    if name in ("DistBackendError", "DistNetworkError") or isinstance(error, TimeoutError | ConnectionError):
        return Classified(ExitCode.RETRYABLE, "CollectiveTimeout" if name.startswith("Dist") else name)
    for fragment, reason in _RETRYABLE_MESSAGES:
        if fragment in message:
            return Classified(ExitCode.RETRYABLE, reason)
    if isinstance(error, FileNotFoundError):
        return Classified(ExitCode.DATA, "DataError")
    if isinstance(error, ValueError | TypeError | KeyError | ImportError):
        return Classified(ExitCode.CONFIG, "ConfigError")
    return Classified(ExitCode.FAILED, "EngineCrashed")
