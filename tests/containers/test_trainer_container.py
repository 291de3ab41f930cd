"""The CPU trainer image trains: examples/colours-cpu.yaml, resolved as the operator resolves it,
run by `grpo-train` inside the image with the head pod's mounts (the spec, the reward file, the
model and data claims read-only, the checkpoint claim) and its security context (user 1000, no
capabilities, no privilege escalation), without a network. Checkpoints and the export land on the
host folder standing for the checkpoint claim. The plan the trainer prints at the start of that
attempt is the one `grpo-train plan` makes outside the image for the same job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from grpo_operator.api.documents import job_document
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.children.resolved import resolve_job
from grpo_operator.config import Settings
from grpo_trainer.attempt import PLAN_END
from grpo_trainer.cli import main

from .conftest import REPO, docker

EXAMPLE = REPO / "examples" / "colours-cpu.yaml"
STEPS = 4


def _resolved_job(image: str) -> dict:
    document = job_document(EXAMPLE.read_text(), EXAMPLE.name)
    document["metadata"].update(namespace="images", uid="0000-images")
    spec = document["spec"]
    spec["algorithm"]["totalSteps"] = STEPS
    spec["checkpoint"]["saveInterval"] = 2
    # The image under test, as a job that names it: `grpo-train plan` outside plans for it too.
    spec["image"] = image
    return json.loads(
        resolve_job(GRPOJob.model_validate(document), Settings()).model_dump_json(by_alias=True)
    )


@dataclass(frozen=True)
class ColourRun:
    """One `grpo-train run` of the colour job in the CPU image, and where it left its files."""

    root: Path
    job: dict
    job_dir: Path
    output: str


@pytest.fixture(scope="module")
def colour_run(images, tmp_path_factory: pytest.TempPathFactory) -> ColourRun:
    tmp_path = tmp_path_factory.mktemp("colour-run")
    staged = tmp_path / "colours"
    subprocess.run(
        [sys.executable, "-m", "grpo_trainer.testing.colour_job", str(staged)], check=True, timeout=300
    )
    # Readable by the pod's user, as files copied onto a claim are (safetensors writes its file 0600).
    subprocess.run(["chmod", "-R", "a+rX", str(staged)], check=True)
    tag = images["cpu"]["RepoTags"][0]
    job = _resolved_job(tag)
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "job.json").write_text(json.dumps(job))
    reward = next(d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d["kind"] == "ConfigMap")
    (tmp_path / "reward").mkdir()
    (tmp_path / "reward" / "reward.py").write_text(reward["data"]["reward.py"])
    claim = tmp_path / "checkpoints"
    claim.mkdir()
    os.chown(claim, 1000, 1000)
    run = docker(
        "run", "--rm", "--user", "1000:1000", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "--network", "none", "--shm-size", "1g", "--env", "HF_HUB_OFFLINE=1",
        "--volume", f"{tmp_path / 'spec'}:/grpo/spec:ro",
        "--volume", f"{tmp_path / 'reward'}:/grpo/reward:ro",
        "--volume", f"{staged / 'models'}:/grpo/sources/demo-models:ro",
        "--volume", f"{staged / 'data'}:/grpo/sources/demo-data:ro",
        "--volume", f"{claim}:/grpo/checkpoints",
        tag, "run", "--spec", "/grpo/spec/job.json", "--no-report",
        timeout=900,
    )  # fmt: skip
    job_dir = claim / Path(job["paths"]["jobDir"]).relative_to("/grpo/checkpoints")
    return ColourRun(tmp_path, job, job_dir, run.stdout + run.stderr)


def test_the_cpu_image_trains_the_colour_job_onto_its_claim(colour_run: ColourRun) -> None:
    job_dir = colour_run.job_dir
    checkpoints = sorted(p.name for p in (job_dir / "checkpoints").iterdir())
    assert checkpoints, colour_run.output[-2000:]
    exported = {
        p.relative_to(job_dir / "export").as_posix() for p in (job_dir / "export").rglob("*") if p.is_file()
    }
    assert any(name.endswith(".safetensors") for name in exported), exported
    assert any("adapter_config.json" in name for name in exported), exported
    metrics = (job_dir / "metrics").glob("*")
    assert any(p.stat().st_size > 0 for p in metrics)


def test_the_plan_made_outside_is_the_one_the_image_logs_at_start(
    colour_run: ColourRun, capsys: pytest.CaptureFixture[str]
) -> None:
    """`grpo-train plan` here, for the job that names the CPU image, prints what the trainer in that
    image printed at the start of its attempt (both from the image's manifest), and the image's
    packages are its manifest's: a stale manifest would show in either."""
    log = (colour_run.job_dir / "metrics" / "attempt-1.log").read_text()
    assert "the installed packages are those of the trainer-cpu:" in log, log[:3000]
    assert "DIFFERS FROM THE MANIFEST" not in log
    start = log.index("grpo-train: the plan of attempt 1:\n") + len("grpo-train: the plan of attempt 1:\n")
    inside = log[start : log.index(f"\n{PLAN_END}", start)].splitlines()

    spec = colour_run.root / "spec" / "job.json"
    assert main(["plan", "--spec", str(spec)]) == 0
    outside = capsys.readouterr().out.splitlines()
    # The first line names the image: by its reference outside, by its own name inside; the
    # manifest is the same one.
    assert outside[0].endswith("planned from the manifest of trainer-cpu:0.1.0")
    assert (
        inside[0]
        == "# image: this pod's image (GRPO_IMAGE_FLAVOUR=cpu); planned from the manifest of trainer-cpu:0.1.0"
    )
    # Outside, the plan also says how the operator stops the job's pods (the save-on-stop bound, sized
    # from what the job has measured so far: after the attempt, its own save and step times); the
    # attempt, started before any was measured, prints the trainer's settings alone. Those are equal.
    assert outside[1].startswith("# save on stop: "), outside[1]
    assert inside[1:] == outside[2:]
