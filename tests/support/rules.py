"""What the operator and the cleanup hook do with the API, as the chart's tests declare it.

One declaration (tests/unit/chart/test_rbac.py) serves both tiers: the chart tests check the
rendered roles against it, these tests check what the installed ServiceAccounts may really do.
That module lives in the unit tier, whose root pytest puts on sys.path only when it collects unit
tests; it is added here the same way, so the module is imported once under the same name.
"""

from __future__ import annotations

import sys
from pathlib import Path

_UNIT_TIER = str(Path(__file__).resolve().parents[1] / "unit")
if _UNIT_TIER not in sys.path:
    sys.path.insert(0, _UNIT_TIER)

from chart.test_rbac import CLEANUP_RULES, OPERATOR_RULES  # noqa: E402

__all__ = ["CLEANUP_RULES", "OPERATOR_RULES"]
