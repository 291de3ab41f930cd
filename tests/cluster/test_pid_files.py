"""hack/cluster-lib.sh's pid files: a stale one never names someone else's process.

`make demo` once skipped starting its operator because the pid file of one that had died named a
pid the system had since given to another python of the same virtual environment (the marker, the
interpreter's path, matched). The start time recorded beside the pid tells them apart.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _pid_of(cluster_dir: Path, name: str) -> subprocess.CompletedProcess[str]:
    script = f". hack/lib.sh && . hack/cluster-lib.sh && pid_of {name}"
    env = {**os.environ, "GRPO_CLUSTER_DIR": str(cluster_dir)}
    return subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True)


def _start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19]


def test_a_pid_file_names_its_process_only_while_that_process_lives(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    # A live python of this environment, as a component would be.
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (pids / "ours.pid").write_text(f"{process.pid}\n{sys.executable}\n{_start_time(process.pid)}\n")
        found = _pid_of(tmp_path, "ours")
        assert found.returncode == 0
        assert found.stdout.strip() == str(process.pid)

        # The same pid and marker, recorded for a process that started at another time: stale.
        (pids / "stale.pid").write_text(f"{process.pid}\n{sys.executable}\n1\n")
        assert _pid_of(tmp_path, "stale").returncode == 1
    finally:
        process.kill()
        process.wait()
    assert _pid_of(tmp_path, "ours").returncode == 1


def test_start_process_records_the_start_time(tmp_path: Path) -> None:
    script = f'. hack/lib.sh && . hack/cluster-lib.sh && start_process sleeper {sys.executable} -c "import time; time.sleep(60)"'
    env = {**os.environ, "GRPO_CLUSTER_DIR": str(tmp_path)}
    subprocess.run(["bash", "-c", script], cwd=REPO, env=env, check=True, timeout=30)
    pid, marker, started = (tmp_path / "pids" / "sleeper.pid").read_text().split("\n")[:3]
    try:
        assert marker == sys.executable
        assert started == _start_time(int(pid))
        assert _pid_of(tmp_path, "sleeper").stdout.strip() == pid
    finally:
        os.kill(int(pid), 9)
