"""Beside every attempt: the GPUs' and the host's samples, and the start-up's stacks (py-spy)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from .machine import machine_minutes
from .phases import STAMP
from .stack import py_spy

GPU_QUERY = (
    "index",
    "memory.used",
    "utilization.gpu",
    "clocks.sm",
    "power.draw",
    "temperature.gpu",
    "clocks_throttle_reasons.active",
)
"""What the GPU monitor records every GPU_SAMPLE_MS, one line per GPU (`gpu.log`, each line
stamped like output.log)."""
GPU_SAMPLE_MS = 1000
NO_THROTTLE = "0x0000000000000000"
HOST_SAMPLE_S = 5.0


def host_sample(tmp: Path = Path("/tmp")) -> dict[str, float]:
    """The machine's side of an attempt at one moment: memory available, shared memory (tmpfs, Ray's
    object store), free disk under /tmp, load, process count and the machine's age. Three leases
    were lost to a machine that stopped answering or went back during a 4B attempt, with no trace
    of why; these are the candidates, the 30-minute hold among them."""
    info: dict[str, int] = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        name, _, rest = line.partition(":")
        value = rest.split()
        info[name] = int(value[0]) if value else 0
    gib = 1024**2  # meminfo counts kB
    return {
        "available_gib": round(info.get("MemAvailable", 0) / gib, 1),
        "shmem_gib": round(info.get("Shmem", 0) / gib, 1),
        "tmp_free_gib": round(shutil.disk_usage(tmp).free / 1024**3, 1),
        "load1": round(os.getloadavg()[0], 1),
        "processes": float(sum(1 for p in Path("/proc").iterdir() if p.name.isdigit())),
        "machine_up_min": machine_minutes(),
    }


def watch_host(file: Path, started: float, done: threading.Event, every: float) -> None:
    """`host.log`: a host_sample every `every` seconds until `done`, stamped as output.log is."""
    with open(file, "w") as out:
        while True:
            sample = " ".join(f"{k}={v:g}" for k, v in host_sample().items())
            out.write(f"[{time.monotonic() - started:8.1f}s] {sample}\n")
            out.flush()
            if done.wait(every):
                return


def host_extremes(text: str) -> dict[str, float]:
    """From `host.log`: the least memory available, the most shared memory, the least free disk
    under /tmp, the highest load and process count, and the machine's age at the last sample
    ({} without samples)."""
    rows = [dict(re.findall(r"(\w+)=([\d.]+)", line)) for line in text.splitlines()]
    rows = [r for r in rows if r]
    if not rows:
        return {}
    pick_by = {
        "available_gib": min,
        "shmem_gib": max,
        "tmp_free_gib": min,
        "load1": max,
        "processes": max,
        "machine_up_min": max,
    }
    return {
        f"{'min' if how is min else 'max'}_{key}": how(float(r[key]) for r in rows if key in r)
        for key, how in pick_by.items()
        if any(key in r for r in rows)
    }


def start_gpu_monitor(file: Path, started: float) -> subprocess.Popen[str] | None:
    """nvidia-smi's own loop (one process for the whole attempt, not one per sample) reporting the
    GPUs' memory, load, clock, power, temperature and throttle reasons, each line stamped with the
    seconds since `started` as output.log's are: what tells a slower step of one run from the
    same step of another apart from the code (a clock held down, less free memory). None where
    there is no nvidia-smi."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None
    process = subprocess.Popen(
        [
            tool,
            f"--query-gpu={','.join(GPU_QUERY)}",
            "--format=csv,noheader,nounits",
            "-lms",
            str(GPU_SAMPLE_MS),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )

    def stamp() -> None:
        assert process.stdout is not None
        with open(file, "w") as out:
            for line in process.stdout:
                out.write(f"[{time.monotonic() - started:8.1f}s] {line}")
                out.flush()

    threading.Thread(target=stamp, daemon=True).start()
    return process


def _mean(rows: list[tuple[float, ...]], column: int) -> float:
    return round(sum(row[column] for row in rows) / len(rows), 1)


def gpu_per_step(
    gpu_log: str, step_ends: dict[int, float], step_seconds: dict[int, float]
) -> dict[int, dict[str, Any]]:
    """Per step, what the GPU monitor saw between the step's start and end (its line's stamp less
    its time): mean SM clock, power and load, the most memory used, the hottest reading, and the
    throttle reasons other than none (nvidia-smi's bit masks, as it prints them)."""
    rows: list[tuple[float, ...]] = []
    reasons: list[str] = []
    for line in gpu_log.splitlines():
        stamped = STAMP.match(line)
        if stamped is None:
            continue
        fields = [field.strip() for field in line[stamped.end() :].split(",")]
        if len(fields) != len(GPU_QUERY):
            continue  # nvidia-smi's own messages
        try:
            rows.append((float(stamped[1]), *(float(v) for v in fields[1:6])))
        except ValueError:  # "[N/A]" and the like
            continue
        reasons.append(fields[6])
    found: dict[int, dict[str, Any]] = {}
    for step, end in sorted(step_ends.items()):
        begin = end - step_seconds.get(step, 0.0)
        inside = [i for i, row in enumerate(rows) if begin <= row[0] <= end]
        if not inside:
            continue
        window = [rows[i] for i in inside]
        found[step] = {
            "samples": len(window),
            "sm_clock_mhz_mean": _mean(window, 3),
            "power_w_mean": _mean(window, 4),
            "utilization_pct_mean": _mean(window, 2),
            "memory_used_gib_max": round(max(row[1] for row in window) / 1024, 2),
            "temperature_c_max": max(row[5] for row in window),
            "throttle_reasons": sorted({reasons[i] for i in inside} - {NO_THROTTLE}),
        }
    return found


SAMPLED_TITLES = re.compile(r"^(ray::|VLLM::)|python")
"""Which processes' stacks are sampled: Python interpreters, and the Ray and vLLM workers that
rename themselves."""
SAMPLING_SKIPS = ("dashboard", "log_monitor", "monitor.py", "runtime_env")
"""Ray's own service processes: not where the start-up goes."""
SAMPLES_MAX_BYTES = 64 * 1024 * 1024


def sampled_processes(root: int) -> list[tuple[int, str]]:
    """(pid, title) of the Python processes under `root` (the attempt's command: Ray's local
    instance, its workers and vLLM's engine all descend from it), Ray's service ones left out."""
    parents: dict[int, int] = {}
    titles: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # it ended meanwhile
            continue
        # stat: "pid (comm) state ppid ...", where comm may hold spaces and parentheses
        parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
        titles[int(entry.name)] = title
    found = []
    for pid, title in titles.items():
        ancestor = pid
        while ancestor not in (root, 0, 1) and ancestor in parents:
            ancestor = parents[ancestor]
        first = title.split(" ", 1)[0]
        if (
            ancestor == root
            and SAMPLED_TITLES.search(Path(first).name)
            and not any(word in title for word in SAMPLING_SKIPS)
        ):
            found.append((pid, title))
    return sorted(found)


def sample_stacks(file: Path, root: int, every: float, started: float, done: threading.Event) -> None:
    """Every `every` seconds until `done`, the stack of each Python process under `root` (py-spy,
    non-blocking: the processes never stop for it), stamped like output.log, so the start-up's
    phases can be split by what each process was doing. Steps are not sampled: they are what
    runs compare."""
    tool = py_spy()
    with open(file, "w") as out:
        if tool is None:
            out.write("py-spy not found: no stacks sampled\n")
            return
        while not done.wait(every) and out.tell() < SAMPLES_MAX_BYTES:
            stamp = time.monotonic() - started
            for pid, title in sampled_processes(root):
                result = subprocess.run(
                    [tool, "dump", "--nonblocking", "--pid", str(pid)],
                    capture_output=True,
                    text=True,
                    errors="replace",
                    timeout=60,
                    check=False,
                )
                out.write(f"=== [{stamp:8.1f}s] pid {pid} {title[:160]}\n{result.stdout}{result.stderr}\n")
            out.flush()
