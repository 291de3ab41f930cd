"""Exit codes by failure class, so the operator can tell a retry from a hopeless job.

The operator reads the trainer's exit status: a retryable failure starts attempt N+1, which
resumes from the latest checkpoint; a configuration error fails the job at once, because the
same spec would fail the same way again.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    # Unclassified crash: the operator's backoff policy decides.
    FAILED = 1
    # The spec or its inputs are wrong; retrying cannot help.
    CONFIG = 2
    # Transient (EX_TEMPFAIL): out of device memory, collective timeouts, lost devices.
    RETRYABLE = 75


_RETRYABLE_MESSAGES = (
    "out of memory",
    "cuda error: out of memory",
    "nccl",
    "hccl",
    "timed out",
    "connection reset",
    "ecc error",
    "cuda error: unspecified launch failure",
    "no cuda gpus are available",
)


def classify(error: BaseException) -> ExitCode:
    """Map an exception raised by a run to its exit code."""
    name = type(error).__name__
    message = str(error).lower()
    if name in ("OutOfMemoryError", "DistBackendError", "DistNetworkError", "TimeoutError"):
        return ExitCode.RETRYABLE
    if isinstance(error, MemoryError | ConnectionError):
        return ExitCode.RETRYABLE
    if any(fragment in message for fragment in _RETRYABLE_MESSAGES):
        return ExitCode.RETRYABLE
    if isinstance(error, ValueError | TypeError | KeyError | FileNotFoundError | ImportError):
        return ExitCode.CONFIG
    return ExitCode.FAILED
