"""`benchmarks.import_time`: Python's own import figures, summed by top-level package.

The GPU machine's run names the packages a retry's imports spend their time in; here the parsing
and the summing run on this machine's interpreter, in fresh processes as there.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from benchmarks import import_time as benchmark

SAMPLE = """\
import time: self [us] | cumulative | imported package
import time:       120 |        120 |   _io
import time:      2000 |       2000 |     vllm.envs
import time:      5000 |       9000 |   vllm.engine
import time:      1000 |      10000 | vllm
import time:       300 |        300 | torch._C
Traceback (most recent call last):
"""


@pytest.fixture
def import_time() -> ModuleType:
    return benchmark


def test_lines_are_read_with_their_depth_and_summed_by_package(import_time: ModuleType) -> None:
    rows = import_time.parse(SAMPLE)
    assert rows == [
        ("_io", 120, 120, 1),
        ("vllm.envs", 2000, 2000, 2),
        ("vllm.engine", 5000, 9000, 1),
        ("vllm", 1000, 10000, 0),
        ("torch._C", 300, 300, 0),
    ]
    # Self times, not cumulative ones: a package's children are not counted twice.
    assert import_time.by_package(rows) == {"vllm": 0.008, "torch": 0.0, "_io": 0.0}


def test_a_module_is_timed_in_a_fresh_interpreter(import_time: ModuleType) -> None:
    found = import_time.time_import("json")
    assert found["ok"]
    assert found["error"] is None
    assert found["modules"] > 1
    assert "json" in found["packages_s"]
    assert 0 < found["cumulative_s"] <= found["wall_s"]
    missing = import_time.time_import("no_such_module_here")
    assert not missing["ok"]
    assert "No module named 'no_such_module_here'" in missing["error"]


def test_a_failed_import_fails_the_run(import_time: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "it.json"
    assert import_time.main(["json", "--repeat", "2", "--json", str(out)]) == 0
    assert import_time.main(["json", "no_such_module_here", "--repeat", "1", "--json", str(out)]) == 1
    assert '"no_such_module_here"' in out.read_text()
