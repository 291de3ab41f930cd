"""The CPU trainer image trains: examples/colours-cpu.yaml, resolved as the operator resolves it,
run by `grpo-train` inside the image with the head pod's mounts (the spec, the reward file, the
model and data claims read-only, the checkpoint claim) and its security context (user 1000, no
capabilities, no privilege escalation), without a network. Checkpoints and the export land on the
host folder standing for the checkpoint claim."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from grpo_operator.api.documents import job_document
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.children.resolved import resolve_job
from grpo_operator.config import Settings

from .conftest import REPO, docker

EXAMPLE = REPO / "examples" / "colours-cpu.yaml"
STEPS = 4


def _resolved_job(tmp_path: Path) -> dict:
    document = job_document(EXAMPLE.read_text(), EXAMPLE.name)
    document["metadata"].update(namespace="images", uid="0000-images")
    spec = document["spec"]
    spec["algorithm"]["totalSteps"] = STEPS
    spec["checkpoint"]["saveInterval"] = 2
    return json.loads(
        resolve_job(GRPOJob.model_validate(document), Settings()).model_dump_json(by_alias=True)
    )


def test_the_cpu_image_trains_the_colour_job_onto_its_claim(images, tmp_path: Path) -> None:
    staged = tmp_path / "colours"
    subprocess.run(
        [sys.executable, "-m", "grpo_trainer.testing.colour_job", str(staged)], check=True, timeout=300
    )
    # Readable by the pod's user, as files copied onto a claim are (safetensors writes its file 0600).
    subprocess.run(["chmod", "-R", "a+rX", str(staged)], check=True)
    job = _resolved_job(tmp_path)
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
        images["cpu"]["RepoTags"][0], "run", "--spec", "/grpo/spec/job.json", "--no-report",
        timeout=900,
    )  # fmt: skip
    job_dir = claim / Path(job["paths"]["jobDir"]).relative_to("/grpo/checkpoints")
    checkpoints = sorted(p.name for p in (job_dir / "checkpoints").iterdir())
    assert checkpoints, run.stdout[-2000:]
    exported = {
        p.relative_to(job_dir / "export").as_posix() for p in (job_dir / "export").rglob("*") if p.is_file()
    }
    assert any(name.endswith(".safetensors") for name in exported), exported
    assert any("adapter_config.json" in name for name in exported), exported
    metrics = (job_dir / "metrics").glob("*")
    assert any(p.stat().st_size > 0 for p in metrics)
