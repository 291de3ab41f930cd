"""Session fixtures for the contract tests: verl itself, the tiny Qwen3-VL, our data in verl's hands.

Everything expensive (importing verl, building the model, converting the data) happens once per
session; each test then runs verl's own code on it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.verl_runtime import WORDS, expected_version, write_geo3k_hub_split, write_user_parquet


@pytest.fixture(autouse=True)
def _offline_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def verl_release() -> str:
    """The verl under test: the release installed here, or the one test_verl_071.py put first."""
    try:
        import verl
    except ImportError as error:  # a broken environment must fail loudly, never skip
        pytest.fail(
            f"verl is not importable ({error}); `make install` installs verl 0.9.1 without its GPU stack"
        )
    from importlib.metadata import version

    found = version("verl")
    assert found == expected_version(), f"verl {found} imported, the run asked for {expected_version()}"
    assert Path(verl.__file__).resolve().parent.parent.name != "fake_verl"
    return found


@pytest.fixture(scope="session")
def tiny_model(verl_release: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from grpo_trainer.testing.tiny_vlm import build_tiny_vlm

    # newline=True: verl 0.9's rollout needs "\n" to be one token, as it is in Qwen's vocabulary.
    return build_tiny_vlm(tmp_path_factory.mktemp("tiny") / "qwen3-vl", words=WORDS, newline=True)


@pytest.fixture(scope="session")
def tokenizer(tiny_model: Path) -> Any:
    from verl.utils import hf_tokenizer

    return hf_tokenizer(str(tiny_model))


@pytest.fixture(scope="session")
def processor(tiny_model: Path) -> Any:
    from verl.utils import hf_processor

    return hf_processor(str(tiny_model))


@pytest.fixture(scope="session")
def geo3k_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """geo3k converted by our preset code (trainer/grpo_trainer/data/geo3k.py), as `run` prepares it."""
    from grpo_trainer.data import geo3k

    hub = tmp_path_factory.mktemp("geo3k-hub")
    write_geo3k_hub_split(hub / "data" / "train-00000-of-00001.parquet", ["5", "7", "5"])
    write_geo3k_hub_split(hub / "data" / "test-00000-of-00001.parquet", ["7", "5"])
    out = tmp_path_factory.mktemp("geo3k")
    splits = geo3k.find_split_files(hub)
    files = {}
    for split in geo3k.SPLITS:
        files[split] = out / f"{split}.parquet"
        geo3k.convert_split(splits[split], split, files[split])
    return files


@pytest.fixture(scope="session")
def user_parquet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("user") / "safety.parquet"
    write_user_parquet(path)
    return path


@pytest.fixture(scope="session")
def gloo(verl_release: str) -> Iterator[None]:
    """torch.distributed on CPU, one rank: what FSDP and verl's checkpoint manager need."""
    import torch.distributed as dist

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()
