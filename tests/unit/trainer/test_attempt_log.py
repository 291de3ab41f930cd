"""The attempt's log on the volume: what a person reads after the Ray cluster is gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from grpo_operator.api.contract import RETRYABLE
from grpo_trainer.logfile import AttemptLog, RotatingSink

from .test_run import geo3k_job

REPO = Path(__file__).resolve().parents[3]


def test_a_failed_attempt_leaves_its_whole_output_on_the_volume(tmp_path, fake_verl):
    """A real `grpo-train run` process: its own lines, the engine's, and the failure line."""
    job = geo3k_job(tmp_path)
    spec = tmp_path / "job.json"
    spec.write_text(job.model_dump_json(by_alias=True))
    env = {
        **os.environ,
        "FAKE_VERL_MODE": "oom",
        "PYTHONPATH": os.pathsep.join([str(fake_verl), str(REPO / "operator"), str(REPO / "trainer")]),
    }
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from grpo_trainer.cli import main; sys.exit(main())",
            "run",
            "--spec",
            str(spec),
            "--no-report",
            "--verl-version",
            "0.9.1",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == RETRYABLE, run.stderr
    # Ray still gets everything on the process's own streams: the operator reads the failure line there.
    assert run.stderr.strip().splitlines()[-1].startswith("GRPO_FAILURE ")
    log = (Path(job.paths.metrics_dir) / "attempt-1.log").read_text()
    assert log.startswith("=== ")
    assert "grpo-train attempt 1 of default/geo3k-qwen3-vl-4b-npu" in log.splitlines()[0]
    assert "engine command:" in log  # the trainer's own output
    assert "step 1 started" in log  # the engine's stdout
    assert "CUDA out of memory. Tried to allocate 2.00 GiB" in log  # the engine's stderr
    failure = log.strip().splitlines()[-1]
    assert json.loads(failure.removeprefix("GRPO_FAILURE "))["reason"] == "OutOfMemory"


def test_the_log_is_bounded_and_keeps_the_newest_output(tmp_path):
    path = tmp_path / "attempt-1.log"
    sink = RotatingSink(path, max_bytes=100)
    for i in range(30):
        sink.write(f"line {i:02d}\n".encode())  # 8 bytes each
    sink.close()
    rotated = Path(f"{path}.1")
    assert path.stat().st_size <= 100
    assert rotated.stat().st_size <= 100
    # The two files together are the newest lines, in order, without a gap.
    numbers = [
        int(line.split()[1]) for line in rotated.read_text().splitlines() + path.read_text().splitlines()
    ]
    assert numbers == list(range(numbers[0], 30))
    assert len(numbers) > 12


def test_a_chunk_larger_than_the_budget_keeps_its_end(tmp_path):
    sink = RotatingSink(tmp_path / "a.log", max_bytes=10)
    sink.write(b"0123456789abcdef")
    sink.close()
    assert (tmp_path / "a.log").read_bytes() == b"6789abcdef"


def test_a_log_that_cannot_be_written_never_stops_the_attempt(tmp_path, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("")
    with AttemptLog(blocked / "metrics" / "attempt-1.log") as kept:
        print("training goes on")
    assert kept.sink is None
    assert "training without it" in caplog.text


@pytest.mark.parametrize("stream", [1, 2])
def test_child_processes_output_is_kept(tmp_path, capfd, stream):
    """fd-level: what a subprocess writes (verl, a C extension) lands in the file too."""
    path = tmp_path / "attempt-2.log"
    with AttemptLog(path, "header"):
        subprocess.run(
            [sys.executable, "-c", f"import os; os.write({stream}, b'from the child\\n')"], check=True
        )
    captured = capfd.readouterr()
    assert "from the child" in (captured.out if stream == 1 else captured.err)
    assert path.read_text().splitlines()[1:] == ["from the child"]
