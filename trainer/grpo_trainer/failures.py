"""How an attempt fails: errors that carry an exit code, and the classification of a crash.

The codes, their retry classes and the `GRPO_FAILURE` line are the operator's contract
(`grpo_operator.api.contract`): Ray reports a failed entrypoint as "Job entrypoint command failed
with exit code N, last available logs ...", and the operator reads N and the failure line back to
decide between a new attempt (resumed from the latest checkpoint) and failing the job at once.
This module adds the trainer's half: exceptions that know their code, and the classification of
an engine crash, from a subprocess's exit status and log tail (verl) or from the exception an
in-process engine raised (TRL).
"""

from __future__ import annotations

import hashlib
import re

from grpo_operator.api.contract import (
    CONFIG_ERROR,
    DATA_ERROR,
    OK,
    RETRYABLE,
    SIGNATURE_LENGTH,
    UNKNOWN,
    Failure,
)

from .crash_report import root_cause

__all__ = [
    "ConfigError",
    "DataError",
    "Failure",
    "TrainerError",
    "TransientError",
    "classify_engine_exit",
    "classify_exception",
]


class TrainerError(Exception):
    """An error the trainer recognised; it knows its exit code and reason."""

    code = UNKNOWN
    reason = "TrainerError"

    def failure(self) -> Failure:
        return Failure(self.code, self.reason, str(self))


class ConfigError(TrainerError):
    """The job cannot work as written: retrying would fail the same way."""

    code = CONFIG_ERROR
    reason = "ConfigError"


class DataError(TrainerError):
    """The dataset is missing or malformed."""

    code = DATA_ERROR
    reason = "DataError"


class TransientError(TrainerError):
    """A fault worth another attempt (a download that failed, a volume not ready yet)."""

    code = RETRYABLE
    reason = "Transient"


# Ordered: the first match wins. Device memory and collectives come first because a rank that runs
# out of memory often takes the others down with collective timeouts and dead actors behind it.
_ENGINE_PATTERNS: tuple[tuple[str, int, re.Pattern[str]], ...] = (
    (
        "OutOfMemory",
        RETRYABLE,
        re.compile(
            r"CUDA out of memory|NPU out of memory|OutOfMemoryError|out of memory\. Tried to allocate"
            r"|node running low on memory|HBM.{0,40}out of memory",
            re.IGNORECASE,
        ),
    ),
    (
        "CollectiveTimeout",
        RETRYABLE,
        re.compile(
            r"Watchdog caught collective operation timeout|NCCL (?:timeout|communicator was aborted)"
            r"|ncclSystemError|ncclRemoteError|ProcessGroupNCCL.{0,80}[Tt]imeout"
            r"|HCCL.{0,80}(?:timeout|time out|timed out)|\bEI000[26]\b|DistNetworkError|DistStoreError"
        ),
    ),
    (
        "NodeLost",
        RETRYABLE,
        re.compile(
            r"The actor died unexpectedly before finishing|NodeDiedError|WorkerCrashedError|ObjectLostError"
            r"|OwnerDiedError|has been marked dead|raylet (?:has )?died|Failed to connect to GCS"
        ),
    ),
    (
        "EngineConfigError",
        CONFIG_ERROR,
        re.compile(
            r"ConfigCompositionException|omegaconf\.errors\.|Could not override '|is not in struct"
            r"|Unknown reward manager|must be divisible by"
        ),
    ),
)


HOST_OUT_OF_MEMORY = "HostOutOfMemory"
_HOST_OOM_SIGNATURE = hashlib.sha256(HOST_OUT_OF_MEMORY.encode()).hexdigest()[:SIGNATURE_LENGTH]
"""One signature for every host-memory kill: two attempts in a row killed so are not retried again."""


