"""`grpo-train plan` and `validate` as a person (or CI) calls them."""

from __future__ import annotations

import json

import pytest
import yaml
from grpo_trainer.cli import main
from grpo_trainer.engines.verl.configs import CACHE_ENV
from grpo_trainer.failures import CONFIG_ERROR
from support.examples import example_document
from support.trainer_inputs import EXAMPLES, VERL_CONFIG_CACHE, example_job


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
        "problem: spec.algorithm.trainBatchSize: trainBatchSize × groupSize = 100 × 5 = 500 responses per step "
        "must be divisible by the 16 devices"
    ) in out


def test_plan_prints_the_trl_plan_with_reasons(capsys):
    assert main(["plan", "--spec", str(EXAMPLES / "lora-single-gpu.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# image: ghcr.io/grpo-operator/trainer-cuda:0.1.0")
    assert lines[1].startswith("# save on stop: ")
    assert lines[2].startswith("# TRL GRPOTrainer + peft LoRA on one device")
    settings = {line.split()[0]: line for line in lines[3:]}
    assert settings["learning_rate"].endswith("# spec.algorithm.learningRate")
    assert '"dr_grpo"' in settings["loss_type"]
    assert "the single-GPU LoRA recipe" in settings["adam_beta2"]
    assert settings["lora.r"].split()[1] == "16"
    assert "forward passes per optimiser update" in settings["gradient_accumulation_steps"]


def test_plan_json_for_trl(capsys):
    assert main(["plan", "--spec", str(EXAMPLES / "lora-single-gpu.yaml"), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["engine"] == "trl"
    assert plan["command"] is None
    values = {s["key"]: s["value"] for s in plan["settings"]}
    assert (values["num_generations"], values["max_completion_length"]) == (2, 1024)


def test_validate_a_trl_job(capsys):
    assert main(["validate", "--spec", str(EXAMPLES / "lora-single-gpu.yaml")]) == 0
    assert capsys.readouterr().out.rstrip().endswith("ok")


def _trl_spec(tmp_path, **changes):
    manifest = yaml.safe_load((EXAMPLES / "lora-single-gpu.yaml").read_text())
    for section, values in changes.items():
        manifest["spec"].setdefault(section, {}).update(values)
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump(manifest))
    return str(spec)


@pytest.mark.parametrize("command", ["plan", "validate"])
def test_a_trl_job_with_broken_arithmetic_is_refused_with_the_operators_words(tmp_path, capsys, command):
    spec = _trl_spec(tmp_path, algorithm={"microBatchSizePerDevice": 3})
    assert main([command, "--spec", spec]) == CONFIG_ERROR
    out, err = capsys.readouterr()
    # validate's verdict is its output; plan prints a plan, so its problems go to stderr.
    said = out if command == "validate" else err
    assert "problem: spec.algorithm.microBatchSizePerDevice: each device gets 2 responses" in said


def test_validate_checks_a_trl_jobs_override_names(tmp_path, capsys):
    spec = _trl_spec(tmp_path, engine={"overrides": ["no_such_option=1", "lora.use_rslora=true"]})
    assert main(["validate", "--spec", spec]) == CONFIG_ERROR
    out = capsys.readouterr().out
    assert "problem: engine.overrides: GRPOConfig has no field 'no_such_option'" in out
    assert "use_rslora" not in out, "a LoraConfig field is known"


@pytest.fixture
def without_verl(monkeypatch):
    """A laptop without verl (the test environment has it, for the contract tests)."""
    from grpo_trainer.engines.verl import configs, engine

    for module in (configs, engine):
        monkeypatch.setattr(module, "installed_version", lambda: None)
    monkeypatch.setattr(engine, "installed_config_dir", lambda: None)


def test_plan_without_verl_installed_is_for_the_images_verl(capsys, without_verl, tmp_path):
    """The README's own `grpo-train plan --spec examples/safegrpo-nvidia.yaml`, on a laptop without
    verl: the plan is for the verl of the image the job runs in, the CUDA image's 0.9.1."""
    assert main(["plan", "--spec", str(EXAMPLES / "safegrpo-nvidia.yaml"), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["verlVersion"] == "0.9.1"
    assert plan["image"]["manifest"] == "trainer-cuda:0.1.0"
    assert not plan["warnings"]
    # The Ascend seed stack's image holds verl 0.7.1, and a job that names it is planned for that.
    seed = example_document("geo3k-ascend-910b")
    seed["spec"]["image"] = "registry.local/trainer-ascend:0.1.0-a2-seed"
    spec = tmp_path / "seed.yaml"
    spec.write_text(yaml.safe_dump(seed))
    assert main(["plan", "--spec", str(spec), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verlVersion"] == "0.7.1"
    # An image without verl (the CPU image): the newest release the trainer supports, said so.
    cpu = example_document("safegrpo-nvidia")
    cpu["spec"]["image"] = "ghcr.io/grpo-operator/trainer-cpu:0.1.0"
    spec.write_text(yaml.safe_dump(cpu))
    assert main(["plan", "--spec", str(spec)]) == 0
    assert "warning: verl is not installed here: this is the plan for verl 0.9.1" in capsys.readouterr().err


def test_validate_fetches_verls_configuration_into_the_users_cache(
    tmp_path, monkeypatch, capsys, without_verl
):
    """No manual fetch, and nothing written relative to the folder it is run from."""
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["validate", "--spec", str(EXAMPLES / "lora-single-gpu.yaml")]) == 0  # TRL: no verl
    assert main(["validate", "--spec", str(EXAMPLES / "safegrpo-nvidia.yaml")]) == 0
    fetched = tmp_path / "cache" / "grpo-operator" / "verl-configs" / "0.9.1" / "verl" / "trainer" / "config"
    assert (fetched / "ppo_trainer.yaml").is_file()
    assert "fetching verl 0.9.1's configuration" in capsys.readouterr().err
    assert list(elsewhere.iterdir()) == []
