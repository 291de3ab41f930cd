"""The trainer images' Python layers, resolved by pip for their platform without building anything.

    python images/lock.py write              # images/trainer/cuda.lock from images/versions.env
    python images/lock.py check cuda x86_64  # the lock still resolves, and to itself
    python images/lock.py check ascend aarch64

`write` resolves the CUDA image's pins (images/versions.env CUDA_*, plus grpo_trainer's own
`trainer` extra, which the image installs last) with pip's resolver on manylinux x86-64
(`pip install --dry-run --report`, wheels only, nothing installed), and writes every package of
the answer with its version: the lock that Dockerfile.cuda installs under and that
benchmarks/gpu_stack_requirements.txt must agree with. It resolves for Python 3.11, the oldest
Python an image of Dockerfile.cuda runs (its `cpu` target's, Debian's), so that the lock holds for
both; the CUDA image's own Python 3.12 is what `check` then proves. `check` resolves an image's
pins again for its Python on one architecture, with the lock as constraints for the CUDA image,
and fails when pip finds no answer or, for the CUDA image on x86-64, any package the lock does not
pin at that version.

The few packages that the images build from source are left out of the resolution, with the
reason in SOURCE_BUILT; sdist-only pure-Python dependencies get a wheel built here first
(SDIST_ONLY), as pip would build one inside the image.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VERSIONS = REPO / "images" / "versions.env"
LOCK = REPO / "images" / "trainer" / "cuda.lock"
# Each image's version prefix in versions.env, its Python and the extras it installs packages with.
IMAGES = {
    "cuda": {"prefixes": ("CUDA_",), "python": "3.12"},
    "ascend": {"prefixes": ("ASCEND_",), "python": "3.11"},
}
EXTRAS = {"ray": "default", "verl": "verl-core"}
# Built from source inside the images, so not resolvable as wheels for another platform:
SOURCE_BUILT = {
    "flash-attn": "compiled against the installed torch (--no-build-isolation)",
    "llama-cpp-python": "only its sdist is downloaded, for the vendored llama.cpp",
    "vllm-ascend": "builds its kernels against CANN",
}
# vLLM for Ascend is built from its sdist with VLLM_TARGET_DEVICE=empty (pure Python).
SOURCE_BUILT_BY_IMAGE = {"ascend": {"vllm": "built from its sdist with VLLM_TARGET_DEVICE=empty"}}
SDIST_ONLY = {"antlr4-python3-runtime": "4.9.3"}
# torch_npu's x86-64 wheels ask for PyTorch's own CPU build (torch==<version>+cpu), which only
# PyTorch's index has (the Ascend image installs torch from it, TORCH_INDEX_URL): there it is
# resolved without its dependencies and checked to ask for the pinned torch.
NEEDS_TORCH_INDEX = {("ascend", "x86_64"): "torch-npu"}
TORCH_FAMILY = {"torch", "torchvision", "torchaudio", "torch-npu"}
# Ubuntu 24.04 (the CUDA base) has glibc 2.39, Ubuntu 22.04 (CANN) 2.35: pip takes only the
# platform tags it is given, so every manylinux tag up to the image's glibc is listed.
GLIBC = {"cuda": 39, "ascend": 35}
LOCK_HEADER = """\
# Every Python package of the CUDA trainer image, at the version it installs: pip's resolution of
# images/versions.env's CUDA_* pins plus grpo_trainer's `trainer` extra on manylinux x86-64, for
# Python 3.11 (the CPU image's) and checked for 3.12 (the CUDA image's).
# Made by `python images/lock.py write`; do not edit by hand.
# Dockerfile.cuda installs under it (and so does its `cpu` target); every pin of
# benchmarks/gpu_stack_requirements.txt equals the one here (tests/unit/images checks both).
# Left out (built from source in the image): {source_built}.
"""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(image: str) -> dict[str, str]:
    """The image's Python pins from versions.env: canonical package name -> version."""
    found: dict[str, str] = {}
    for line in VERSIONS.read_text().splitlines():
        match = re.fullmatch(r"([A-Z][A-Z0-9_]*)_VERSION=(\S*)", line.strip())
        if not match:
            continue
        for prefix in IMAGES[image]["prefixes"]:
            if match.group(1).startswith(prefix) and match.group(2):
                found[canonical(match.group(1).removeprefix(prefix).replace("_", "-"))] = match.group(2)
    return found