def classify_engine_exit(returncode: int, log_tail: str, host_oom: str = "") -> Failure:
    """Turn the engine's exit status and its last output into a Failure.

    `host_oom` is the kernel's word that it killed a process of the attempt for host memory
    (host_memory.py): the engine's log then says only that an actor died, so this comes first,
    with the log's line after it. It is retried once, with a signature so that a second attempt
    ending the same way is not retried again: the same job on the same nodes fills the same
    memory. Then environmental faults in the log (device OOM, collective timeouts, lost nodes). A
    negative return code is Python's way of saying the child died of a signal (the kernel's OOM
    killer, a preempted node's SIGTERM): retryable. Then verl's own configuration errors, which no
    retry fixes. What nothing recognises is UNKNOWN, which the operator retries within backoffLimit,
    said in the words of the engine's root exception and with its signature (crash_report.py), so
    a crash that repeats in the next attempt is not retried again.
    """
    if returncode == OK:
        raise ValueError("classify_engine_exit is for failures; the engine exited 0")
    if host_oom:
        said = _engine_said(log_tail)
        message = f"{host_oom}; the engine then: {said}" if said else host_oom
        return Failure(RETRYABLE, HOST_OUT_OF_MEMORY, message, signature=_HOST_OOM_SIGNATURE)
    environment, configuration = _ENGINE_PATTERNS[:-1], _ENGINE_PATTERNS[-1:]
    for reason, code, pattern in environment:
        match = pattern.search(log_tail)
        if match:
            return Failure(code, reason, _line_around(log_tail, match.start()))
    # A process killed from outside says nothing about its configuration, whatever it logged before.
    if returncode < 0 or returncode > 128:
        signal = -returncode if returncode < 0 else returncode - 128
        return Failure(RETRYABLE, "Killed", f"the engine was killed by signal {signal}")
    for reason, code, pattern in configuration:
        match = pattern.search(log_tail)
        if match:
            return Failure(code, reason, _line_around(log_tail, match.start()))
    cause = root_cause(log_tail)
    if cause is None:
        return Failure(UNKNOWN, "EngineCrashed", f"the engine exited with code {returncode}")
    return Failure(
        UNKNOWN,
        "EngineCrashed",
        f"{cause.describe()}; the engine exited with code {returncode}",
        signature=cause.signature(),
    )


def _engine_said(log_tail: str) -> str:
    """The engine's own line about its end: what a pattern recognises, else its root exception."""
    for _, _, pattern in _ENGINE_PATTERNS:
        match = pattern.search(log_tail)
        if match:
            return _line_around(log_tail, match.start())
    cause = root_cause(log_tail)
    return cause.describe() if cause else ""


def _line_around(text: str, index: int) -> str:
    """The log line holding a match: the most useful single line to show a person."""
    start = text.rfind("\n", 0, index) + 1
    end = text.find("\n", index)
    return text[start : end if end != -1 else len(text)].strip()[:512]


# An in-process engine's exception -> (code, reason), by fragment of its message (lower case).
_RETRYABLE_MESSAGES = (
    ("out of memory", "OutOfMemory"),
    ("nccl", "CollectiveTimeout"),
    ("timed out", "Timeout"),
    ("connection reset", "ConnectionLost"),
    ("ecc error", "DeviceError"),
    ("unspecified launch failure", "DeviceError"),
    ("no cuda gpus are available", "DeviceLost"),
)


def classify_exception(error: BaseException) -> Failure:
    """Map an exception raised inside the trainer's process to its exit code and a readable reason.

    Device and network faults are retryable; a missing file is a data error; the exceptions a
    bad setting raises (ValueError, TypeError, KeyError, ImportError) are configuration errors,
    which no retry fixes; anything else is an unknown crash, which the operator retries.
    """
    if isinstance(error, TrainerError):
        return error.failure()
    message = f"{type(error).__name__}: {error}"
    name = type(error).__name__
    lowered = str(error).lower()
    if name == "OutOfMemoryError" or isinstance(error, MemoryError):
        return Failure(RETRYABLE, "OutOfMemory", message)
    if name in ("DistBackendError", "DistNetworkError") or isinstance(error, TimeoutError | ConnectionError):
        return Failure(RETRYABLE, "CollectiveTimeout" if name.startswith("Dist") else name, message)
    for fragment, reason in _RETRYABLE_MESSAGES:
        if fragment in lowered:
            return Failure(RETRYABLE, reason, message)
    if isinstance(error, FileNotFoundError):
        return Failure(DATA_ERROR, "DataError", message)
    if isinstance(error, ValueError | TypeError | KeyError | ImportError):
        return Failure(CONFIG_ERROR, "ConfigError", message)
    return Failure(UNKNOWN, "EngineCrashed", message)
