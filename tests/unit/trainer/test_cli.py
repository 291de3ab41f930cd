"""`grpo-train plan` and `validate` as a person (or CI) calls them."""

from __future__ import annotations

import json

import pytest
from grpo_trainer.cli import main
from grpo_trainer.engines.verl_configs import CACHE_ENV
from grpo_trainer.exitcodes import CONFIG_ERROR

from .helpers import EXAMPLES, VERL_CONFIG_CACHE, example_job


@pytest.fixture(autouse=True)
def _config_cache(verl_configs, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(VERL_CONFIG_CACHE))


def test_plan_prints_the_exact_command(capsys):
    assert main(["plan", "--spec", str(EXAMPLES / "geo3k-ascend-910b.yaml"), "--verl-version", "0.9.1"]) == 0
    out = capsys.readouterr().out
    assert "-m verl.trainer.main_ppo \\" in out
    assert "+actor_rollout_ref.rollout.engine_kwargs.vllm.mm_processor_cache_gb=0" in out
    assert "reward.custom_reward_function.path=" in out
    assert "/grpo_trainer/rewards/geo3k.py" in out
    assert "actor_rollout_ref.actor.fsdp_config.use_torch_compile=false" in out
    assert "#   VERL_PLATFORM=huawei" in out
    assert "# why:" in out


def test_plan_json_for_verl_07(capsys):
    assert (
        main(
            [
                "plan",
                "--spec",
                str(EXAMPLES / "geo3k-ascend-910b.yaml"),
                "--verl-version",
                "0.7.1",
                "--json",
                "--attempt",
                "3",
            ]
        )
        == 0
    )
    plan = json.loads(capsys.readouterr().out)
    overrides = [o["override"] for o in plan["overrides"]]
    assert plan["verlVersion"] == "0.7.1"
    assert any(o.startswith("custom_reward_function.path=") for o in overrides)
    assert not any(o.startswith("trainer.checkpoint_callback_class") for o in overrides)
    assert plan["env"]["VERL_FILE_LOGGER_PATH"].endswith("/metrics/attempt-3.jsonl")


@pytest.mark.parametrize("version", ["0.9.1", "0.7.1"])
def test_validate_an_example(capsys, version):
    assert (
        main(["validate", "--spec", str(EXAMPLES / "safegrpo-nvidia.yaml"), "--verl-version", version]) == 0
    )
    out = capsys.readouterr().out
    assert "rewards/safety.py :: compute_score" in out
    assert out.rstrip().endswith("ok")


def test_validate_reports_what_verl_would_reject(tmp_path, capsys):
    job = example_job("geo3k-two-node-nvidia", algorithm={"trainBatchSize": 100, "miniBatchSize": 20})
    spec = tmp_path / "job.json"
    spec.write_text(job.model_dump_json(by_alias=True))
    assert main(["validate", "--spec", str(spec), "--verl-version", "0.9.1"]) == CONFIG_ERROR
    out = capsys.readouterr().out
    assert (
        "problem: trainBatchSize x groupSize = 100 x 5 = 500 responses per step must be divisible by the 16 devices"
        in out
    )


def test_plan_refuses_the_trl_engine(capsys):
    assert (
        main(["plan", "--spec", str(EXAMPLES / "lora-single-gpu.yaml"), "--verl-version", "0.9.1"])
        == CONFIG_ERROR
    )
    assert "uses 'trl'" in capsys.readouterr().err


def test_an_untested_version_uses_the_nearest_family(capsys):
    assert (
        main(["plan", "--spec", str(EXAMPLES / "safegrpo-nvidia.yaml"), "--verl-version", "0.10.0", "--json"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["verlVersion"] == "0.9.1"


def test_a_version_too_old(capsys):
    assert (
        main(["plan", "--spec", str(EXAMPLES / "safegrpo-nvidia.yaml"), "--verl-version", "0.6.1"])
        == CONFIG_ERROR
    )


def test_an_invalid_spec_names_the_field(tmp_path, capsys):
    spec = tmp_path / "job.yaml"
    spec.write_text((EXAMPLES / "safegrpo-nvidia.yaml").read_text().replace("groupSize: 8", "groupSize: 1"))
    assert main(["plan", "--spec", str(spec), "--verl-version", "0.9.1"]) == CONFIG_ERROR
    assert "spec.algorithm.groupSize" in capsys.readouterr().err
