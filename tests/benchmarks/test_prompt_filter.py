"""`benchmarks.prompt_filter`: the over-long prompt filter's work in W forked workers, each with
the parent's threads (as verl's filter ran) or with its share (as the worker setup makes it).

The script's figures come from the lent machine's 16 cores; here it runs for real at a small size
on two, and what is checked is what the figures rest on: each setting ran the workers it says,
with the threads it says, over every row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import prompt_filter as bench


def test_each_setting_runs_its_workers_with_the_threads_it_names(tmp_path: Path) -> None:
    out = tmp_path / "filter.json"
    argv = ["--rows", "12", "--side", "256", "--workers", "2", "--threads", "4", "--json", str(out)]
    assert bench.main(argv) == 0
    found = json.loads(out.read_text())
    assert found["machine"]["affinity"] >= 1
    runs = {run["mode"]: run for run in found["runs"]}
    assert list(runs) == ["inherit", "shared", "one-process"]
    assert (runs["inherit"]["processes"], runs["inherit"]["threads_each"]) == (2, [4])
    assert (runs["shared"]["processes"], runs["shared"]["threads_each"]) == (2, [2])
    assert (runs["one-process"]["processes"], runs["one-process"]["threads_each"]) == (1, [4])
    assert all(run["rows"] == run["kept"] == 12 for run in runs.values())
    assert all(run["seconds"] > 0 for run in runs.values())


def test_an_unknown_setting_is_refused_before_anything_is_built(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--modes", "inherit,everything", "--json", str(tmp_path / "x.json")])
    assert "--modes: unknown everything" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
