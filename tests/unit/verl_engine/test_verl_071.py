"""The same contract tests against verl 0.7.1, the geo3k Ascend recipe's release, where its code differs.

verl 0.7.1 builds prompts in its agent loop with the processor (no continuous-token builder), its
reward managers and workers assert one trajectory per call, its merger keeps the tied lm_head and
writes `lora_alpha: 0` into a PPO adapter's config, and its main_ppo migrates the legacy reward keys
our 0.7 overrides use. The dataset, reward and checkpoint tests run again in a fresh interpreter
with 0.7.1 (installed without dependencies into a git-ignored folder) first on PYTHONPATH; the
rest of the environment is the same.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.verl_runtime import REPO_ROOT, VERSION_ENV, verl_package

RELEASE = "0.7.1"
FILES = ("test_dataset.py", "test_rewards.py", "test_verl_checkpoint_code.py")


# One test per file, so that the inner loop's workers share them.
@pytest.mark.parametrize("tests", FILES)
def test_the_contract_tests_pass_against_verl_0_7_1(verl_release: str, tests: str) -> None:
    site = verl_package(RELEASE)
    here = Path(__file__).resolve().parent
    paths = [str(site), str(REPO_ROOT / "operator"), str(REPO_ROOT / "trainer")]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), VERSION_ENV: RELEASE}
    done = subprocess.run(
        # FSDP1 without LoRA is the same code in both releases; everything else is run again.
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "not fsdp1-full",
            str(here / tests),
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    tail = "\n".join((done.stdout + done.stderr).splitlines()[-60:])
    assert done.returncode == 0, f"contract tests against verl {RELEASE} failed:\n{tail}"
    assert " passed" in tail
