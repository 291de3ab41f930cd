"""One verdict everywhere, offline: every local judge refuses the same specs, naming the same field.

The cluster tier (tests/integration/test_kubectl_grpo.py) adds the API server's own answer (a
server-side dry run) and the operator's reconcile for the same cases.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from grpo_operator.api.documents import job_document
from grpo_operator.api.rules import rule_violations
from grpo_operator.config import Settings
from grpo_operator.validation import validate
from grpo_operator.verdict import manifest_problems, parse
from grpo_trainer.cli import main as grpo_train
from grpo_trainer.engines.verl.configs import CACHE_ENV
from grpo_trainer.failures import CONFIG_ERROR
from support.verdict_cases import BASE, CASES, Case

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


@pytest.fixture(autouse=True)
def _config_cache(verl_configs, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(next(iter(verl_configs.values())).parents[3]))


def _write(tmp_path: Path, manifest: dict) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return str(path)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_judge_in_the_cluster_refuses_it(case: Case):
    """Stand-ins of the cluster's two judges: the schema and CEL (server), validation.py (operator)."""
    job, schema = parse(case.manifest())
    if case.judge == "server":
        fields = [p.field for p in schema] or [v.field for v in rule_violations(job.spec.to_wire())]
        # metadata.name's pattern and length are the CRD schema's; validate() checks them here.
        fields = fields or [p.field for p in validate(job, Settings()) if p.field.startswith("metadata.")]
    else:
        assert job is not None, schema
        assert not rule_violations(job.spec.to_wire()), "the server would have refused it first"
        fields = [p.field for p in validate(job, Settings())]
    assert case.field in fields


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_offline_verdict_names_the_field(case: Case):
    assert case.field in [p.field for p in manifest_problems(case.manifest())]


@pytest.mark.parametrize("command", ["validate", "plan"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_grpo_train_refuses_it(case: Case, command: str, tmp_path, capsys):
    assert grpo_train([command, "--spec", _write(tmp_path, case.manifest())]) == CONFIG_ERROR
    out, err = capsys.readouterr()
    assert f"{case.field}:" in out + err
    assert "Traceback" not in out + err


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_is_accepted_by_every_offline_judge(example: Path, capsys):
    manifest = job_document(example.read_text(), example.name)
    assert manifest_problems(manifest) == []
    assert grpo_train(["validate", "--spec", str(example)]) == 0
    assert grpo_train(["plan", "--spec", str(example)]) == 0


def test_the_base_spec_is_valid():
    """Every case is one change away from a job every judge accepts."""
    assert manifest_problems(BASE) == []


def test_plan_refuses_preset_and_train_instead_of_using_the_preset(tmp_path, capsys):
    case = next(c for c in CASES if c.id == "preset-and-train")
    assert grpo_train(["plan", "--spec", _write(tmp_path, case.manifest())]) == CONFIG_ERROR
    err = capsys.readouterr().err
    assert "problem: spec.dataset: set exactly one of dataset.preset" in err
