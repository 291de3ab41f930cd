"""The single-GPU LoRA recipe's adamw_8bit where bitsandbytes imports (the CUDA image), adamw_torch elsewhere, with the reason."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from grpo_trainer.engines.trl.job import optimizer, reasons, settings_from_job
from grpo_trainer.spec import load_job

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "lora-single-gpu.yaml"


@pytest.fixture
def installed_bitsandbytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A bitsandbytes package on sys.path (CI has none; the CUDA image has the real one)."""
    package = tmp_path / "site" / "bitsandbytes"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(package.parent))
    real = sys.modules.pop("bitsandbytes", None)
    yield package
    # The module imported here must not outlive the test: later jobs would get adamw_8bit.
    sys.modules.pop("bitsandbytes", None)
    if real is not None:
        sys.modules["bitsandbytes"] = real
    importlib.invalidate_caches()


def test_without_bitsandbytes_the_portable_optimizer_and_why() -> None:
    job = load_job(EXAMPLE)
    assert optimizer(job)[0] == "adamw_torch"
    assert settings_from_job(job).optim == "adamw_torch"
    assert "the single-GPU LoRA recipe's adamw_8bit needs bitsandbytes" in reasons(job)["optim"]


def test_with_bitsandbytes_the_seeds_adamw_8bit(installed_bitsandbytes: Path) -> None:
    job = load_job(EXAMPLE)
    assert settings_from_job(job).optim == "adamw_8bit"
    assert "adamw_8bit (bitsandbytes is installed)" in reasons(job)["optim"]


def test_a_bitsandbytes_that_does_not_import_falls_back(installed_bitsandbytes: Path) -> None:
    (installed_bitsandbytes / "__init__.py").write_text(
        "raise OSError('libcudart.so: cannot open shared object')\n"
    )
    name, why = optimizer(load_job(EXAMPLE))
    assert name == "adamw_torch"
    assert "bitsandbytes does not import here (OSError)" in why


def test_after_the_fake_package_is_gone_jobs_get_adamw_torch_again() -> None:
    assert "bitsandbytes" not in sys.modules
    assert optimizer(load_job(EXAMPLE))[0] == "adamw_torch"
