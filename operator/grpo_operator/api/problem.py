"""One problem with a GRPOJob: the field it is about and what is wrong, in the words a user reads.

Every check returns these — the batch arithmetic (api/batch.py), the CRD's CEL rules evaluated
offline (api/rules.py), the semantic validation (validation.py) and the offline verdict — so a
message reads the same wherever it is shown. Standard library only, like the contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    field: str
    """Where, as `kubectl explain` spells it (spec.algorithm.trainBatchSize)."""
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def shown(value: Any) -> str:
    """A value a user wrote, as a message quotes it: strings quoted, anything long cut to 40 characters."""
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."
