"""What each trainer image holds, as the trainer reads it: one small JSON per image flavour.

    python images/manifest.py write [FLAVOUR ...]   # trainer/grpo_trainer/trainer_image/<flavour>.json
    python images/manifest.py check                 # the committed manifests are what `write` makes

`grpo-train plan` (and `kubectl grpo plan`) plan a job for the image it will run in, not for the
machine they run on: whether the image has bitsandbytes (the recipe's adamw_8bit), vLLM, verl,
TensorBoard or llama.cpp's tools decides values of the plan. The trainer package carries one
manifest per image that images/build.sh builds, made from the same pins the image is built from
(images/versions.env, and images/trainer/cuda.lock for the dependencies that the CUDA and CPU
images install under it), and each image names its own flavour (`GRPO_IMAGE_FLAVOUR`), so the
pod plans from the same file the laptop did and checks it against what is installed at start-up
(grpo_trainer/trainer_image).

A manifest names the Python packages the image installs by name (those its Dockerfile's `pip
install` lines name; tests/unit/images/test_manifests.py holds the two together), at their pinned
versions, plus the few dependencies the trainer asks about (DEPENDENCIES_ASKED), at the lock's.
A package the trainer asks about that a manifest does not list is one the image does not have.

images/build.sh runs `write` for the image it builds, before `docker build`, so an image always
ships the manifest of its own pins; `check` (CI) fails when a committed manifest is stale.
Standard library only, like images/lock.py.
"""

from __future__ import annotations

import argparse
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VERSIONS = REPO / "images" / "versions.env"
LOCK = REPO / "images" / "trainer" / "cuda.lock"
OUT = REPO / "trainer" / "grpo_trainer" / "trainer_image"


@dataclass(frozen=True)
class Flavour:
    """One trainer image images/build.sh builds: its name, its pins and what it installs by name."""

    repository: str
    """The image's name in the registry (images/build.sh: `$REGISTRY/<repository>:$TAG<suffix>`)."""
    prefixes: tuple[str, ...]
    """Its versions.env prefixes, a later one over an earlier (as build.sh passes them)."""
    packages: tuple[str, ...]
    """Python packages its Dockerfile installs by name (canonical names)."""
    locked: bool
    """Installed under images/trainer/cuda.lock, so a dependency's version is the lock's."""
    tag_suffix: str = ""
    tools: tuple[tuple[str, str, str], ...] = ()
    """(tool, its version's versions.env key without the prefix, where the image puts it)."""


# The stacks, as the Dockerfiles install them (Dockerfile.cuda's `cpu` and `cuda` targets,
# Dockerfile.ascend with the ASCEND_* and SEED_A2_* pins).
_CPU = ("torch", "torchvision", "torchaudio", "ray", "transformers", "trl", "peft", "datasets")
_CUDA = (
    *_CPU,
    "vllm",
    "flash-attn",
    "verl",
    "transferqueue",
    "mathruler",
    "cachetools",
    "qwen-vl-utils",
    "bitsandbytes",
    "gguf",
    "sentencepiece",
)
_ASCEND = (
    "torch",
    "torch-npu",
    "torchvision",
    "vllm",
    "vllm-ascend",
    "verl",
    "transformers",
    "transferqueue",
    "mathruler",
    "cachetools",
    "qwen-vl-utils",
    "ray",
)
FLAVOURS = {
    "cuda": Flavour(
        "trainer-cuda",
        ("CUDA_",),
        _CUDA,
        locked=True,
        tools=(("llama.cpp", "LLAMA_CPP_PYTHON_VERSION", "/opt/llama.cpp"),),
    ),
    "cpu": Flavour("trainer-cpu", ("CUDA_", "CPU_"), _CPU, locked=True),
    "ascend": Flavour("trainer-ascend", ("ASCEND_",), _ASCEND, locked=False),
    "ascend-a2-seed": Flavour(
        "trainer-ascend", ("ASCEND_", "SEED_A2_"), _ASCEND, locked=False, tag_suffix="-a2-seed"
    ),
}
DEPENDENCIES_ASKED = {
    # TRL's trainer runs on it; the engine reads its version for the plan's title.
    "accelerate": ("cpu", "cuda"),
    # logging.tensorboard and logging.wandb need them (verl's dependencies in the CUDA image).
    "tensorboard": ("cuda",),
    "wandb": ("cuda",),
}
"""Dependencies the trainer asks about, and the locked images that have them (at the lock's version)."""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(prefixes: tuple[str, ...]) -> dict[str, str]:
    """versions.env's values under the prefixes, the prefix cut off; a later prefix wins."""
    found: dict[str, str] = {}
    lines = VERSIONS.read_text(encoding="utf-8").splitlines()
    for prefix in prefixes:
        for line in lines:
            key, sep, value = line.strip().partition("=")
            if sep and key.startswith(prefix):
                found[key.removeprefix(prefix)] = value
    return found


def read_lock() -> dict[str, str]:
    locked = {}
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            locked[canonical(name)] = version.strip()
    return locked


def project_version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])


def manifest(name: str) -> dict[str, object]:
    """The manifest of one flavour, from its pins (and the lock)."""
    flavour = FLAVOURS[name]
    pinned = pins(flavour.prefixes)
    versions = {canonical(k.removesuffix("_VERSION").replace("_", "-")): v for k, v in pinned.items()}
    packages: dict[str, str] = {}
    for package in flavour.packages:
        version = versions.get(package)
        if version == "":
            continue  # an empty pin skips the package (verl 0.7's stack has no TransferQueue)
        if version is None:
            raise SystemExit(
                f"images/manifest.py: {name} installs {package}, which versions.env does not pin"
            )
        packages[package] = version
    if flavour.locked:
        lock = read_lock()
        for package, images in DEPENDENCIES_ASKED.items():
            if name in images:
                packages[package] = lock[package]
    packages["grpo-operator"] = project_version()
    tools = {tool: {"version": pinned[key], "path": path} for tool, key, path in flavour.tools}
    return {
        "flavour": name,
        "image": f"{flavour.repository}:{project_version()}{flavour.tag_suffix}",
        "python": pinned.get("PYTHON", "").removeprefix("python") or None,
        "packages": dict(sorted(packages.items())),
        "tools": tools,
        "madeBy": "python images/manifest.py write: images/versions.env, and images/trainer/cuda.lock for what an image installs under it",
    }


def render(name: str) -> str:
    return json.dumps(manifest(name), indent=2) + "\n"


def write(names: list[str]) -> None:
    unknown = sorted(set(names) - set(FLAVOURS))
    if unknown:
        raise SystemExit(f"images/manifest.py: no image flavour {', '.join(unknown)} ({', '.join(FLAVOURS)})")
    for name in names or sorted(FLAVOURS):
        path = OUT / f"{name}.json"
        path.write_text(render(name), encoding="utf-8")
        print(f"{path.relative_to(REPO)}: the {name} image's manifest")


def check() -> None:
    stale = [
        name
        for name in sorted(FLAVOURS)
        if not (OUT / f"{name}.json").is_file()
        or (OUT / f"{name}.json").read_text(encoding="utf-8") != render(name)
    ]
    if stale:
        raise SystemExit(f"stale image manifests (python images/manifest.py write): {', '.join(stale)}")
    print(f"{len(FLAVOURS)} image manifests match their pins")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    writing = sub.add_parser("write")
    writing.add_argument("flavours", nargs="*", help=f"default: all ({', '.join(FLAVOURS)})")
    sub.add_parser("check")
    args = parser.parse_args()
    if args.command == "write":
        write(args.flavours)
    else:
        check()


if __name__ == "__main__":
    main()
