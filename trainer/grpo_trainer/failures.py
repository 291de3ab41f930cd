"""How `grpo-train` ends: an exit code the operator can act on, and one line that says why.

The codes themselves live in `grpo_operator.api.exitcodes`, which the operator imports too: Ray
reports a failed entrypoint as "Job entrypoint command failed with exit code N, last available
logs ...", and the operator reads N back to decide between a new attempt (resumed from the latest
checkpoint) and failing the job at once. This module adds the trainer's half: the exceptions that
carry a code, and the classification of an engine crash from its exit status and log tail.

The last line the trainer writes on a failure is `GRPO_FAILURE {json}` (reason, retryable, exitCode,
message). It lands in the log tail Ray copies into the RayJob's message, so the operator can show a
reason more specific than the exit code ("OutOfMemory", "CollectiveTimeout", ...).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from grpo_operator.api.exitcodes import (
    CONFIG_ERROR,
    DATA_ERROR,
    FAILURE_MARKER,
    NOT_RETRYABLE,
    OK,
    RETRYABLE,
    UNKNOWN,
    USAGE,
)

__all__ = [
    "CONFIG_ERROR",
    "DATA_ERROR",
    "FAILURE_MARKER",
    "OK",
    "RETRYABLE",
    "UNKNOWN",
    "USAGE",
    "ConfigError",
    "DataError",
    "Failure",
    "TrainerError",
    "TransientError",
    "classify_engine_exit",
]


@dataclass(frozen=True)
class Failure:
    """Why an attempt ended badly, in the words the operator shows."""

    code: int
    reason: str
    message: str

    @property
    def retryable(self) -> bool:
        return self.code not in NOT_RETRYABLE

    def marker_line(self) -> str:
        """One machine-readable line for the end of the log (and so for the RayJob's message)."""
        payload = {
            "reason": self.reason,
            "retryable": self.retryable,
            "exitCode": self.code,
            "message": self.message[:512],
        }
        return f"{FAILURE_MARKER} {json.dumps(payload, ensure_ascii=False)}"


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


def classify_engine_exit(returncode: int, log_tail: str) -> Failure:
    """Turn the engine's exit status and its last output into a Failure.

    Environmental faults in the log come first (device OOM, collective timeouts, lost nodes). A
    negative return code is Python's way of saying the child died of a signal (the kernel's OOM
    killer, a preempted node's SIGTERM): retryable. Then verl's own configuration errors, which no
    retry fixes. What nothing recognises is UNKNOWN, which the operator retries within backoffLimit.
    """
    if returncode == OK:
        raise ValueError("classify_engine_exit is for failures; the engine exited 0")
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
    return Failure(UNKNOWN, "EngineCrashed", f"the engine exited with code {returncode}")


def _line_around(text: str, index: int) -> str:
    """The log line holding a match: the most useful single line to show a person."""
    start = text.rfind("\n", 0, index) + 1
    end = text.find("\n", index)
    return text[start : end if end != -1 else len(text)].strip()[:512]
