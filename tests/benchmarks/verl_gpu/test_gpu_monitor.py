"""`benchmarks.verl_gpu`: the GPU monitor beside every attempt, and what it says per step.

Three leases found our job's steps 5-7 % slower than verl run directly, the same step of the same
batches, and always most in one step's update. The code of the two runs is not the only thing that
differs between them: a GPU held at a lower clock (heat, power), or one with less free memory,
slows a step too. So the supervisor runs nvidia-smi's own sampling loop for the whole attempt and
stamps its lines as it stamps the attempt's output, and `record` reports per step the clock,
power, load, memory and throttle reasons seen inside it. nvidia-smi cannot run here (no GPU): a
stand-in on the PATH prints what nvidia-smi prints.
"""

from __future__ import annotations

import json
import re
import stat
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import pytest

from benchmarks.verl_gpu import attempts, machine, monitor, record


@pytest.fixture(autouse=True)
def _no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attempts, "stop_ray", lambda: None)


# What `nvidia-smi --query-gpu=... --format=csv,noheader,nounits -lms N` prints for one GPU, every
# N ms until it is stopped: a steady clock first, then a held-down one.
STAND_IN = textwrap.dedent(
    f"""\
    #!{sys.executable}
    import sys, time
    assert any(a.startswith("--query-gpu=index,memory.used") for a in sys.argv), sys.argv
    assert "-lms" in sys.argv, sys.argv
    for i in range(1000):
        clock = 1980 if i < 8 else 1410
        reason = "0x0000000000000000" if i < 8 else "0x0000000000000004"
        print(f"0, {{81000 + i}}, 97, {{clock}}, 650.5, {{60 + i // 4}}, {{reason}}", flush=True)
        time.sleep(0.1)
    """
)


def _supervised(tmp_path: Path, code: str) -> Path:
    """An attempt folder whose command runs `code`, supervised to its end (exit 0)."""
    folder = tmp_path / "attempt-1"
    folder.mkdir()
    (folder / "command.json").write_text(json.dumps({"command": [sys.executable, "-c", code], "env": {}}))
    assert attempts.supervise(folder) == 0
    return folder


def test_the_monitor_runs_beside_the_attempt_and_stops_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "nvidia-smi"
    stand_in.write_text(STAND_IN)
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    attempt = "import time; time.sleep(1.0); print('step:1 - timing_s/step:0.8', flush=True); time.sleep(0.3)"
    folder = _supervised(tmp_path, attempt)

    lines = (folder / "gpu.log").read_text().splitlines()
    stamps = [float(re.match(r"\[\s*([\d.]+)s\] 0, ", line)[1]) for line in lines]
    assert len(stamps) >= 8, lines
    # Stamped on the attempt's clock, and stopped with it (the stand-in would print for 100 s).
    assert stamps == sorted(stamps)
    assert stamps[-1] < 3.0
    step_end = float(re.search(r"\[\s*([\d.]+)s\] step:1", (folder / "output.log").read_text())[1])
    seen = monitor.gpu_per_step((folder / "gpu.log").read_text(), {1: step_end}, {1: 0.8})
    assert seen[1]["samples"] >= 5
    assert seen[1]["utilization_pct_mean"] == 97.0


def test_each_step_gets_what_the_gpu_did_inside_it() -> None:
    log = "\n".join(
        [
            "[     0.5s] 0, 1000, 0, 345, 90.0, 30, 0x0000000000000000",
            "[    10.0s] 0, 81000, 95, 1980, 600.0, 55, 0x0000000000000000",
            "[    20.0s] 0, 82000, 99, 1980, 640.0, 58, 0x0000000000000000",
            "[    21.0s] Unable to determine the device handle for GPU0000:00:00.0: Unknown Error",
            "[    30.0s] 0, 83000, 98, 1410, 700.0, 66, 0x0000000000000004",
            "[    40.0s] 0, 84000, 97, [N/A], 690.0, 67, 0x0000000000000004",
            "[    50.0s] 0, 80000, 96, 1500, 695.0, 68, 0x0000000000000004",
        ]
    )
    seen = monitor.gpu_per_step(log, {1: 25.0, 2: 55.0}, {1: 20.0, 2: 30.0})
    assert seen[1] == {
        "samples": 2,
        "sm_clock_mhz_mean": 1980.0,
        "power_w_mean": 620.0,
        "utilization_pct_mean": 97.0,
        "memory_used_gib_max": round(82000 / 1024, 2),
        "temperature_c_max": 58.0,
        "throttle_reasons": [],
    }
    # Step 2 from 25 to 55 s: the unreadable sample is left out, the held clock's reason kept.
    assert seen[2]["samples"] == 2
    assert seen[2]["sm_clock_mhz_mean"] == 1455.0
    assert seen[2]["throttle_reasons"] == ["0x0000000000000004"]
    assert monitor.gpu_per_step(log, {3: 5.0}, {3: 1.0}) == {}


