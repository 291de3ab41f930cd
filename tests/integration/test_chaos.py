"""The chaos and fuzz runs (benchmarks.chaos, benchmarks.fuzz), short, as tests: each exits
1 unless its targets are met (every job converged, none stuck, no duplicated RayJob, no leaked Ray
cluster; no traceback, every refusal naming its field, admission and the operator agreeing, no
child refused after admission). docs/benchmarks/reliability.md has the full runs' figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.cluster import Cluster

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _run(module: str, *args: str, out: Path, timeout: float) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "operator"), str(REPO / "trainer")])}
    result = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *args, "--out", str(out), "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    assert out.exists(), f"{module} wrote no result:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    report = json.loads(out.read_text())
    assert result.returncode == 0, json.dumps(report, indent=1)[:6000]
    return report


def test_chaos_every_job_converges_with_nothing_duplicated_or_leaked(
    cluster: Cluster, tmp_path: Path
) -> None:
    report = _run(
        "chaos",
        "--jobs", "18", "--chaos-seconds", "75", "--settle-seconds", "150", "--workdir", str(tmp_path),
        out=tmp_path / "chaos.json",
        timeout=600,
    )  # fmt: skip
    assert report["converged"] == report["jobs"] == 18
    assert report["operator_kills"] >= 3, "the operator must really have been killed"
    assert sum(v for k, v in report["faults"].items() if k not in ("requests", "watch_cut")) >= 20


def test_fuzz_finds_no_traceback_no_nameless_refusal_and_no_late_refusal(
    cluster: Cluster, tmp_path: Path
) -> None:
    report = _run("fuzz", "--examples", "250", out=tmp_path / "fuzz.json", timeout=600)
    assert report["specs"] == 250
    assert report["accepted"] > 20
    assert report["refused_at_admission"] > 20
