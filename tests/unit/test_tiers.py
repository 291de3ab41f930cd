"""Every folder of tests/ belongs to exactly one of the Makefile's tiers (UNIT_TESTS, CLUSTER_TESTS):
`make test` runs the suite by folder, so a folder in neither would never run in CI."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tier(name: str) -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    match = re.search(rf"^{name} := (.+)$", makefile, re.MULTILINE)
    assert match, f"the Makefile defines no {name}"
    return set(match.group(1).split())


def test_every_folder_of_tests_is_in_exactly_one_tier() -> None:
    unit, cluster = _tier("UNIT_TESTS"), _tier("CLUSTER_TESTS")
    folders = {
        f"tests/{path.name}"
        for path in (ROOT / "tests").iterdir()
        if path.is_dir() and any(path.rglob("test_*.py"))
    }
    assert not unit & cluster, f"in both tiers: {sorted(unit & cluster)}"
    assert folders == unit | cluster, (
        f"never run: {sorted(folders - unit - cluster)}; no such folder: {sorted(unit | cluster - folders)}"
    )