def trainer_requirements() -> list[str]:
    """What `pip install ".[trainer]"` adds: the project's own dependencies and its trainer extra."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["trainer"]]


def requirements(image: str, leave_out: frozenset[str] = frozenset()) -> list[str]:
    skipped = {**SOURCE_BUILT, **SOURCE_BUILT_BY_IMAGE.get(image, {})}.keys() | leave_out
    wanted = []
    for name, version in sorted(pins(image).items()):
        if name in skipped:
            continue
        extra = f"[{EXTRAS[name]}]" if name in EXTRAS else ""
        wanted.append(f"{name}{extra}=={version}")
    return wanted + trainer_requirements()


def platforms(image: str, arch: str) -> list[str]:
    return [f"manylinux_2_{minor}_{arch}" for minor in range(GLIBC[image], 16, -1)] + [
        f"manylinux2014_{arch}"
    ]


# The Python the lock is resolved for: Dockerfile.cuda's `cpu` target's (images/versions.env CPU_PYTHON).
LOCK_PYTHON = "3.11"


def resolve(
    image: str,
    arch: str,
    constraints: Path | None = None,
    python: str = "",
    wanted: list[str] | None = None,
    no_deps: bool = False,
) -> dict[str, dict]:
    """pip's answer for the image's pins on one architecture: canonical name -> its metadata."""
    python = python or IMAGES[image]["python"]
    with tempfile.TemporaryDirectory() as tmp:
        wheels = Path(tmp) / "wheels"
        for name, version in SDIST_ONLY.items():
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "wheel",
                    "--quiet",
                    "--no-deps",
                    f"{name}=={version}",
                    "-w",
                    str(wheels),
                ],
                check=True,
            )
        report = Path(tmp) / "report.json"
        # fast-deps reads each wheel's metadata through HTTP range requests: without it pip
        # downloads every wheel whole (torch and the CUDA libraries are gigabytes per platform,
        # enough to fill a CI machine's disk) to read a few kilobytes of each.
        command = [
            sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
            "--use-feature=fast-deps", "--no-cache-dir",
            "--report", str(report), "--target", str(Path(tmp) / "target"),
            "--only-binary=:all:", "--implementation", "cp", "--python-version", python,
            "--abi", f"cp{python.replace('.', '')}", "--find-links", str(wheels),
        ]  # fmt: skip
        for platform in platforms(image, arch):
            command += ["--platform", platform]
        if constraints is not None:
            command += ["-c", str(constraints)]
        if no_deps:
            command.append("--no-deps")
        if wanted is None:
            wanted = requirements(image)
        result = subprocess.run([*command, *wanted], capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"pip found no {image} stack for Python {python} on {arch}:\n{result.stderr}")
        installed = json.loads(report.read_text())["install"]
    return {canonical(i["metadata"]["name"]): i["metadata"] for i in installed}


def versions_of(resolved: dict[str, dict]) -> dict[str, str]:
    """name -> version, without grpo-operator (what `.[trainer]` installs from the source)."""
    return {name: meta["version"] for name, meta in resolved.items() if name != "grpo-operator"}


def read_lock(path: Path = LOCK) -> dict[str, str]:
    locked = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            locked[canonical(name)] = version.strip()
    return locked


def write() -> None:
    resolved = versions_of(resolve("cuda", "x86_64", python=LOCK_PYTHON))
    lines = [f"{name}=={version}" for name, version in sorted(resolved.items())]
    header = LOCK_HEADER.format(source_built=", ".join(sorted(SOURCE_BUILT)))
    LOCK.write_text(header + "\n".join(lines) + "\n")
    print(f"{LOCK.relative_to(REPO)}: {len(lines)} packages")


def check(image: str, arch: str) -> None:
    apart = NEEDS_TORCH_INDEX.get((image, arch))
    wanted = requirements(image, frozenset({apart} if apart else ()))
    resolved = versions_of(resolve(image, arch, LOCK if image == "cuda" else None, wanted=wanted))
    if apart:
        own = pins(image)
        (meta,) = resolve(image, arch, wanted=[f"{apart}=={own[apart]}"], no_deps=True).values()
        torch = [
            r for r in meta.get("requires_dist", []) if canonical(re.split(r"[ =<>!~;\[]", r)[0]) == "torch"
        ]
        if not any(re.search(rf"==\s*{re.escape(own['torch'])}(\+\w+)?\s*($|;)", r) for r in torch):
            raise SystemExit(f"{apart} {own[apart]} on {arch} asks for {torch}, not torch {own['torch']}")
        resolved[apart] = meta["version"]
    if image == "cuda" and arch == "x86_64":
        locked = read_lock()
        unlocked = sorted(f"{n}=={v}" for n, v in resolved.items() if locked.get(n) != v)
        if unlocked:
            raise SystemExit(f"{LOCK.name} does not pin these (python images/lock.py write): {unlocked}")
    print(f"{image} on {arch}: {len(resolved)} packages resolve")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("write")
    checking = sub.add_parser("check")
    checking.add_argument("image", choices=sorted(IMAGES))
    checking.add_argument("arch", choices=["x86_64", "aarch64"])
    args = parser.parse_args()
    if args.command == "write":
        write()
    else:
        check(args.image, args.arch)


if __name__ == "__main__":
    main()
