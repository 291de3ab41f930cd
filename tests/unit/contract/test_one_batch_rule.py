"""One batch arithmetic, one sentence: the operator, the verl engine's check of its composed config and
the TRL engine refuse the same sizes with the same words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.config import Settings
from grpo_operator.validation import validate
from grpo_trainer.engines.trl.job import settings_from_job
from grpo_trainer.engines.verl.compose import compose, rules
from grpo_trainer.engines.verl.launch import plan_launch
from grpo_trainer.engines.verl.overrides import Resume
from grpo_trainer.engines.verl.versions import PROFILES
from grpo_trainer.failures import ConfigError
from grpo_trainer.spec import Attempt, resolve_manifest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "lora-single-gpu.yaml"


def one_device(engine: str, **algorithm: Any) -> dict[str, Any]:
    manifest = yaml.safe_load(EXAMPLE.read_text())
    spec = {**manifest["spec"], "engine": {**manifest["spec"]["engine"], "name": engine}}
    spec["algorithm"] = {**spec["algorithm"], **algorithm}
    if engine == "verl":
        spec["engine"].pop("lora", None)
    return {**manifest, "metadata": {"name": "t", "namespace": "ns"}, "spec": spec}


def operator_says(manifest: dict[str, Any]) -> list[str]:
    return [str(p) for p in validate(GRPOJob.model_validate(manifest), Settings())]


def verl_says(manifest: dict[str, Any], config_dir: Any) -> list[str]:
    job = resolve_manifest(manifest)
    launch = plan_launch(
        job,
        PROFILES["0.9"],
        Attempt.from_env(job, {}),
        model_path="/m",
        train_files=["/t.parquet"],
        val_files=["/v.parquet"],
        resume=Resume("disable"),
    )
    return rules(compose(config_dir, launch.plan.rendered()))


def trl_says(manifest: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as refused:
        settings_from_job(resolve_manifest(manifest))
    return str(refused.value)


CASES = {
    "micro-batch does not split a device's update": {"microBatchSizePerDevice": 3},
    "mini-batch does not split the step": {"trainBatchSize": 3, "miniBatchSize": 2},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_three_agree(case: str, verl_configs: dict[str, Any]) -> None:
    said_by_operator = operator_says(one_device("trl", **CASES[case]))
    assert said_by_operator, "the operator refuses the sizes"
    assert trl_says(one_device("trl", **CASES[case])) == "; ".join(said_by_operator)
    assert verl_says(one_device("verl", **CASES[case]), verl_configs["0.9.1"]) == operator_says(
        one_device("verl", **CASES[case])
    )
    assert operator_says(one_device("verl", **CASES[case])) == said_by_operator
