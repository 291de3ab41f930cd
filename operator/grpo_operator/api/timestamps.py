"""Timestamps as the GRPOJob's status, its events and the files on a job's volume write them.

Kubernetes' `Time`: RFC 3339 in UTC to the second (`2026-12-01T10:07:40Z`); a Lease's `MicroTime`
to the microsecond; a folder name without separators. Standard library only, like the contract:
the operator and the trainer both write these.
"""

from __future__ import annotations

from datetime import UTC, datetime

STATUS_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
"""metav1.Time: what every timestamp in the GRPOJob's status and in the trainer's records uses."""
_MICRO_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_FOLDER_FORMAT = "%Y%m%dT%H%M%SZ"


def rfc3339(moment: datetime | None = None) -> str:
    """`moment` (default: now) as metav1.Time."""
    return (moment or datetime.now(UTC)).astimezone(UTC).strftime(STATUS_FORMAT)


def parse_rfc3339(value: str | None) -> datetime | None:
    """A metav1.Time back into an aware datetime; None for an empty value."""
    if not value:
        return None
    return datetime.strptime(value, STATUS_FORMAT).replace(tzinfo=UTC)


def micro_rfc3339(moment: datetime) -> str:
    """metav1.MicroTime (a Lease's acquire and renew times)."""
    return moment.astimezone(UTC).strftime(_MICRO_FORMAT)


def folder_stamp(moment: datetime | None = None) -> str:
    """`moment` (default: now) for a file or folder name: `20261201T100740Z`."""
    return (moment or datetime.now(UTC)).astimezone(UTC).strftime(_FOLDER_FORMAT)
