"""Trainer exit codes: how the trainer tells the operator whether a failed attempt may be retried.

Both sides import this module. Ray reports a failed entrypoint as
"Job entrypoint command failed with exit code N, ..." in the RayJob's message, and the operator
reads N back to decide between a new attempt (resumed from the latest checkpoint) and failing
the job at once.
"""

from __future__ import annotations

import json
import re

OK = 0
UNKNOWN = 1
"""An unclassified crash. Retried: most of them on real clusters are infrastructure."""
USAGE = 2
"""Bad command line (argparse's own code)."""
CONFIG_ERROR = 3
"""The job cannot work as written (overrides rejected, batch sizes, missing reward). Never retried."""
DATA_ERROR = 4
"""The dataset is missing or malformed. Never retried."""
RETRYABLE = 75
"""A transient fault the trainer recognised: device OOM, a collective (NCCL/HCCL) timeout, lost node."""

NOT_RETRYABLE = frozenset({USAGE, CONFIG_ERROR, DATA_ERROR})
FAILURE_MARKER = "GRPO_FAILURE"
"""Prefix of the trainer's last line on a failure: `GRPO_FAILURE {"reason", "retryable", "exitCode", "message"}`."""
_EXIT_CODE = re.compile(r"exit code (\d+)")
_FAILURE_LINE = re.compile(FAILURE_MARKER + r" (\{.*\})")


def exit_code_in(message: str) -> int | None:
    """The entrypoint's exit code in a Ray job failure message, if it has one."""
    match = _EXIT_CODE.search(message or "")
    return int(match.group(1)) if match else None


def is_retryable(message: str) -> bool:
    """Whether a failed attempt described by `message` should be retried.

    An explicit non-retryable exit code wins; anything else that failed is worth another attempt
    from the latest checkpoint (the retry budget, backoffLimit, bounds the cost).
    """
    code = exit_code_in(message)
    if code is not None:
        return code not in NOT_RETRYABLE
    return True


def describe_exit(code: int) -> str:
    """A short phrase for a condition message."""
    names = {
        OK: "succeeded",
        UNKNOWN: "crashed",
        USAGE: "bad command line",
        CONFIG_ERROR: "configuration error",
        DATA_ERROR: "data error",
        RETRYABLE: "transient failure (OOM, collective timeout or lost node)",
    }
    if code in names:
        return names[code]
    if code > 128:
        return f"killed by signal {code - 128}"
    return f"exit code {code}"


def failure_in(message: str) -> dict[str, object] | None:
    """The trainer's own account of a failure, from the log tail Ray copies into the message."""
    found = None
    for match in _FAILURE_LINE.finditer(message or ""):
        try:
            payload = json.loads(match.group(1))
        except ValueError:
            continue
        if isinstance(payload, dict) and isinstance(payload.get("reason"), str):
            found = payload
    return found
