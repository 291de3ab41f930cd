"""llama.cpp's GGUF tools, from the sources the `llama-cpp-python` sdist vendors, found or installed.

The GGUF export runs llama.cpp's own code as a dependency, never a copy of it: the converter
(`convert_hf_to_gguf.py` with its `conversion/` package and its matching `gguf-py`) and the
`llama-quantize` and `llama-mtmd-cli` programs built from the same tree. PyPI's `llama-cpp-python`
0.3.36 carries a llama.cpp recent enough to convert Qwen3-VL, language model and vision projector
(`conversion/qwen3vl.py`); PyPI's `gguf` package alone has no converter, and no PyPI package ships
the quantize program built. So `install` downloads that sdist with pip, unpacks its
`vendor/llama.cpp`, and builds the two programs with CMake (CPU only, static, portable):

    DIR/llama.cpp/       the vendored tree: convert_hf_to_gguf.py, conversion/, gguf-py/, models/
    DIR/build/bin/       llama-quantize, llama-mtmd-cli
    DIR/INSTALLED        written last: the sdist's version and how long the build took

    python -m grpo_trainer.engines.trl.gguf_tools install [--dest DIR] [--jobs N]

`make install` runs it into `~/.cache/grpo-operator/llama.cpp-<version>` (once per version and
machine: every checkout, a fresh clone's too, finds it there); the CUDA trainer image into
/opt/llama.cpp, named by `GRPO_LLAMA_CPP_DIR`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

LLAMA_CPP_PYTHON = "0.3.36"
"""The llama-cpp-python sdist whose vendored llama.cpp is used (images/versions.env pins the same)."""
ENV_DIR = "GRPO_LLAMA_CPP_DIR"
"""Where the trainer image put the tools."""
PROGRAMS = ("llama-quantize", "llama-mtmd-cli")
MARKER = "INSTALLED"


def build_cache() -> Path:
    """The machine's build cache that hack/lib.sh names too (`GRPO_CACHE_DIR`, else the user's cache
    folder): builds there are keyed by version and outlive a clone, so a fresh one builds nothing."""
    configured = os.environ.get("GRPO_CACHE_DIR")
    if configured:
        return Path(configured)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "grpo-operator"


def default_dir() -> Path:
    """`GRPO_LLAMA_CPP_DIR`, else the build cache's folder for the pinned version."""
    configured = os.environ.get(ENV_DIR)
    if configured:
        return Path(configured)
    return build_cache() / f"llama.cpp-{LLAMA_CPP_PYTHON}"


@dataclass(frozen=True)
class Tools:
    root: Path

    @property
    def source(self) -> Path:
        return self.root / "llama.cpp"

    @property
    def converter(self) -> Path:
        return self.source / "convert_hf_to_gguf.py"

    @property
    def quantize(self) -> Path:
        return self.root / "build" / "bin" / "llama-quantize"

    @property
    def cli(self) -> Path:
        return self.root / "build" / "bin" / "llama-mtmd-cli"

    def missing(self) -> list[str]:
        """What a GGUF export would lack here (empty when the tools are complete)."""
        wanted = [self.root / MARKER, self.converter, self.quantize, self.cli]
        return [str(path) for path in wanted if not path.exists()]


def find_tools(root: str | os.PathLike[str] | None = None) -> Tools:
    return Tools(Path(root) if root is not None else default_dir())


def _say(message: str) -> None:
    print(f"[gguf-tools] {message}", flush=True)


def _run(command: Sequence[str], *, cwd: Path | None = None) -> None:
    """Run a build step with its output streamed (ninja's [n/N] lines are the progress)."""
    _say("$ " + " ".join(str(c) for c in command))
    subprocess.run(list(command), cwd=cwd, check=True)


