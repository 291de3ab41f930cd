"""`grpo-train plan` and `kubectl grpo plan` plan a job for its trainer image, not for this machine.

The LoRA example planned where vLLM and bitsandbytes cannot be imported, and again where both
can, gives one plan, byte for byte: the CUDA image's (adamw_8bit, compiled rollouts, the
importance-sampling keys written out), naming the image. Every key that shapes the loss is in the
plan with its value and reason, and no reason speaks of "here" for the machine that plans.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from grpo_trainer.cli import main
from support.examples import example_document, with_changes
from support.trainer_inputs import EXAMPLES

EXAMPLE = EXAMPLES / "lora-single-gpu.yaml"
OPTIONAL = ("vllm", "bitsandbytes")
# Run in a fresh interpreter, so that nothing this process imported can answer for it.
PLAN = """
import importlib.abc, importlib.metadata, importlib.util, sys
hidden = set(sys.argv[1].split(",")) if sys.argv[1] else set()

class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Absent())
real_find_spec = importlib.util.find_spec
def find_spec(name, package=None):  # what it answers for a package that is not installed
    return None if name.split(".")[0] in hidden else real_find_spec(name, package)
importlib.util.find_spec = find_spec
real_version = importlib.metadata.version
def version(name):
    if name in hidden:
        raise importlib.metadata.PackageNotFoundError(name)
    return real_version(name)
importlib.metadata.version = version
for name in sys.argv[2].split(",") if sys.argv[2] else ():
    __import__(name)  # the packages this run must be able to import
if sys.argv[3] == "kubectl":
    from grpo_kubectl.cli import main
else:
    from grpo_trainer.cli import main
sys.exit(main(sys.argv[4:]))
"""


def _plan_in_a_fresh_process(
    argv: list[str], *, hidden: tuple[str, ...] = (), present: tuple[str, ...] = (), site: Path | None = None,
    via: str = "grpo-train",
) -> str:  # fmt: skip
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-c", PLAN, ",".join(hidden), ",".join(present), via, *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.fixture
def optional_packages(tmp_path: Path) -> Path:
    """A site folder where vllm and bitsandbytes import and have package metadata, as in the image."""
    site = tmp_path / "site"
    for name, version in (("vllm", "0.24.0"), ("bitsandbytes", "0.50.2")):
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text(f"__version__ = {version!r}\n")
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return site


def test_the_plan_is_the_images_whether_or_not_the_optional_packages_import_here(
    optional_packages: Path,
) -> None:
    argv = ["plan", "--spec", str(EXAMPLE)]
    without = _plan_in_a_fresh_process(argv, hidden=OPTIONAL)
    with_them = _plan_in_a_fresh_process(argv, present=OPTIONAL, site=optional_packages)
    assert without == with_them
    as_json = _plan_in_a_fresh_process([*argv, "--json"], hidden=OPTIONAL)
    assert as_json == _plan_in_a_fresh_process([*argv, "--json"], present=OPTIONAL, site=optional_packages)
    # `kubectl grpo plan -f` is the same plan.
    kubectl = _plan_in_a_fresh_process(
        ["plan", "-f", str(EXAMPLE)], present=OPTIONAL, site=optional_packages, via="kubectl"
    )
    assert kubectl == without

    plan = json.loads(as_json)
    values = {s["key"]: s["value"] for s in plan["settings"]}
    assert plan["image"]["reference"] == "ghcr.io/grpo-operator/trainer-cuda:0.1.0"
    assert plan["image"]["manifest"] == "trainer-cuda:0.1.0"
    assert without.splitlines()[0] == (
        "# image: ghcr.io/grpo-operator/trainer-cuda:0.1.0 (the nvidia profile's default image in the "
        "operator's default settings); planned from the manifest of trainer-cuda:0.1.0"
    )
    assert "trl 1.16.0, peft 0.21.2, transformers 5.9.0" in plan["title"]
    assert values["optim"] == "adamw_8bit"
    assert values["generation"] == "compiled"
    assert values["cache_implementation"] == "static"
    assert "use_vllm" not in values
    assert values["vllm_importance_sampling_correction"] is False
    assert values["vllm_importance_sampling_mode"] == "sequence_mask"


def _plan_json(capsys: pytest.CaptureFixture[str], tmp_path: Path, **changes: Any) -> dict[str, Any]:
    manifest = example_document("lora-single-gpu")
    if changes:
        manifest = {**manifest, "spec": with_changes(manifest["spec"], changes)}
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump(manifest))
    assert main(["plan", "--spec", str(spec), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _settings(plan: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    return {s["key"]: (s["value"], s["why"]) for s in plan["settings"]}


def test_with_vllm_chosen_the_plan_says_how_the_loss_is_reweighted_and_what_is_dropped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    settings = _settings(_plan_json(capsys, tmp_path, rollout={"generation": "vllm", "memoryBudget": "16G"}))
    assert settings["use_vllm"][0] is True
    correction, why = settings["vllm_importance_sampling_correction"]
    assert correction is True
    assert "bf16 copy with the adapters merged in" in why
    mode, why = settings["vllm_importance_sampling_mode"]
    assert mode == "sequence_mask"
    assert "dropped from the loss" in why
    assert "a step holds 2 completions" in why
    assert "removes 1/2 of its gradient" in why
    assert settings["vllm_importance_sampling_clip_max"][0] == 3.0
    assert settings["vllm_importance_sampling_clip_min"] == (
        None,
        "TRL's default: no lower bound; a sequence far less likely under the policy is kept with a weight near 0",
    )
    assert settings["generation"][1].startswith("spec.rollout.generation: TRL's colocated vLLM")


def test_every_loss_setting_is_in_the_plan_with_its_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    settings = _settings(_plan_json(capsys, tmp_path))
    scale, why = settings["scale_rewards"]
    assert scale == "group"
    assert "divided by its group's reward std" in why
    assert "verl's dr_grpo does not (algorithm.norm_adv_by_std_in_grpo=false)" in why
    assert settings["epsilon_high"][0] == settings["epsilon"][0] == 0.2
    for key in ("delta", "mask_truncated_completions", "top_entropy_quantile", "off_policy_mask_threshold"):
        assert settings[key][1].startswith("TRL's default"), key
    sample, why = settings["export.sample"]
    assert sample == "row 0: 512 new tokens, temperature 0.7, min_p 0.1, top_k and top_p off"
    assert "generation_config top_k and top_p" in why


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"rollout": {"generation": "vllm", "memoryBudget": "16G"}},
        {"rollout": {"generation": "vllm"}},
        {"image": "ghcr.io/grpo-operator/trainer-cpu:0.1.0"},
        {"image": "registry.local/team/my-trainer:7"},
    ],
    ids=["example", "vllm-budget", "vllm-share", "cpu-image", "foreign-image"],
)
def test_no_reason_speaks_of_the_planning_machine(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, changes: dict[str, Any]
) -> None:
    plan = _plan_json(capsys, tmp_path, **changes)
    said = [s["why"] for s in plan["settings"]] + plan["warnings"] + [plan["title"], plan["image"]["why"]]
    assert not [why for why in said if re.search(r"\bhere\b", why)]


def test_a_plan_that_cannot_know_the_weights_says_what_it_assumed_for_vllm(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    settings = _settings(_plan_json(capsys, tmp_path, rollout={"generation": "vllm", "memoryBudget": "16G"}))
    value, why = settings["vllm memory"]
    assert value == "0.6 of the device"
    assert "assumed spec.rollout.gpuMemoryUtilization's share" in why
    assert "the pod sizes vLLM from the weights at start" in why
