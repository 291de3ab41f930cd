"""`grpo-train plan` shows how the job's pods stop: the save-on-stop bound, the termination grace
period the operator gives them, and where each part came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from grpo_operator.api.stop_bound import MARGIN_SECONDS, SAVE_DEFAULTS, STEP_DEFAULTS
from grpo_trainer.cli import main
from support.examples import example_document, with_changes


def _spec(tmp_path: Path, document: dict[str, Any]) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def _plan(capsys: pytest.CaptureFixture[str], spec: str) -> dict[str, Any]:
    assert main(["plan", "--spec", spec, "--json"]) == 0
    plan: dict[str, Any] = json.loads(capsys.readouterr().out)
    return plan


def test_an_unmeasured_job_is_planned_with_its_engines_defaults(capsys, tmp_path):
    plan = _plan(capsys, _spec(tmp_path, example_document("colours-cpu")))
    stop = plan["saveOnStop"]
    grace = SAVE_DEFAULTS["trl"] + STEP_DEFAULTS["trl"] + MARGIN_SECONDS
    assert stop["enabled"] is True
    assert stop["terminationGracePeriodSeconds"] == grace
    assert stop["preStopSeconds"] == grace - MARGIN_SECONDS
    assert "default before a save is measured" in stop["save"]["why"]
    assert "default before a step is measured" in stop["step"]["why"]


def test_what_the_status_measured_sizes_the_grace(capsys, tmp_path):
    document = example_document("colours-cpu")
    document["status"] = {"checkpoint": {"saveSeconds": 20.0}, "metrics": {"stepSeconds": 10.0}}
    stop = _plan(capsys, _spec(tmp_path, document))["saveOnStop"]
    assert stop["save"] == {
        "seconds": 2 * 20 + 30,
        "why": "twice the last save (20 s, status.checkpoint.saveSeconds) + 30 s",
    }
    assert stop["step"]["seconds"] == 15
    assert stop["terminationGracePeriodSeconds"] == 70 + 15 + MARGIN_SECONDS


def test_the_spec_timeout_wins_and_the_text_names_it(capsys, tmp_path):
    document = with_changes(
        example_document("colours-cpu"), {"spec.checkpoint.saveOnStop": {"timeoutSeconds": 60}}
    )
    assert main(["plan", "--spec", _spec(tmp_path, document)]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    grace = 60 + STEP_DEFAULTS["trl"] + MARGIN_SECONDS
    assert line.startswith(
        f"# save on stop: {grace} s grace = save 60 s (spec.checkpoint.saveOnStop.timeoutSeconds)"
    )
    assert line.endswith(f"each Ray pod's preStop waits {grace - MARGIN_SECONDS} s at most")


def test_a_job_that_does_not_save_on_stop_says_what_a_stop_loses(capsys, tmp_path):
    document = with_changes(
        example_document("colours-cpu"), {"spec.checkpoint.saveOnStop": {"enabled": False}}
    )
    spec = _spec(tmp_path, document)
    assert _plan(capsys, spec)["saveOnStop"] == {"enabled": False, "terminationGracePeriodSeconds": 30}
    assert main(["plan", "--spec", spec]) == 0
    assert (
        "# save on stop: off (spec.checkpoint.saveOnStop.enabled): a planned stop loses"
        in capsys.readouterr().out
    )
