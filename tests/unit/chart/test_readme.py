"""The chart's README: its values table is generated from values.yaml and must be current."""

from __future__ import annotations

import subprocess
import sys

import yaml
from support.helm import CHART, REPO

sys.path.insert(0, str(REPO / "charts"))
import readme


def test_the_values_table_is_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "charts" / "readme.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_every_value_is_described() -> None:
    text = (CHART / "values.yaml").read_text()
    undocumented = [row for row in readme.rows(text)[2:] if row.endswith("|  |")]
    assert undocumented == [], "document these keys in values.yaml with a '# -- ' comment"


def test_every_value_has_a_row() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    table = "\n".join(readme.rows((CHART / "values.yaml").read_text()))

    def leaves(node: dict, prefix: str = ""):
        for key, value in node.items():
            yield from (
                leaves(value, f"{prefix}{key}.") if isinstance(value, dict) and value else [f"{prefix}{key}"]
            )

    for key in leaves(values):
        parts = key.split(".")
        assert any(f"| `{'.'.join(parts[:n])}` |" in table for n in range(1, len(parts) + 1)), key


def test_a_stale_table_is_caught() -> None:
    current = (CHART / "README.md").read_text()
    changed = (CHART / "values.yaml").read_text().replace("verbose: false", "verbose: true")
    assert readme.render(current, changed) != current
