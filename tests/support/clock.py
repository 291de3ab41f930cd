"""A clock the test moves by hand: what the operator's pure parts take as `clock`."""

from __future__ import annotations


class ManualClock:
    """Returns `now` (seconds) until the test changes it."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now
