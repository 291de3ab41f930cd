"""Finding and installing llama.cpp's GGUF tools: one pinned sdist, found where the image or make put it."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from grpo_trainer.engines.trl import gguf_tools
from grpo_trainer.engines.trl.gguf import require_tools
from grpo_trainer.failures import ConfigError

REPO = Path(__file__).resolve().parents[3]


def test_the_sdist_is_the_one_the_cuda_image_pins() -> None:
    pins = dict(
        line.split("=", 1)
        for line in (REPO / "images" / "versions.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert pins["CUDA_LLAMA_CPP_PYTHON_VERSION"] == gguf_tools.LLAMA_CPP_PYTHON


def test_the_image_folder_wins_over_the_checkout_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(gguf_tools.ENV_DIR, str(tmp_path / "opt"))
    assert gguf_tools.default_dir() == tmp_path / "opt"
    monkeypatch.delenv(gguf_tools.ENV_DIR)
    monkeypatch.setenv("GRPO_CACHE_DIR", str(tmp_path / "cache"))
    assert gguf_tools.default_dir() == tmp_path / "cache" / f"llama.cpp-{gguf_tools.LLAMA_CPP_PYTHON}"


def test_missing_tools_are_a_configuration_error_naming_the_field(tmp_path: Path) -> None:
    tools = gguf_tools.find_tools(tmp_path)
    assert len(tools.missing()) == 4
    with pytest.raises(ConfigError, match=r"^export\.gguf: llama\.cpp's GGUF tools are not installed here"):
        require_tools(tools)
    assert gguf_tools.main(["where", "--dest", str(tmp_path)]) == 1


def _sdist(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_only_the_vendored_llama_cpp_is_unpacked(tmp_path: Path) -> None:
    top = f"llama_cpp_python-{gguf_tools.LLAMA_CPP_PYTHON}"
    sdist = _sdist(
        tmp_path / "s.tar.gz",
        {
            f"{top}/llama_cpp/llama.py": b"bindings",
            f"{top}/vendor/llama.cpp/convert_hf_to_gguf.py": b"converter",
            f"{top}/vendor/llama.cpp/conversion/qwen3vl.py": b"qwen3vl",
        },
    )
    gguf_tools.unpack_vendored(sdist, tmp_path / "src")
    assert sorted(str(p.relative_to(tmp_path / "src")) for p in (tmp_path / "src").rglob("*.py")) == [
        "conversion/qwen3vl.py",
        "convert_hf_to_gguf.py",
    ]


def test_a_finished_install_is_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "tools"
    tools = gguf_tools.Tools(root)
    for path in (tools.converter, tools.quantize, tools.cli):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    (root / gguf_tools.MARKER).write_text(f"llama-cpp-python=={gguf_tools.LLAMA_CPP_PYTHON}\nseconds=1\n")
    assert gguf_tools.install(root, jobs=1).missing() == []
    assert "already installed" in capsys.readouterr().out
    assert gguf_tools.main(["where", "--dest", str(root)]) == 0