def test_record_reads_it_from_the_archived_logs(tmp_path: Path) -> None:
    folder = tmp_path / "work" / "attempt-1"
    folder.mkdir(parents=True)
    (folder / "output.log").write_text(
        "[   100.0s] (TaskRunnerV1 pid=1) step:1 - timing_s/step:90.0\n"
        "[   190.0s] (TaskRunnerV1 pid=1) step:2 - timing_s/step:88.0\n"
    )
    (folder / "gpu.log").write_text(
        "[    50.0s] 0, 80000, 90, 1980, 600.0, 50, 0x0000000000000000\n"
        "[   150.0s] 0, 81000, 91, 1900, 610.0, 52, 0x0000000000000000\n"
    )
    archive = tmp_path / "shapes-4b-logs.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "work", arcname=".")
    seen = record.logged_gpu(archive, "attempt_1", {1: 90.0, 2: 88.0})
    assert seen[1]["sm_clock_mhz_mean"] == 1980.0
    assert seen[2]["sm_clock_mhz_mean"] == 1900.0
    assert record.logged_gpu(archive, "attempt_2", {1: 90.0}) == {}


def test_the_host_is_watched_beside_the_attempt_and_summed_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory, shared memory, /tmp's free disk, load, processes and the machine's age every few
    seconds (`host.log`), from this machine's own /proc, stopped with the attempt; its summary
    keeps the extremes."""
    monkeypatch.setattr(attempts, "HOST_SAMPLE_S", 0.2)
    monkeypatch.setattr(monitor.shutil, "which", lambda name: None)  # no nvidia-smi here
    folder = _supervised(tmp_path, "import time; time.sleep(1.2)")

    lines = (folder / "host.log").read_text().splitlines()
    time.sleep(0.6)  # stopped with the attempt: no sample after supervise returned
    assert (folder / "host.log").read_text().splitlines() == lines
    stamps = [float(re.match(r"\[\s*([\d.]+)s\] available_gib=", line)[1]) for line in lines]
    assert 4 <= len(stamps) <= 10, lines
    assert stamps == sorted(stamps)
    assert stamps[-1] < 2.5
    seen = monitor.host_extremes((folder / "host.log").read_text())
    assert set(seen) == {
        "min_available_gib",
        "max_shmem_gib",
        "min_tmp_free_gib",
        "max_load1",
        "max_processes",
        "max_machine_up_min",
    }
    assert 0 < seen["min_available_gib"] < 1024
    booted = float(Path("/proc/uptime").read_text().split()[0]) / 60
    assert 0 < seen["max_machine_up_min"] <= round(booted, 1) + 0.1
    assert seen["max_processes"] >= 2


def test_the_host_summary_keeps_the_worst_moment() -> None:
    text = (
        "[     5.0s] available_gib=90.5 shmem_gib=2 tmp_free_gib=40 load1=3.5 processes=120 machine_up_min=21.4\n"
        "[    10.0s] available_gib=12.25 shmem_gib=30.5 tmp_free_gib=38 load1=15.9 processes=410 machine_up_min=21.5\n"
        "[    15.0s] available_gib=60 shmem_gib=10 tmp_free_gib=39 load1=9 processes=300 machine_up_min=21.6\n"
    )
    assert monitor.host_extremes(text) == {
        "min_available_gib": 12.25,
        "max_shmem_gib": 30.5,
        "min_tmp_free_gib": 38.0,
        "max_load1": 15.9,
        "max_processes": 410.0,
        "max_machine_up_min": 21.6,
    }
    assert monitor.host_extremes("py-spy not found\n") == {}


def test_the_machines_age_is_read_from_its_uptime(tmp_path: Path) -> None:
    """A lent machine boots when it is lent and goes back after 30 minutes held: its uptime says
    how much of that a plan has left, also in the host.log of a call that never came back."""
    uptime = tmp_path / "uptime"
    uptime.write_text("1263.57 20011.02\n")
    assert machine.machine_minutes(uptime) == 21.1
