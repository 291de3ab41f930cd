"""`grpo-train run`: an exit 0 of the attempt's process is success only when the attempt recorded its end.

The attempt is ended from inside, as a library (or, before the sandbox sent data only, a reward's
return value) could end it: a `sitecustomize` on the child's path replaces one of the attempt's
steps with `os._exit(0)` or a SIGKILL. The entrypoint is a real `grpo-train run` process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml
from grpo_operator.api.contract import COMPLETE_FILE, UNKNOWN
from grpo_trainer.attempt import mark_exported, unfinished
from grpo_trainer.engines.base import ExportResult
from grpo_trainer.spec import load_job
from support.processes import alive
from support.trainer_inputs import EXAMPLES

REPO = Path(__file__).resolve().parents[3]

ENDING = """
import os, signal
import grpo_trainer.attempt as attempt
from grpo_trainer.engines.trl.engine import TrlEngine

def end(*args, **kwargs):
    if os.environ["END_WITH"] == "sleep":
        open(os.environ["CHILD_PID_FILE"], "w").write(str(os.getpid()))
        import time
        time.sleep(600)
    if os.environ["END_WITH"] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(0)

if os.environ["END_AT"] == "start":
    attempt.decide_resume = end
else:
    TrlEngine.export = end
"""


def trl_job(tmp_path: Path) -> Path:
    manifest = yaml.safe_load((EXAMPLES / "lora-single-gpu.yaml").read_text())
    manifest["spec"]["dataset"]["train"] = [str(tmp_path / "missing.parquet")]
    manifest["spec"]["model"]["source"] = str(tmp_path / "model")
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump(manifest))
    return spec


def grpo_train_run(
    tmp_path: Path, spec: Path, end_at: str, end_with: str = "exit"
) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(textwrap.dedent(ENDING))
    paths = [str(site), str(REPO / "operator"), str(REPO / "trainer")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "END_AT": end_at, "END_WITH": end_with}
    command = "import sys; from grpo_trainer.cli import main; sys.exit(main())"
    workdir = tmp_path / "w"
    run = ["run", "--spec", str(spec), "--workdir", str(workdir), "--no-report"]
    return subprocess.run(
        [sys.executable, "-c", command, *run],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def failure_line(stderr: str) -> dict:
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("GRPO_FAILURE "), stderr[-2000:]
    return json.loads(last.removeprefix("GRPO_FAILURE "))


def test_an_attempt_ended_with_exit_0_before_training_finished_fails(tmp_path: Path) -> None:
    done = grpo_train_run(tmp_path, trl_job(tmp_path), end_at="start")
    assert done.returncode == UNKNOWN, done.stderr[-2000:]
    failure = failure_line(done.stderr)
    assert failure["reason"] == "ExitedWithoutFinishing"
    assert (
        "attempt 1 exited with code 0 but training did not finish (no completion mark" in failure["message"]
    )
    job = load_job(str(tmp_path / "job.yaml"), str(tmp_path / "w"))
    log = (Path(job.paths.metrics_dir) / "attempt-1.log").read_text()
    assert log.strip().splitlines()[-1].startswith("GRPO_FAILURE ")


def test_an_attempt_ended_with_exit_0_before_its_export_fails(tmp_path: Path) -> None:
    spec = trl_job(tmp_path)
    job = load_job(str(spec), str(tmp_path / "w"))
    Path(job.paths.job_dir).mkdir(parents=True)
    (Path(job.paths.job_dir) / COMPLETE_FILE).write_text(json.dumps({"attempt": 1, "step": 3}))
    done = grpo_train_run(tmp_path, spec, end_at="export")
    assert done.returncode == UNKNOWN, done.stderr[-2000:]
    failure = failure_line(done.stderr)
    assert failure["reason"] == "ExitedWithoutFinishing"
    assert "its export did not finish" in failure["message"]


def test_an_attempt_killed_by_a_signal_ends_the_entrypoint_with_that_signal(tmp_path: Path) -> None:
    done = grpo_train_run(tmp_path, trl_job(tmp_path), end_at="start", end_with="kill")
    assert done.returncode == -signal.SIGKILL
    # The supervisor beat while its attempt ran (a stopping pod's hook reads it), and recorded the end.
    [heartbeat] = (tmp_path / "w").rglob("attempt-1.alive")
    assert int(heartbeat.read_text()) >= 1
    [ended] = (tmp_path / "w").rglob("attempt-1.exit.json")
    assert json.loads(ended.read_text())["exitCode"] == 128 + signal.SIGKILL


def test_the_completion_record_says_which_attempt_reached_the_end(tmp_path: Path) -> None:
    job = load_job(str(trl_job(tmp_path)), str(tmp_path / "w"))
    assert "no completion mark" in (unfinished(job, 2) or "")
    Path(job.paths.job_dir).mkdir(parents=True)
    (Path(job.paths.job_dir) / COMPLETE_FILE).write_text(json.dumps({"attempt": 1, "step": 3}))
    assert "records no export by attempt 2" in (unfinished(job, 2) or "")
    mark_exported(job, 1, ExportResult(3, "/m", None))
    assert "records no export by attempt 2" in (unfinished(job, 2) or "")
    mark_exported(job, 2, None)  # the spec asks for no export: the attempt still reached the end
    assert unfinished(job, 2) is None
    record = json.loads((Path(job.paths.job_dir) / COMPLETE_FILE).read_text())
    assert record == {"attempt": 1, "step": 3, "export": {"attempt": 2, "step": None}}


def test_the_attempt_dies_with_its_supervisor(tmp_path: Path) -> None:
    """An entrypoint killed outright (SIGKILL: no handler, nothing passed on) takes its attempt
    with it, instead of leaving it training unseen beside the next attempt."""
    import time

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(ENDING))
    pid_file = tmp_path / "child.pid"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(REPO / "operator"), str(REPO / "trainer")]),
        "END_AT": "start",
        "END_WITH": "sleep",
        "CHILD_PID_FILE": str(pid_file),
    }
    command = "import sys; from grpo_trainer.cli import main; sys.exit(main())"
    run = ["run", "--spec", str(trl_job(tmp_path)), "--workdir", str(tmp_path / "w"), "--no-report"]
    supervisor = subprocess.Popen([sys.executable, "-c", command, *run], env=env)
    try:
        deadline = time.monotonic() + 90
        while not pid_file.is_file() or not pid_file.read_text():
            assert supervisor.poll() is None, "the entrypoint ended before its attempt slept"
            assert time.monotonic() < deadline, "the attempt never reached its start"
            time.sleep(0.1)
        child = int(pid_file.read_text())
        supervisor.kill()
        supervisor.wait()
        deadline = time.monotonic() + 10
        while alive(child):
            assert time.monotonic() < deadline, "the attempt outlived its supervisor"
            time.sleep(0.05)
    finally:
        supervisor.kill()
