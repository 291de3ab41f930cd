"""What an attempt's log should not hold: a line per status report, and a last line cut off
mid-progress-bar when the attempt is stopped."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

import pytest
from grpo_trainer.kube import QUIET_LOGGERS, KubeStatusWriter
from grpo_trainer.logfile import AttemptLog

KUBECONFIG = (
    "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
    "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
    "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
)


@pytest.fixture
def restored_loggers():
    levels = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def test_the_status_writer_keeps_the_http_clients_request_lines_out(tmp_path, caplog, restored_loggers):
    """Each status report added `INFO httpx: HTTP Request: PATCH ... "HTTP/1.1 200 OK"` to the
    attempt's log, since the engines log at INFO; a warning of theirs still gets through."""
    caplog.set_level(logging.INFO)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET)
    config = tmp_path / "config"
    config.write_text(KUBECONFIG)
    KubeStatusWriter("job", "team-a", kubeconfig=str(config))
    for name in QUIET_LOGGERS:
        logger = logging.getLogger(name)
        logger.info('HTTP Request: PATCH https://k/apis/... "HTTP/1.1 200 OK"')
        logger.warning("retrying")
    assert [r.getMessage() for r in caplog.records] == ["retrying"] * len(QUIET_LOGGERS)


def test_a_stopped_progress_bar_is_ended_with_a_newline(tmp_path):
    """A suspended attempt's log ended mid-progress-bar (`\\r 45%|####`): the next line appended
    to it, and `tail`, ran on from there."""
    path = tmp_path / "attempt-1.log"
    with AttemptLog(path, "header"):
        os.write(2, b"\r 10%|#         | 1/10\r 20%|##        | 2/10")
    assert path.read_bytes().endswith(b" 2/10\n")
    with AttemptLog(path, "again"):
        os.write(1, b"whole line\n")
    assert path.read_bytes().endswith(b"whole line\n")
    assert b" 2/10\n=== " in path.read_bytes()


def test_a_sigterm_mid_progress_bar_leaves_a_whole_last_line(tmp_path):
    """The attempt process as a suspend stops it: SIGTERM while a bar is drawn."""
    path = tmp_path / "attempt-1.log"
    script = (
        "import os, signal, sys, time\n"
        "from pathlib import Path\n"
        "from grpo_trainer.logfile import AttemptLog\n"
        "def stop(signum, frame): raise SystemExit(76)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        f"with AttemptLog(Path({str(path)!r}), 'h'):\n"
        "    i = 0\n"
        "    while True:\n"
        "        i += 1\n"
        "        os.write(2, f'\\r{i}%|'.encode())\n"
        "        time.sleep(0.01)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.DEVNULL, env=os.environ)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not path.exists() or b"%|" not in path.read_bytes()):
        time.sleep(0.05)
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) == 76
    assert path.read_bytes().endswith(b"%|\n")
