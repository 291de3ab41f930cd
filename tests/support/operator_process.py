"""The real operator, run as a subprocess against the test cluster.

Tests start, kill and restart it like an orchestrator would; nothing is mocked. Its JSON log
goes to a file whose tail is attached to a failing test's report.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OperatorProcess:
    """One `grpo-operator run` process; restartable."""

    def __init__(
        self,
        kubeconfig: Path,
        log_file: Path,
        *,
        resync_seconds: float = 3.0,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.log_file = log_file
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "GRPO_RESYNC_SECONDS": str(resync_seconds),
            "GRPO_METRICS_PORT": str(self.metrics_port),
            "GRPO_HEALTH_PORT": str(self.health_port),
            "GRPO_LOG_FORMAT": "json",
            **(extra_env or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> None:
        log = self.log_file.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "grpo_operator", "run"],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the operator exited with {self.proc.returncode}:\n{self.tail()}")
            if self.healthy():
                return
            time.sleep(0.3)
        raise RuntimeError(f"the operator did not become healthy in {timeout} s:\n{self.tail()}")

    def wait_leading(self, timeout: float = 60) -> None:
        """Until the operator holds its Lease. /healthz answers before the first acquisition, and a
        job created in between is visited by the takeover pass rather than by its own event, which
        a test counting RayJobs by trigger must not mistake for work left to the safety net."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.log_file.exists() and '"leading as ' in self.log_file.read_text(errors="replace"):
                return
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"the operator exited with {self.proc.returncode}:\n{self.tail()}")
            time.sleep(0.2)
        raise RuntimeError(f"the operator did not take its Lease in {timeout} s:\n{self.tail()}")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/healthz", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            return r.read().decode()

    def kill(self) -> None:
        """SIGKILL: no clean-up, as when a node dies under the operator."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def tail(self, lines: int = 40) -> str:
        if not self.log_file.exists():
            return ""
        return "".join(self.log_file.read_text(errors="replace").splitlines(keepends=True)[-lines:])