def fetch_sdist(into: Path) -> Path:
    """The pinned llama-cpp-python sdist, downloaded with pip (no build, no dependencies)."""
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary=:all:",
            f"llama-cpp-python=={LLAMA_CPP_PYTHON}",
            "-d",
            str(into),
        ]
    )
    (sdist,) = into.glob("llama_cpp_python-*.tar.gz")
    return sdist


def unpack_vendored(sdist: Path, dest: Path) -> None:
    """Extract the sdist's vendor/llama.cpp tree (and nothing else) to `dest`."""
    prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON}/vendor/llama.cpp/"
    with tarfile.open(sdist) as archive:
        members = []
        for member in archive.getmembers():
            if member.name.startswith(prefix):
                member.name = member.name[len(prefix) :]
                members.append(member)
        if not members:
            raise SystemExit(f"{sdist} has no {prefix}")
        archive.extractall(dest, members=members, filter="data")


def cmake_build(source: Path, build: Path, jobs: int) -> None:
    """Configure a CPU-only, static, portable build and make only the two programs."""
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    _run(
        [
            "cmake",
            "-S",
            str(source),
            "-B",
            str(build),
            *generator,
            "-DCMAKE_BUILD_TYPE=Release",
            "-DBUILD_SHARED_LIBS=OFF",
            # Portable binaries: an image built on one CPU runs on another.
            "-DGGML_NATIVE=OFF",
            "-DLLAMA_BUILD_TESTS=OFF",
            "-DLLAMA_BUILD_EXAMPLES=OFF",
            "-DLLAMA_BUILD_SERVER=OFF",
            "-DLLAMA_BUILD_APP=OFF",
            "-DLLAMA_OPENSSL=OFF",
        ]
    )
    _run(["cmake", "--build", str(build), "--target", *PROGRAMS, "-j", str(jobs)])


def install(dest: Path, *, jobs: int, sdist: Path | None = None) -> Tools:
    """Download, unpack and build into `dest`; a finished install of the same version is kept."""
    tools = Tools(dest)
    marker = dest / MARKER
    if not tools.missing() and marker.read_text().startswith(f"llama-cpp-python=={LLAMA_CPP_PYTHON}\n"):
        _say(f"llama.cpp from llama-cpp-python {LLAMA_CPP_PYTHON} is already installed in {dest}")
        return tools
    started = time.monotonic()
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="llama-cpp-sdist-") as scratch:
        if sdist is None:
            _say(f"downloading the llama-cpp-python {LLAMA_CPP_PYTHON} sdist (~75 MB)")
            sdist = fetch_sdist(Path(scratch))
        _say(f"unpacking vendor/llama.cpp from {sdist.name}")
        unpack_vendored(sdist, tools.source)
    _say(f"building {' and '.join(PROGRAMS)} with {jobs} jobs (CPU only; about 15 minutes on 2 cores)")
    cmake_build(tools.source, dest / "build", jobs)
    seconds = time.monotonic() - started
    marker.write_text(f"llama-cpp-python=={LLAMA_CPP_PYTHON}\nseconds={seconds:.0f}\n")
    _say(f"done in {seconds / 60:.1f} min: {dest}")
    return tools


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gguf_tools", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("install", help="download the sdist and build the tools (kept when done)")
    add.add_argument(
        "--dest", type=Path, default=None, help=f"default: ${ENV_DIR} or ~/.cache/grpo-operator/llama.cpp-<v>"
    )
    add.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    add.add_argument("--sdist", type=Path, default=None, help="a downloaded sdist instead of pip's")
    where = sub.add_parser("where", help="print the tools folder; exit 1 when it is incomplete")
    where.add_argument("--dest", type=Path, default=None)
    args = parser.parse_args(argv)
    dest = args.dest or default_dir()
    if args.command == "where":
        missing = find_tools(dest).missing()
        print(dest)
        for path in missing:
            print(f"missing: {path}", file=sys.stderr)
        return 1 if missing else 0
    install(dest, jobs=args.jobs, sdist=args.sdist)
    return 0


if __name__ == "__main__":
    sys.exit(main())
