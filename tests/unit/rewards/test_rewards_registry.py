"""The registry, and every built-in loaded the way verl loads `custom_reward_function.path`."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from grpo_trainer.rewards import BUILTIN_REWARDS, RewardSpec, get_reward

SAMPLES: dict[str, tuple[str, str, Any]] = {
    "geo3k": ("<think>.</think>\\boxed{\\frac{1}{2}}", "0.5", None),
    "geo3k-lenient": ("<think>.</think>\\boxed{\\frac{2}{4}}", "0.5", None),
    "reasoning-format": ("<REASONING>r</REASONING><SOLUTION>3.0</SOLUTION>", "3.0", None),
    "safety": ("<think>.</think>I'm sorry, but I can't help with that.", "", {"safety_label": "unsafe"}),
}


def load_like_verl(path: str) -> Any:
    """verl 0.9 `load_module`: a hashed name, never registered in sys.modules."""
    spec = importlib.util.spec_from_file_location(f"custom_module_{hash(os.path.abspath(path))}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_builtin_names() -> None:
    assert set(BUILTIN_REWARDS) == {"geo3k", "geo3k-lenient", "reasoning-format", "safety"}
    assert get_reward("custom").module == "grpo_trainer.rewards.custom"
    with pytest.raises(
        ValueError,
        match="unknown reward 'gsm8k'; expected one of: geo3k, geo3k-lenient, reasoning-format, safety, custom",
    ):
        get_reward("gsm8k")


@pytest.mark.parametrize("name", sorted(BUILTIN_REWARDS))
def test_spec_points_at_an_existing_absolute_file(name: str) -> None:
    spec = get_reward(name)
    assert Path(spec.path).is_absolute()
    assert Path(spec.path).is_file()
    assert spec.pkg_uri == f"pkg://{spec.module}"


@pytest.mark.parametrize("name", sorted(BUILTIN_REWARDS))
def test_loaded_by_path_scores_like_the_package_module(name: str) -> None:
    spec = get_reward(name)
    response, truth, info = SAMPLES[name]
    by_path = getattr(load_like_verl(spec.path), spec.function)
    expected = spec.load()("data", response, truth, info)
    assert by_path(data_source="data", solution_str=response, ground_truth=truth, extra_info=info) == expected
    assert expected["score"] == spec.score_range[1]
    if spec.batch_function:
        batch = getattr(load_like_verl(spec.path), spec.batch_function)
        assert batch(["data"], [response], [truth], [info]) == [expected]
    for trl_name in spec.trl_functions:
        assert callable(getattr(load_like_verl(spec.path), trl_name))


def test_custom_entry_loads_by_path(tmp_path: Path) -> None:
    user = tmp_path / "mine.py"
    user.write_text(
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n    return 0.25\n"
    )
    entry = load_like_verl(get_reward("custom").path).compute_score
    assert entry("d", "x", "y", None, custom_path=str(user)) == 0.25


def test_builtins_load_by_path_in_a_fresh_interpreter() -> None:
    """No help from modules this test process has already imported."""
    code = (
        "import importlib.util, sys\n"
        "for path in sys.argv[1:]:\n"
        "    spec = importlib.util.spec_from_file_location('m' + str(abs(hash(path))), path)\n"
        "    module = importlib.util.module_from_spec(spec)\n"
        "    spec.loader.exec_module(module)\n"
        "    print(module.compute_score('d', '', '', None)['score'])\n"
    )
    paths = [spec.path for spec in BUILTIN_REWARDS.values()]
    done = subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.split()) == len(paths)


def test_importing_the_package_does_not_import_sympy() -> None:
    code = (
        "import sys, grpo_trainer.rewards.geo3k, grpo_trainer.rewards.safety; print('sympy' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


def test_specs_are_immutable() -> None:
    spec = get_reward("geo3k")
    assert isinstance(spec, RewardSpec)
    with pytest.raises(AttributeError):
        spec.function = "other"  # type: ignore[misc]
