"""Timestamps as the GRPOJob's status, its events and the files on a job's volume write them.

Kubernetes' `Time`: RFC 3339 in UTC to the second (`2026-12-01T10:07:40Z`); a Lease's `MicroTime`
to the microsecond; a folder name without separators. Standard library only, like the contract:
the operator and the trainer both write these.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

STATUS_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
"""metav1.Time: what every timestamp in the GRPOJob's status and in the trainer's records uses."""
_MICRO_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_FOLDER_FORMAT = "%Y%m%dT%H%M%SZ"
_LEAP_SECOND = re.compile(r"(?<=T\d\d:\d\d):60")


def rfc3339(moment: datetime | None = None) -> str:
    """`moment` (default: now) as metav1.Time."""
    return (moment or datetime.now(UTC)).astimezone(UTC).strftime(STATUS_FORMAT)


def parse_rfc3339(value: str | None) -> datetime | None:
    """Any timestamp the schema's `date-time` admits, as an aware datetime; None for an empty value.

    The operator writes metav1.Time, but others write the status too (the trainer, a person, a
    script): the API server admits every RFC 3339 form — fractional seconds of any length, an
    offset instead of `Z`, lower-case `t` and `z`, a leap second — and a few ISO 8601 ones (a space
    for `T`, no seconds, no zone: read as UTC). ValueError for what is none of these, and for a
    time that is one but has no UTC form in a datetime (`0001-01-01T00:00:00+00:01` falls before
    year 1, `9999-12-31T23:59:59-00:01` after 9999): never an OverflowError, which no caller expects.
    """
    if not value:
        return None
    text = value.strip().upper()
    leap = _LEAP_SECOND.search(text)
    if leap:  # 23:59:60 is RFC 3339's leap second; datetime has none, so it is read as :59
        text = text[: leap.start()] + ":59" + text[leap.end() :]
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError as error:
        raise ValueError(f"{value!r} has no UTC time within the years 1 to 9999") from error


def micro_rfc3339(moment: datetime) -> str:
    """metav1.MicroTime (a Lease's acquire and renew times)."""
    return moment.astimezone(UTC).strftime(_MICRO_FORMAT)


def folder_stamp(moment: datetime | None = None) -> str:
    """`moment` (default: now) for a file or folder name: `20261201T100740Z`."""
    return (moment or datetime.now(UTC)).astimezone(UTC).strftime(_FOLDER_FORMAT)
